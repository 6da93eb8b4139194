"""`plan`'s compact view: at most 100 columns, whatever the terminal, piped or not. It names the profile, says in one
sentence which row to budget and why, shows the profile's own prompt's rows first (paper scale first), then the other
prompt's and the rerank stage's, each row with what priced it (a measurement's device and date, or what was
assumed), and its notes after the tables, wrapped. `plan --full` prints every column and note
(generation/planning/cost_report.py); `plan --json` the numbers."""

from __future__ import annotations

import textwrap
from io import StringIO

from generation.planning.costing import Costing, CostRow, judge_rows, rerank_rows
from generation.planning.plan import PAPER_PAIRS, Plan

WIDTH = 100
LABELS = ("paper, assumed", "paper, measured", "these pairs")  # a prompt's rows in the order shown


def plan_precision(profile) -> str:
    """The precision a profile's judge runs at, as the plan's rows name it: fp8 when it quantizes to fp8, else bf16."""
    return "fp8" if profile.judge.quantization == "fp8" else "bf16"


def budget_label(plan: Plan) -> tuple[str, str]:
    """Which paper-scale row to budget, and why: this corpus's measured prompts when enough sampled documents reach
    the cut and the judge's own tokenizer counted them; else the stated assumption (documents at the cut)."""
    reach = f"{plan.long_documents} of {plan.sampled} sampled documents reach the {plan.context_words}-word cut"
    if plan.measured_is_representative and not plan.stand_in:
        return "paper, measured", f"{reach} and the judge's own tokenizer counted them: this corpus's own prompts"
    if plan.stand_in:
        return "paper, assumed", (
            f"the judge's tokenizer stood in ({reach}): 'paper, measured' counts another tokenizer's tokens, "
            "'paper, assumed' the paper's documents at the cut"
        )
    return "paper, assumed", (
        f"only {reach}: 'paper, measured' prices shorter documents than the paper's, 'paper, assumed' prices them "
        "at the cut"
    )


def budget(plan: Plan, rows: list[CostRow], notes: list[str], profile) -> tuple[CostRow | None, str]:
    """The row a user should budget (the profile's own prompt at its own precision, at the paper's scale) and one
    sentence saying so, and why."""
    prompt, precision = profile.judge.prompt, plan_precision(profile)
    label, why = budget_label(plan)
    row = next((r for r in rows if (r.label, r.prompt, r.precision) == (label, prompt, precision)), None)
    here = next((r for r in rows if (r.label, r.prompt, r.precision) == ("these pairs", prompt, precision)), None)
    if row is None:
        reason = next((n for n in notes if f"{precision}:" in n and "rows left out" in n), "no utilisation measured")
        return None, f"Budget: no {precision} row of {prompt} to budget ({reason})."
    cached = (
        f" ({row.cached_hours:,.1f} with the prefix cache's saving, not measured)"
        if row.cached_hours < row.hours - 0.05
        else ""
    )
    these = (
        f" Row 'these pairs' ({here.hours:,.1f}) prices the {here.items:,} pairs at hand, as `slurm judge "
        "--from-plan` times them."
        if here is not None
        else ""
    )
    return row, (
        f"Budget {row.hours:,.1f} GPU-hours for the paper's {PAPER_PAIRS:,} pairs{cached}: row '{label}', {prompt}, "
        f"{precision} (the profile's precision), because {why}.{these}"
    )


def wrapped(line: str) -> list[str]:
    return textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_on_hyphens=False) or [""]


def rendered(table) -> list[str]:
    from rich.console import Console

    out = StringIO()
    Console(file=out, width=WIDTH, color_system=None, highlight=False, legacy_windows=False).print(table)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def table_of(rows: list[CostRow], keys: dict, first_column: str, items: str | None = None):
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    table.add_column(first_column, no_wrap=True)
    table.add_column("precision", no_wrap=True)
    if items:
        table.add_column(items, justify="right", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("GPU-hours", justify="right", no_wrap=True)
    if not items:
        table.add_column("with cache", justify="right", no_wrap=True)
    table.add_column("priced from", overflow="fold")
    for row in rows:
        sources = [row.whole_model] if row.whole_model else [row.source, row.suffix_source]
        key = "".join(keys.setdefault(source, f"[{len(keys) + 1}]") for source in sources if source)
        cells = [row.label.removeprefix("rerank, ").replace(" questions)", ")"), row.precision]
        cells += [f"{row.items:,}"] if items else []
        cells += [f"{row.tokens:,.0f}", f"{row.hours:,.1f}"]
        cells += [] if items else [f"{row.cached_hours:,.1f}"]
        table.add_row(*cells, f"{key} {row.origin}")
    return table


def ordered(rows: list[CostRow], prompt: str, precision: str) -> list[CostRow]:
    mine = [r for r in rows if r.prompt == prompt and r.label in LABELS]
    return sorted(mine, key=lambda r: (LABELS.index(r.label), r.precision != precision, r.precision))


def header(profile, costing: Costing) -> list[str]:
    """The line naming the profile and what it is priced on."""
    cal = costing.calibration
    return wrapped(
        f"plan for profile {profile.name}: the {costing.judge.name} judge, prompt {profile.judge.prompt}, "
        f"{costing.mode} mode, {costing.backend} backend, {plan_precision(profile)}; priced on {cal.device} "
        f"(calibration of {cal.versions.get('measured', '?')}). GPU-hours are one GPU's hours, summed."
    )


def compact_view(
    plan: Plan, costing: Costing, profile, rerank_depth: int, rerank_tokens: float, more_notes: list[str]
) -> list[str]:
    """The lines `plan` prints by default."""
    judged, notes = judge_rows(plan, costing)
    reranked, rerank_notes = rerank_rows(plan, costing, rerank_depth, rerank_tokens)
    prompt, precision = profile.judge.prompt, plan_precision(profile)
    lines = header(profile, costing)
    _, sentence = budget(plan, judged, notes, profile)
    lines += [""] + wrapped(sentence)
    keys: dict[str, str] = {}
    others = list(dict.fromkeys(r.prompt for r in judged if r.prompt != prompt))
    sections = [(f"{prompt}: the profile's own prompt ({profile.name})", ordered(judged, prompt, precision))]
    sections += [
        (f"{other}: for comparison (not this profile's prompt)", ordered(judged, other, precision)) for other in others
    ]
    for title, rows in sections:
        if rows:
            lines += ["", *wrapped(title), *rendered(table_of(rows, keys, "row"))]
    if reranked:
        title = f"rerank stage: {costing.reranker.name}, {rerank_depth} documents a question"
        lines += ["", *wrapped(title), *rendered(table_of(reranked, keys, "questions", "documents"))]
    keyed = [f"{key} {source}." for source, key in keys.items()]
    summary = plan.notes()[:1] + [n for n in plan.notes() if "stood in" in n or "the same pairs with the document" in n]
    kept = [n for n in notes if n.startswith(("Judge as the", "vllm,")) or "left out" in n]
    lines += [""]
    for note in keyed + summary + kept + rerank_notes + more_notes:
        lines += wrapped(note)
    lines += wrapped(
        "Every row, column and note: add --full. The rows as numbers: --json FILE, or --json - for stdout."
    )
    return lines
