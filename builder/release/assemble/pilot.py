"""A pilot record in a release (`build-release --pilot OUT/pilot.json`): checked to be about these labels, held
by the manifest (`pilot`: which setting made the labels, and the record), and stated by the card (`pilot_markdown`),
which `validate` renders again from the manifest and finds in the card verbatim (validate/pilot.py).

A record is about these labels when one of its settings has the judge config hash of the judgment shards and the
prompt (id and sha256) the release names. Its other setting names another prompt or precision; the card says so."""

from __future__ import annotations

import re
from pathlib import Path

from builder.analysis.pilot_record import labels_setting, read_pilot_record
from builder.analysis.pilot_verdict import verdict_problems
from generation.errors import InputError
from generation.judging.prompts import Prompt

PILOT_HEADING = "### The pilot before judging"
# generation/stages/judge.py `judge_description`: "{model} ({backend}, prompt {id}, mode {mode})"
PROMPT_IN_JUDGE = re.compile(r"\bprompt ([A-Za-z0-9][\w.-]*?)(?=[,;)\s]|$)")
ROLES = {"A": "the reference", "B": "the candidate"}


def named_prompts(judges) -> set[str]:
    """The prompt ids a list of judge descriptions names."""
    return {m for judge in judges for m in PROMPT_IN_JUDGE.findall(str(judge))}


def pilot_for_release(path: Path, judgment_hash: str, prompt: Prompt, imported: bool) -> dict:
    """The manifest's `pilot` entry ({"labels": "A" or "B", "record": ...}); an InputError naming the file when the
    record is not about these labels."""
    record = read_pilot_record(path)
    settings = record["settings"]
    compared = ", ".join(
        f"{label} (prompt {s['prompt']['id']}, judge config {s['judge_config_hash']})" for label, s in settings.items()
    )
    if imported:
        raise InputError(path, 0, f"a pilot of two kit judges ({compared}); these labels were imported: no prompt")
    labels = labels_setting(record, judgment_hash)
    if labels is None:
        raise InputError(
            path,
            0,
            f"the pilot compared {compared}; these judgments were made under judge config {judgment_hash} "
            f"(prompt {prompt.id}): the record is not about these labels. Pass the pilot.json of the settings "
            "that made them",
        )
    wrong = verdict_problems(record)
    if wrong:
        raise InputError(path, 0, f"{'; '.join(wrong)}: the record was edited or made by another kit")
    stated = settings[labels]["prompt"]
    if (stated["id"], stated["sha256"]) != (prompt.id, prompt.sha256):
        raise InputError(
            path,
            0,
            f"setting {labels} names prompt {stated['id']} (sha256 {stated['sha256']}); this kit's {prompt.id} "
            f"has sha256 {prompt.sha256}: the pilot judged another prompt text",
        )
    return {"labels": labels, "record": record}


def number(value, digits: int = 3) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


def measure_rows(agreement: dict, verdict: dict) -> list[str]:
    measures, intervals = agreement["measures"], agreement.get("confidence_95") or {}

    def row(label: str, name: str) -> str:
        low, high = intervals.get(name) or (None, None)
        interval = f"[{number(low)}, {number(high)}]" if low is not None and high is not None else "-"
        return f"| {label} | {number(measures.get(name))} | {interval} |"

    answer, spearman = agreement["answer"], agreement["expected_spearman"]
    level = answer["threshold"]
    return [
        "| measure | value | 95% interval |",
        "| --- | --- | --- |",
        row("exact agreement", "exact_agreement"),
        row("within one level", "within_one_level"),
        row(f"{agreement['weights']}-weighted kappa (the verdict's)", verdict["measure"]),
        row("kappa", "kappa"),
        row("Spearman of the level", "spearman"),
        f"| Spearman of the expected level (A: {spearman['a']}; B: {spearman['b']}) | {number(spearman['value'])} | - |",
        f"| B's precision on A's answers (level >= {level}) | {number(answer['precision'])} | - |",
        f"| B's recall of A's answers (level >= {level}) | {number(answer['recall'])} | - |",
    ]


