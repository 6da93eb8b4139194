"""The text `researchy-subq train` prints: what each batching puts among in-batch negatives, then dev (which
chose the model: every evaluation of the run) and test (measured once, for the chosen model, beside the base model
it started from), as Markdown tables that name what was ranked (they paste into a model card or an issue)."""

from __future__ import annotations

from builder.training.measure import METRICS
from generation.profiles.profile import Profile


def in_batch_lines(report, profile: Profile) -> list[str]:
    lines = [
        f"In-batch negatives at batch size {profile.train.batch_size}, one epoch: a false negative is a document judged >= "
        f"{profile.complexity.answer_level} for the anchor; judged between: levels "
        f"{profile.training.negative_level + 1}-{profile.complexity.answer_level - 1}:",
        "",
        "| batching | false negatives | judged between | of in-batch negatives | rows hit | same-question pairs "
        "| batches | rows a batch | rows used |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, count in report.in_batch.items():
        if not count.batches:  # drop_last where no batch fills: the sampler refuses rather than yield nothing
            size = profile.train.batch_size
            lines.append(f"| {name} | - | - | - | - | - | 0 | - | 0% (refused: no batch of {size} fills) |")
            continue
        lines.append(
            f"| {name} | {count.false_negatives:,} | {count.between:,} | {count.negatives:,} | "
            f"{count.rows_hit:,} of {count.rows:,} | {count.same_question_pairs:,} | {count.batches:,} | "
            f"{count.rows_per_batch:.1f} | {count.rows / max(report.rows, 1):.0%} |"
        )
    return lines


def split_note(split: str, scores: dict) -> str:
    missing = scores["documents missing"]
    return (
        f"{split}: {scores['sub-questions']:,} sub-questions, {scores['questions']:,} questions; ranked: "
        f"{scores['ranking']}"
        + (f" ({missing:,} of the split's judged documents have no text in your copy)" if missing else "")
    )


def dev_lines(report) -> list[str]:
    dev = report.dev
    chosen = dev["chosen"]["step"]
    lines = [
        f"dev, which chose the model (every evaluation of the run; chosen: the best ndcg@10 sub-questions, step {chosen:,}):",
        "",
        "| model | step | " + " | ".join(METRICS) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in METRICS) + " |",
        f"| {report.base_model} (base) | 0 | " + " | ".join(f"{dev['base'][m]:.4f}" for m in METRICS) + " |",
    ]
    for entry in dev["checkpoints"]:
        name = "**chosen**" if entry["step"] == chosen else "checkpoint"
        lines.append(f"| {name} | {entry['step']:,} | " + " | ".join(f"{entry[m]:.4f}" for m in METRICS) + " |")
    return [*lines, "", split_note("dev", dev["base"])]


def test_lines(report) -> list[str]:
    test = report.test
    base, chosen = test["base"], test["chosen"]
    lines = [
        "test, measured once, for the chosen model (the base model beside it for reference):",
        "",
        f"| metric | {report.base_model} (base) | chosen | change |",
        "| --- | ---: | ---: | ---: |",
    ]
    for metric in METRICS:
        lines.append(f"| {metric} | {base[metric]:.4f} | {chosen[metric]:.4f} | {chosen[metric] - base[metric]:+.4f} |")
    return [*lines, "", split_note("test", chosen)]


def render_report(report, profile: Profile) -> str:
    lines = [
        f"Training rows: {report.rows:,} (train split's hard-negatives rows with every text; "
        f"{report.left_out:,} left out), {report.steps:,} steps in {report.seconds:,.0f} s",
        "",
        *in_batch_lines(report, profile),
    ]
    for section in (dev_lines(report) if report.dev else [], test_lines(report) if report.test else []):
        if section:
            lines += ["", *section]
    if not report.dev:
        lines += ["", "No dev split: the model of the last step is kept."]
    return "\n".join(lines)
