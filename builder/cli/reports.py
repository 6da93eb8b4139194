"""What the CLI and the demo both print, on stdout (`results`): the stages' summary lines, and tables for agreement,
simulation, validation; and `emit_json`, the `--json PATH` (`-` for stdout) of plan, simulate, evaluate, agreement."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from builder.command_options import option
from generation.progress import console, results
from generation.storage.atomic_files import write_text_atomic

JSON_HELP = "write the result as JSON to this file; `-` writes it to stdout instead of the table"


@dataclass(frozen=True, kw_only=True)
class JsonOutput:
    """The --json option of a command whose record has no field for it (`pilot`): where `emit_json` writes."""

    json_out: Path | None = option(None, "--json", output="file", help=JSON_HELP)


def print_agreement(result: dict) -> None:
    from builder.analysis.agreement import measure_text  # its figures as the card prints them: "undefined" for none

    coverage = result["coverage"]
    results.print(
        f"{coverage['both']:,} shared pairs; {coverage['only_a']:,} only in A, {coverage['only_b']:,} only in B",
        highlight=False,
    )
    table = Table(title="agreement (A vs B)")
    for column in ("measure", "value", "95% interval"):
        table.add_column(column, justify="right")
    for name, value in result["measures"].items():
        interval = result.get("confidence_95", {}).get(name)
        low, high = (measure_text(end) for end in interval) if interval else ("", "")
        table.add_row(name, measure_text(value), Text(f"[{low}, {high}]") if interval else "")
    results.print(table)
    levels = result["confusion"]["levels"]
    matrix = Table(title="confusion (rows A, columns B)")
    matrix.add_column("A \\ B")
    for lv in levels:
        matrix.add_column(str(lv), justify="right")
    for lv, row in zip(levels, result["confusion"]["rows_a_columns_b"]):
        matrix.add_row(str(lv), *(f"{v:,}" for v in row))
    results.print(matrix)
    binary = ", ".join(
        f">={t}: {measure_text(v['agreement'])} (kappa {measure_text(v['kappa'])})" for t, v in result["binary"].items()
    )
    results.print(f"binary agreement at each threshold: {binary}", highlight=False, markup=False)
    if "system_ranking" in result:
        results.print(f"system ranking Kendall tau: {result['system_ranking']['kendall_tau']}")


def print_simulation(by_policy: dict, questions: int, repeats: int, threshold: int) -> None:
    budgets = sorted(next(iter(by_policy.values())))
    for metric in ("precision", "recall", "alpha_ndcg@10"):
        table = Table(
            title=f"{metric} by budget ({questions} questions, {repeats} seeded repeats, relevant = level "
            f">= {threshold}; mean +- 95% interval half-width)"
        )
        table.add_column("policy")
        for b in budgets:
            table.add_column(f"{b:.0%}", justify="right")
        for policy, by_budget in by_policy.items():
            table.add_row(
                policy,
                *(
                    f"{by_budget[b][metric]['mean']:.3f}\u00b1{by_budget[b][metric]['high'] - by_budget[b][metric]['mean']:.3f}"
                    for b in budgets
                ),
            )
        results.print(table, width=max(results.width, 40 + 14 * len(budgets)))  # on a terminal too


VALIDATION_STYLES = {"ok": "green", "skipped": "yellow", "FAIL": "bold red"}


def print_validation(report) -> None:
    table = Table(title=f"validate {report.release}")
    for column in ("", "check", "failures", "examples, or why it was skipped"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        mark = Text(check.status, style=VALIDATION_STYLES[check.status])
        examples = "\n".join(str(e) for e in check.examples) or check.skipped or check.note
        table.add_row(mark, Text(check.name), f"{check.failures:,}" if check.failures else "", Text(examples))
    results.print(table)


def report_retrieve(summary, profile, out) -> str:
    bm25 = profile.bm25
    return (
        f"bm25: {summary.queries:,} queries, {summary.rows:,} hits (k1={bm25.k1}, b={bm25.b}, depth {bm25.depth}) "
        f"-> {out}"
    )


def report_pool(summary, profile, out) -> str:
    sources = ", ".join(f"{n:,} {s}" for s, n in summary.by_source.items())
    return (
        f"pool ({profile.pool.rule}): {summary.candidates:,} candidates for {summary.questions:,} questions "
        f"({sources}); clicked documents missing from the corpus: {summary.clicked_missing:,} of "
        f"{summary.clicked_total:,} -> {out}"
    )


def report_judge(summary, profile, out) -> str:
    if summary.stage == "judge-budgeted":
        share = summary.judged / summary.full_pairs if summary.full_pairs else 0
        return (
            f"budgeted judge: judged {summary.judged:,} of {summary.full_pairs:,} pairs ({share:.1%} of what full "
            f"judging would cost; {summary.judged_now:,} now) for {summary.questions:,} questions; found "
            f"{summary.relevant:,} relevant pairs (level >= {profile.bandit.relevant_level}) over "
            f"{summary.relevant_documents:,} documents -> {out}"
        )
    lines = [f"resumed: {summary.chunks_done_before} chunks were already judged"] if summary.chunks_done_before else []
    levels = ", ".join(f"{level}: {summary.levels[level]:,}" for level in sorted(summary.levels, reverse=True))
    statuses = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.statuses.items()) if k != "ok")
    lines.append(
        f"judge [{summary.judge}]: {summary.pairs:,} pairs ({summary.judged_now:,} judged now); levels "
        f"{levels or '-'}; unparsed (Other): {summary.unparsed:,}"
        + (f" ({statuses})" if statuses else "")
        + (f"; non-verbatim extracts: {summary.not_verbatim:,}" if profile.judge.prompt == "r3a" else "")
        + f"; contexts cut by tokens: {summary.cut_by_tokens:,} -> {out}"
    )
    lines[-1:-1] = batch_lines_report(summary.batch_lines)
    if summary.retried:
        lines.insert(
            -1,
            f"retried: {summary.retried:,} pair{'s' if summary.retried != 1 else ''} whose request "
            f"had failed judged again; {summary.retried - summary.failed_pairs:,} now graded",
        )
    if summary.failed_pairs:
        lines[-1] += (
            f"; FAILED PAIRS: {summary.failed_pairs:,} (request_failed after their retries): run `judge` "
            "again to retry exactly those; build-release refuses the shard until then "
            "(--allow-failed-pairs publishes them)"
        )
    return "\n".join(lines)


def batch_lines_report(lines: dict | None) -> list[str]:
    """What `judge --import-batch` read that graded nothing (extra.batch_lines): counts, each with an example."""
    if not lines or not any(v["count"] for v in lines.values()):
        return []
    shown = "; ".join(
        f"{name.replace('_', ' ')} {v['count']:,} (e.g. {v['examples'][0]})" for name, v in lines.items() if v["count"]
    )
    return [f"batch result lines set aside: {shown}"]


def report_rerank(summary, profile, out) -> str:
    return f"rerank: {summary.queries:,} questions, {summary.rows:,} documents scored -> {out}"


def report_questions(summary, profile, out) -> str:
    return (
        f"{summary.questions:,} questions, {summary.subquestions:,} sub-questions, "
        f"{summary.clicked:,} clicked documents -> {out}"
    )


def report_corpus(summary, profile, out) -> str:
    rejected = ", ".join(f"{n:,} {reason}" for reason, n in summary.rejected.items()) or "none"
    return f"corpus: {summary.documents:,} documents from {summary.files:,} input files; rejected: {rejected} -> {out}"


def report_index(summary, profile, out) -> str:
    return f"index: {summary.documents:,} documents {'already built' if summary.skipped else 'built'} -> {summary.path}"


def report_import(summary, profile, out) -> str:
    levels = ", ".join(f"{level}: {summary.levels[level]:,}" for level in sorted(summary.levels, reverse=True))
    statuses = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.statuses.items()))
    documents = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.documents.items()))
    rejected = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.rejected.items())) or "none"
    return (
        f"import-labels [{summary.judge}, {summary.format}]: {summary.lines:,} lines -> {summary.rows:,} judgments "
        f"of this shard (levels {levels or '-'}; statuses {statuses or '-'}); exact duplicate lines kept once: "
        f"{summary.duplicates:,}; rejected: {rejected}; document ids: {documents or '-'}"
        + (
            f"; documents missing sub-questions: {summary.incomplete_documents:,}"
            if summary.format == "openai-batch"
            else ""
        )
        + other_text_line(summary.other_text)
        + f" -> {out}"
    )


def other_text_line(counts: dict) -> str:
    """crux-ratings with --corpus: what the authors' clicked pass graded on another document's text."""
    if not counts:
        return ""
    return (
        f"; the authors' clicked pass (crux gen_ratings_offload_qrel.py lines 82-91) graded {counts['ratings']:,} "
        f"ratings of {counts['documents']:,} documents on another document's text"
        + (
            f" ({counts['ratings_without_level']:,} of them without a level: their -1, -2 or 7)"
            if counts.get("ratings_without_level")
            else ""
        )
        + ", after "
        f"{counts['missing_clicked_documents']:,} clicked documents missing from the corpus: status "
        "imported_other_text (build-release --leave-out-other-text leaves them out)"
    )


def limited_run_notice(stage) -> str:
    return (
        f"judge --limit {stage.limit}: a smoke test, the first {stage.limit:,} pairs of the shard -> {stage.out} "
        "(beside --out, never in it; no release reads these files)"
    )


def report_limited_judge(summary, profile, out) -> str:
    folder = summary.outputs[0].parent if summary.outputs else out
    of = f" of the shard's {summary.shard_pairs:,}" if summary.shard_pairs else ""
    return (
        f"LIMITED RUN (judge --limit {summary.limit}): the first {summary.pairs or summary.limit:,} pairs{of}, a "
        f"smoke test, not a shard of the full run\n" + report_judge(summary, profile, folder)
    )


REPORTS = {
    "questions": report_questions,
    "corpus": report_corpus,
    "index": report_index,
    "retrieve": report_retrieve,
    "rerank": report_rerank,
    "pool": report_pool,
    "judge": report_judge,
    "judge-budgeted": report_judge,
    "import-labels": report_import,
    "judge-limited": report_limited_judge,
    "pilot-judge": report_judge,
}


def stage_report(summary, profile, out) -> str:
    """The line a stage's command prints when it ends: what it did, with the numbers that matter for it."""
    return REPORTS[summary.stage](summary, profile, out)


def emit_json(data, target: Path | None) -> bool:
    """`data` as JSON into the file `target`, or onto stdout when `target` is `-`: True then, and the caller prints
    no table, so stdout is one JSON document a script can parse."""
    if target is None:
        return False
    text = json.dumps(data, indent=1)
    if str(target) == "-":
        typer.echo(text)
        return True
    write_text_atomic(target, text + "\n")
    console.print(f"-> {target}", highlight=False, markup=False, soft_wrap=True)
    return False


def print_profile(name: str, profile) -> None:
    """The profile's file byte for byte on stdout (so `> mine.yaml` is a profile to edit); where it is on stderr."""
    from generation.profiles.profile import profile_path

    path = profile_path(name)
    console.print(
        f"{path}: a valid profile (config hash {profile.config_hash()})", highlight=False, markup=False, soft_wrap=True
    )
    typer.echo(path.read_text(encoding="utf-8"), nl=False)


def print_reference() -> None:
    from generation.profiles.reference import profile_reference

    typer.echo(profile_reference(), nl=False)
