"""`researchy-subq pilot`: two judge settings on one sample of pairs, their agreement, their bill and a verdict
(builder/analysis/pilot.py). Registered by builder/cli/analysis.py; results on stdout, progress and notes on stderr."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from builder.cli.reports import JSON_HELP, emit_json, print_agreement, stage_report
from builder.cli.support import (
    NUM_SHARDS,
    SHARD,
    check_folder_arg,
    check_writable_file,
    fail,
    notice,
    run_stage,
    say,
    shard_of,
)
from generation.progress import results

STAND_IN = "bi-encoder"  # the judge backend that builds no prompt (generation/backend_registry.py)

SET_HELP = "a key of setting {label}'s profile, SECTION.KEY=VALUE (e.g. judge.quantization=fp8); repeatable"


def pilot(
    a: str = typer.Option(..., "--a", help="setting A, the reference: a bundled profile name or a profile file"),
    a_set: list[str] = typer.Option([], "--a-set", help=SET_HELP.format(label="A")),
    b: str = typer.Option(..., "--b", help="setting B, the candidate: a bundled profile name or a profile file"),
    b_set: list[str] = typer.Option([], "--b-set", help=SET_HELP.format(label="B")),
    subquestions: Path = typer.Option(..., "--subquestions", help="folder from `researchy-subq questions`"),
    candidates: Path = typer.Option(..., "--candidates", help="folder of candidate pool shards"),
    index: Path = typer.Option(..., "--index", help="Lucene index (document text)"),
    out: Path = typer.Option(
        ..., "--out", help="folder for the sample, each setting's judgments (a/, b/) and pilot.json"
    ),
    pairs: int = typer.Option(2000, "--pairs", min=1, help="pairs in the sample"),
    questions: int = typer.Option(100, "--questions", min=1, help="questions drawn whole; the pairs come from them"),
    seed: int = typer.Option(0, "--seed", help="seed of the draw and of the bootstrap (>= 0)"),
    threshold: float = typer.Option(0.8, "--threshold", help="the weighted kappa B must reach to replace A"),
    weights: str = typer.Option("linear", "--weights", help="the kappa's disagreement weights: linear or quadratic"),
    answer_level: int | None = typer.Option(
        None,
        "--answer-level",
        help="a positive: level >= this (precision and recall; default: A's complexity.answer_level, training's)",
    ),
    min_recall: float = typer.Option(0.9, "--min-recall", help="B's recall of A's positives must reach this"),
    min_precision: float = typer.Option(0.9, "--min-precision", help="B's precision on A's positives must reach this"),
    require_lower_end: bool = typer.Option(
        False, "--require-lower-end", help="the verdict reads each bootstrap interval's lower end, not the estimate"
    ),
    resamples: int = typer.Option(1000, "--resamples", min=0, help="bootstrap resamples (whole questions)"),
    shard: int = SHARD,
    num_shards: int = NUM_SHARDS,
    json_out: Path | None = typer.Option(None, "--json", help=JSON_HELP),
) -> None:
    """Judge one question-stratified sample of pairs under two judge settings; print their agreement, both
    settings' paper-scale GPU-hours from `plan`, and a verdict; write the pilot record (OUT/pilot.json)."""
    from builder.analysis.pilot import Pilot, PilotInputs, PilotOptions
    from builder.analysis.pilot_record import finite
    from generation.pilot.sample import SampleRequest
    from generation.pilot.settings import load_setting

    check_folder_arg(out, "--out")
    check_writable_file(json_out, "--json")
    for folder, option in ((subquestions, "--subquestions"), (candidates, "--candidates"), (index, "--index")):
        if not folder.is_dir():
            fail(f"{folder}: no such folder ({option})")
    settings = load_setting("A", a, a_set), load_setting("B", b, b_set)
    options = PilotOptions(
        SampleRequest(pairs, questions, seed),
        threshold,
        weights,
        answer_level,
        resamples,
        min_recall=min_recall,
        min_precision=min_precision,
        lower_end=require_lower_end,
    )
    run = Pilot(*settings, PilotInputs(subquestions, candidates, index, out), options, shard_of(shard, num_shards))
    run.prepare()
    for setting in settings:
        label = f"pilot: setting {setting.label} on shard {run.shard.label}"
        summary = run_stage(label, "pairs", lambda advance, s=setting: run.judge(s, advance))
        line = f"{setting.label} ({setting.describe()}): " + stage_report(
            summary, setting.profile, out / setting.folder
        )
        (notice if str(json_out) == "-" else say)(line)  # `--json -`: stdout is the record alone
    record = run_stage("pilot: agreement and plan", "steps", lambda advance: run.finish())
    if record is None:
        notice(f"pilot: shard {run.shard.label} done; {run.waiting}")
        return
    if emit_json(finite(record), json_out):
        return
    print_pilot(record)
    notice(
        f"pilot record -> {out / 'pilot.json'}; judge every pair with a setting's --profile ({run.profiles['A']} or "
        f"{run.profiles['B']}), then `build-release --pilot {out / 'pilot.json'}` puts the record in the release"
    )


