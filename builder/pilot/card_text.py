"""The pilot record as the card states it (`pilot_markdown`: the card's pilot section, from the manifest's `pilot`
entry alone). assemble/folder.py writes the section, validate/pilot.py renders it again from the manifest and finds
it in the card verbatim; both import it from here."""

from __future__ import annotations

from pathlib import Path

from builder.pilot.contract import PilotAgreement, PilotBill, PilotConfusion, PilotEntry, PilotRecord, PilotVerdict

PILOT_HEADING = "### The pilot before judging"


ROLES = {"A": "the reference", "B": "the candidate"}


def judge_precision(profile) -> str:
    """What the judge's weights and activations were: fp8 (quantized) or its dtype. The release card's judge row
    (assemble/folder.py) and each pilot setting's precision, beside the one `plan` prices it at, state it."""
    if profile.judge.quantization == "fp8":
        return "fp8 weights and activations (dynamic per-tensor scales); dtype " + profile.judge.dtype
    return profile.judge.dtype


def number(value, digits: int = 3) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


def measure_rows(agreement: PilotAgreement, verdict: PilotVerdict) -> list[str]:
    measures, intervals = agreement.measures, agreement.confidence_95 or {}

    def row(label: str, name: str) -> str:
        low, high = intervals.get(name) or (None, None)
        interval = f"[{number(low)}, {number(high)}]" if low is not None and high is not None else "-"
        return f"| {label} | {number(measures.get(name))} | {interval} |"

    answer, spearman = agreement.answer, agreement.expected_spearman
    level = answer.threshold
    return [
        "| measure | value | 95% interval |",
        "| --- | --- | --- |",
        row("exact agreement", "exact_agreement"),
        row("within one level", "within_one_level"),
        row(f"{agreement.weights}-weighted kappa (the verdict's)", verdict.measure),
        row("kappa", "kappa"),
        row("Spearman of the level", "spearman"),
        f"| Spearman of the expected level (A: {spearman.a}; B: {spearman.b}) | {number(spearman.value)} | - |",
        f"| B's precision on A's answers (level >= {level}) | {number(answer.precision)} | - |",
        f"| B's recall of A's answers (level >= {level}) | {number(answer.recall)} | - |",
    ]


def confusion_rows(confusion: PilotConfusion) -> list[str]:
    levels = confusion.levels
    lines = ["| A \\ B | " + " | ".join(map(str, levels)) + " |", "| --- |" + " ---: |" * len(levels)]
    for level, row in zip(levels, confusion.rows_a_columns_b):
        lines.append(f"| {level} | " + " | ".join(f"{v:,}" for v in row) + " |")
    return lines


def bill_cell(bill: PilotBill) -> str:
    head = bill.headline
    return "not priced" if head is None else f"{head.cached_hours:,.0f}"


def saved_line(record: PilotRecord, labels: str) -> str:
    saved = record.gpu_hours.saved
    if saved is None:
        return "What was saved: not priced (`plan` gives no paper-scale row for one of the settings)."
    share = f" ({saved.share:.0%} of A's)" if saved.share is not None else ""
    verb = "B saves" if labels == "B" else "B would have saved (these labels are A's)"
    return (
        f"What was saved: by `plan`'s paper-scale row '{saved.row}' with the prefix cached, A costs "
        f"{saved.a:,.0f} GPU-hours and B {saved.b:,.0f}: {verb} {saved.saved:,.0f} GPU-hours{share}. "
        "These are `plan`'s projections from its H100 calibration, not measured bills."
    )


def pilot_markdown(entry: PilotEntry) -> str:
    """The card's pilot section, from the manifest's `pilot` entry alone."""
    record, labels = entry.record, entry.labels
    settings, sample, agreement, verdict = record.settings, record.sample, record.agreement, record.verdict
    made = settings[labels].prompt
    lines = [
        PILOT_HEADING,
        "",
        f"Before judging, a pilot (`researchy-subq pilot`, kit {record.code_version}) compared two judge settings "
        f"on one sample of pairs. These labels are setting {labels}'s, made with the judge prompt `{made.id}` "
        f"(sha256 `{made.sha256}`).",
        "",
        "| setting | profile | judge | prompt | precision | `plan` prices it as | paper-scale GPU-hours, prefix cached |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, s in settings.items():
        role = ROLES[label] + ("; these labels" if label == labels else "")
        given = f"`{Path(s.given).name}`" + "".join(f" with `{o}`" for o in s.overrides)
        prompt = f"`{s.prompt.id}` (sha256 `{s.prompt.sha256[:12]}`)"
        cost = bill_cell(getattr(record.gpu_hours, label))
        precision = judge_precision(s.profile)
        lines.append(f"| {label} ({role}) | {given} | {s.judge} | {prompt} | {precision} | {s.precision} | {cost} |")
    taken, population = sample.taken, sample.population
    counts = agreement.settings
    lines += [
        "",
        f"The sample: {taken.pairs:,} pairs of {taken.questions:,} questions (seed {sample.seed}), from "
        f"{population['pairs']:,} pairs of {population['questions']:,} questions. Whole questions were drawn, then "
        f"pairs within each (the rule is in manifest.json's pilot record; sample sha256 `{sample.sha256}`). "
        f"A graded {counts['A'].graded:,} of the pairs and B {counts['B'].graded:,}.",
        "",
        f"The measures are over the {agreement.coverage.both:,} pairs both graded, with A as the reference. "
        f"The 95% intervals come from {agreement.resamples:,} bootstrap resamples of whole questions.",
        "",
        *measure_rows(agreement, verdict),
        "",
        "Levels of the pairs both graded (rows A, columns B):",
        "",
        *confusion_rows(agreement.confusion),
        "",
        f"Verdict: {verdict.line}",
        "",
        f"The rule: {verdict.rule_text}.",
        "",
        saved_line(record, labels),
    ]
    return "\n".join(lines)