def confusion_rows(agreement: dict) -> list[str]:
    levels = agreement["confusion"]["levels"]
    lines = ["| A \\ B | " + " | ".join(map(str, levels)) + " |", "| --- |" + " ---: |" * len(levels)]
    for level, row in zip(levels, agreement["confusion"]["rows_a_columns_b"]):
        lines.append(f"| {level} | " + " | ".join(f"{v:,}" for v in row) + " |")
    return lines


def bill_cell(bill: dict) -> str:
    head = bill.get("headline")
    return "not priced" if head is None else f"{head['cached_hours']:,.0f}"


def saved_line(record: dict, labels: str) -> str:
    saved = record["gpu_hours"].get("saved")
    if saved is None:
        return "What was saved: not priced (`plan` gives no paper-scale row for one of the settings)."
    share = f" ({saved['share']:.0%} of A's)" if saved.get("share") is not None else ""
    verb = "B saves" if labels == "B" else "B would have saved (these labels are A's)"
    return (
        f"What was saved: by `plan`'s paper-scale row '{saved['row']}' with the prefix cached, A costs "
        f"{saved['a']:,.0f} GPU-hours and B {saved['b']:,.0f}: {verb} {saved['saved']:,.0f} GPU-hours{share}. "
        "These are `plan`'s projections from its H100 calibration, not measured bills."
    )


def pilot_markdown(entry: dict) -> str:
    """The card's pilot section, from the manifest's `pilot` entry alone."""
    record, labels = entry["record"], entry["labels"]
    settings, sample, agreement, verdict = (record[k] for k in ("settings", "sample", "agreement", "verdict"))
    made = settings[labels]["prompt"]
    lines = [
        PILOT_HEADING,
        "",
        f"Before judging, a pilot (`researchy-subq pilot`, kit {record['code_version']}) compared two judge settings "
        f"on one sample of pairs. These labels are setting {labels}'s, made with the judge prompt `{made['id']}` "
        f"(sha256 `{made['sha256']}`).",
        "",
        "| setting | profile | judge | prompt | precision | paper-scale GPU-hours, prefix cached |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, s in settings.items():
        role = ROLES[label] + ("; these labels" if label == labels else "")
        given = f"`{Path(s['given']).name}`" + "".join(f" with `{o}`" for o in s["overrides"])
        prompt = f"`{s['prompt']['id']}` (sha256 `{s['prompt']['sha256'][:12]}`)"
        cost = bill_cell(record["gpu_hours"][label])
        lines.append(f"| {label} ({role}) | {given} | {s['judge']} | {prompt} | {s['precision']} | {cost} |")
    taken, population = sample["taken"], sample["population"]
    counts = agreement["settings"]
    lines += [
        "",
        f"The sample: {taken['pairs']:,} pairs of {taken['questions']:,} questions (seed {sample['seed']}), from "
        f"{population['pairs']:,} pairs of {population['questions']:,} questions. Whole questions were drawn, then "
        f"pairs within each (the rule is in manifest.json's pilot record; sample sha256 `{sample['sha256']}`). "
        f"A graded {counts['A']['graded']:,} of the pairs and B {counts['B']['graded']:,}.",
        "",
        f"The measures are over the {agreement['coverage']['both']:,} pairs both graded, with A as the reference. "
        f"The 95% intervals come from {agreement['resamples']:,} bootstrap resamples of whole questions.",
        "",
        *measure_rows(agreement, verdict),
        "",
        "Levels of the pairs both graded (rows A, columns B):",
        "",
        *confusion_rows(agreement),
        "",
        f"Verdict: {verdict['line']}",
        "",
        f"The rule: {verdict['rule_text']}.",
        "",
        saved_line(record, labels),
    ]
    return "\n".join(lines)
