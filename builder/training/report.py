"""The text `researchy-subq train` prints: what each batching puts among in-batch negatives, then base vs fine-tuned on
each evaluation split, as Markdown tables (they paste into a model card or an issue)."""

from __future__ import annotations

from builder.training.measure import METRICS
from generation.profiles import Profile


def render_report(report, profile: Profile) -> str:
    settings = profile.train
    total = report.rows
    lines = [
        f"Training rows: {report.rows:,} (train split's hard-negatives rows with every text; "
        f"{report.left_out:,} left out), {report.steps:,} steps in {report.seconds:,.0f} s",
        "",
        f"In-batch negatives at batch size {settings.batch_size}, one epoch: a false negative is a document judged >= "
        f"{profile.complexity.answer_level} for the anchor; judged between: levels "
        f"{profile.training.negative_level + 1}-{profile.complexity.answer_level - 1}:",
        "",
        "| batching | false negatives | judged between | of in-batch negatives | rows hit | same-question pairs "
        "| batches | rows a batch | rows used |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, count in report.in_batch.items():
        lines.append(
            f"| {name} | {count.false_negatives:,} | {count.between:,} | {count.negatives:,} | "
            f"{count.rows_hit:,} of {count.rows:,} | {count.same_question_pairs:,} | {count.batches:,} | "
            f"{count.rows_per_batch:.1f} | {count.rows / max(total, 1):.0%} |"
        )
    lines += [
        "",
        f"{settings.model} before and after fine-tuning (dense retrieval over each split's judged "
        "documents; the kit's evaluate):",
        "",
        "| split | metric | base | fine-tuned | change |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for split, by_model in report.scores.items():
        base, tuned = by_model["base"], by_model["fine-tuned"]
        for metric in METRICS:
            lines.append(
                f"| {split} | {metric} | {base[metric]:.4f} | {tuned[metric]:.4f} | "
                f"{tuned[metric] - base[metric]:+.4f} |"
            )
    for split, by_model in report.scores.items():
        base = by_model["base"]
        lines.append(
            f"\n{split}: {base['sub-questions']:,} sub-questions, {base['questions']:,} questions, "
            f"{base['documents']:,} judged documents ranked"
            + (f" ({base['documents missing']:,} without a text in your copy)" if base["documents missing"] else "")
        )
    return "\n".join(lines)
