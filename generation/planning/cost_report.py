"""What `plan --full` prints: the judge and rerank rows of generation/planning/costing.py as one table with every
column, and its notes; and the rows as JSON (`plan --json`, which `slurm judge --from-plan` reads). The default view
is generation/planning/plan_view.py's."""

from __future__ import annotations

from generation.planning.costing import NODE_GPUS, RERANK_TOKENS_ASSUMED, Costing, CostRow, judge_rows, rerank_rows
from generation.planning.plan import Plan
from generation.planning.plan_view import budget, plan_precision


def plan_table(plan: Plan, costing: Costing, rerank_depth: int, rerank_tokens: float = RERANK_TOKENS_ASSUMED):
    """The judge rows and the rerank rows as one rich table, and the notes that go with them."""
    from rich.table import Table

    cal = costing.calibration
    judged, notes = judge_rows(plan, costing)
    reranked, rerank_notes = rerank_rows(plan, costing, rerank_depth, rerank_tokens)
    title = (
        f"{costing.judge.name} judge ({costing.mode}, {costing.backend}) and "
        f"{costing.reranker.name} reranker on {cal.device}, calibrated {cal.versions.get('measured', '?')}"
    )
    table = Table(title=title)
    for column in (
        "row",
        "prompt",
        "pairs / docs",
        "tokens",
        "precision",
        "utilisation",
        "PFLOPs",
        "prefill GPU-h",
        "decode GPU-h",
        "GPU-hours",
        "GPU-hours, prefix cached",
        f"{NODE_GPUS}-GPU node items/s",
        "decode batch",
        "GPUs a copy",
        "utilisation from",
    ):
        table.add_column(column, justify="right")
    sources: dict[str, str] = {}  # a long source in the table made it ~500 characters wide: a short key there

    def key(source: str | None) -> str | None:
        return sources.setdefault(source, f"[{len(sources) + 1}]") if source else None

    for row in judged + reranked:
        table.add_row(
            row.label,
            row.prompt,
            f"{row.items:,}",
            f"{row.tokens:,.0f}",
            row.precision,
            f"{row.share:.1%}",
            f"{row.pflops:,.1f}",
            f"{row.prefill_hours:,.1f}",
            f"{row.decode_hours:,.1f}",
            f"{row.hours:,.1f}",
            f"{row.cached_hours:,.1f}",
            f"{row.node_rate:,.2f}",
            f"{row.decode_batch or '-'}",
            f"{row.gpus}",
            " ".join(filter(None, (key(row.source), key(row.suffix_source), row.whole_model and "whole-model figure"))),
        )
    keyed = [f"{k} utilisation from {source}." for source, k in sources.items()]
    utilisations = sorted({f"{r.precision}: {r.source}" for r in judged})
    suffixes = sorted({f"{r.precision}: {r.suffix_source}" for r in judged if r.suffix_source})
    shares = [f"Judge utilisation: {'; '.join(utilisations) or 'none'}."]
    if suffixes:
        shares.append(f"Document-first suffixes: {'; '.join(suffixes)}.")
    notes = shares + keyed + [f"Calibration: {cal.source}."] + notes + rerank_notes
    return table, notes


def plan_json(
    plan: Plan, costing: Costing, profile, rerank_depth: int, rerank_tokens: float = RERANK_TOKENS_ASSUMED
) -> dict:
    """`plan --json`: the table's rows as numbers, the notes, and the profile they were made for (`slurm judge
    --from-plan` checks the judge config hash against its job and takes the row at the profile's precision)."""
    from dataclasses import asdict

    from generation.stages.judge import JudgeStage

    judged, notes = judge_rows(plan, costing)
    reranked, rerank_notes = rerank_rows(plan, costing, rerank_depth, rerank_tokens)
    row, line = budget(plan, judged, notes, profile)

    def as_dict(row: CostRow, stage: str) -> dict:
        return {"stage": stage, **asdict(row), "hours": row.hours, "node_rate": row.node_rate}

    return {
        "profile": {
            "name": profile.name,
            "judge_config_hash": JudgeStage.config_hash(profile),
            "precision": plan_precision(profile),
        },
        "judge": costing.judge.name,
        "reranker": costing.reranker.name,
        "mode": costing.mode,
        "device": costing.calibration.device,
        "pairs": plan.pairs,
        "subquestions": plan.subquestions,
        "sampled": plan.sampled,
        "tokenizer": plan.tokenizer,
        "tokenizer_stand_in": plan.stand_in,
        "notes": plan.notes() + notes + rerank_notes,
        "budget": {"row": as_dict(row, "judge") if row is not None else None, "line": line},
        "rows": [as_dict(r, "judge") for r in judged] + [as_dict(r, "rerank") for r in reranked],
    }