def print_pilot(record: dict) -> None:
    """The sample, the settings, the agreement tables, the label stability, the bills, and the verdict last."""
    from builder.analysis.pilot_stability import stability_line

    sample, agreement = record["sample"], record["agreement"]
    say(
        f"sample: {sample['taken']['pairs']:,} pairs of {sample['taken']['questions']:,} questions (seed "
        f"{sample['seed']}), from {sample['population']['pairs']:,} pairs of {sample['population']['questions']:,} "
        "questions; questions drawn whole, then pairs within them"
    )
    for label, setting in record["settings"].items():
        counts = agreement["settings"][label]
        said = (
            "no prompt (a stand-in judge)"
            if setting["profile"]["judge"]["backend"] == STAND_IN
            else f"prompt {setting['prompt']['id']} (sha256 {setting['prompt']['sha256'][:12]}), {setting['precision']}"
        )
        say(
            f"{label}: {setting['given']}{' with ' + ' '.join(setting['overrides']) if setting['overrides'] else ''}"
            f" = {setting['judge']}, {said}: {counts['graded']:,} of {counts['pairs']:,} pairs graded"
        )
    print_agreement(agreement)
    spearman = agreement["expected_spearman"]
    value = "undefined" if spearman["value"] is None else f"{spearman['value']:.3f}"
    say(f"Spearman of the expected level: {value} (A: {spearman['a']}; B: {spearman['b']})")
    answer = agreement["answer"]
    say(
        f"answers (level >= {answer['threshold']}): B's precision {fraction(answer['precision'])} and recall "
        f"{fraction(answer['recall'])} against A's ({answer['reference']:,} answers in A, {answer['predicted']:,} in "
        f"B, {answer['both']:,} in both)"
    )
    if "stability" in record:  # records written before it have none
        say(stability_line(record["stability"]))
    print_bills(record["gpu_hours"])
    say(f"the rule: {record['verdict']['rule_text']}")
    say(record["verdict"]["line"])


def fraction(value) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def print_bills(bills: dict) -> None:
    table = Table(title="paper-scale judging from `plan` (each setting at its precision)")
    for column in ("setting", "precision", "row", "GPU-hours", "GPU-hours, prefix cached", "utilisation from"):
        table.add_column(column, justify="right")
    for label in ("A", "B"):
        bill = bills[label]
        for row in bill["rows"]:
            table.add_row(
                label,
                bill["precision"],
                row["label"],
                f"{row['hours']:,.0f}",
                f"{row['cached_hours']:,.0f}",
                row["source"],
            )
        for line in bill["notes"]:
            say(f"{label}: {line}")
    if table.row_count:
        results.print(table)
    saved = bills.get("saved")
    if saved is None:
        say("saved: not priced (plan gives no paper-scale row for one of the settings)")
    else:
        say(
            f"saved: B costs {saved['b']:,.0f} GPU-hours at the paper's scale, A {saved['a']:,.0f} (row "
            f"'{saved['row']}', prefix cached): {saved['saved']:,.0f} GPU-hours"
            + (f" ({saved['share']:.0%} of A's)" if saved["share"] is not None else "")
        )
