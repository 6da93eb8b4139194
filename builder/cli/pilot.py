"""`researchy-subq pilot`: two judge settings on one sample of pairs, their agreement, their bill and a verdict
(builder/pilot/run.py). Its options are `PilotOptions`' fields (builder/pilot/options.py), then `Sharding`'s (--shard,
--num-shards) and `JsonOutput`'s (--json). Registered by builder/cli/analysis.py; results on stdout, progress and
notes on stderr."""

from __future__ import annotations

import functools

from rich.table import Table

from builder.cli.reports import JsonOutput, emit_json, print_agreement, stage_report
from builder.cli.shared_options import Sharding
from builder.cli.support import (
    check_folder_arg,
    check_writable_file,
    fail,
    notice,
    run_stage,
    say,
    shard_of,
    with_options,
)
from builder.pilot.contract import PilotGpuHours, PilotRecord
from builder.pilot.options import PilotOptions
from generation.progress import results

STAND_IN = "bi-encoder"  # the judge backend that builds no prompt (generation/profiles/backend_registry.py)


@with_options
def pilot(options: PilotOptions, sharding: Sharding, output: JsonOutput) -> None:
    """Judge one question-stratified sample of pairs under two judge settings; print their agreement, both
    settings' paper-scale GPU-hours from `plan`, and a verdict; write the pilot record (OUT/pilot.json)."""
    from builder.pilot.run import Pilot

    out, json_out = options.out, output.json_out
    check_folder_arg(out, "--out")
    check_writable_file(json_out, "--json")
    folders = {"--subquestions": options.subquestions, "--candidates": options.candidates, "--index": options.index}
    for flag, folder in folders.items():
        if not folder.is_dir():
            fail(f"{folder}: no such folder ({flag})")
    run = Pilot(options, shard_of(sharding.shard, sharding.num_shards))
    run.prepare()
    for setting in run.settings:
        label = f"pilot: setting {setting.label} on shard {run.shard.label}"
        summary = run_stage(label, "pairs", functools.partial(run.judge, setting))
        line = f"{setting.label} ({setting.describe()}): " + stage_report(
            summary, setting.profile, out / setting.folder
        )
        (notice if str(json_out) == "-" else say)(line)  # `--json -`: stdout is the record alone
    record = run_stage("pilot: agreement and plan", "steps", lambda advance: run.finish())
    if record is None:
        notice(f"pilot: shard {run.shard.label} done; {run.waiting}")
        return
    if emit_json(record.model_dump(), json_out):
        return
    print_pilot(record)
    notice(
        f"pilot record -> {out / 'pilot.json'}; judge every pair with a setting's --profile ({run.profiles['A']} or "
        f"{run.profiles['B']}), then `build-release --pilot {out / 'pilot.json'}` puts the record in the release"
    )


def print_pilot(record: PilotRecord) -> None:
    """The sample, the settings, the agreement tables, the label stability, the bills, and the verdict last (an
    undefined figure is None in the record), the agreement tables as `agreement` prints them."""
    from builder.pilot.card_text import judge_precision
    from builder.pilot.stability import batching_only, stability_line

    sample, agreement = record.sample, record.agreement
    say(
        f"sample: {sample.taken.pairs:,} pairs of {sample.taken.questions:,} questions (seed {sample.seed}), from "
        f"{sample.population['pairs']:,} pairs of {sample.population['questions']:,} questions; questions drawn "
        "whole, then pairs within them"
    )
    for label, setting in record.settings.items():
        counts = agreement.settings[label]
        said = (
            "no prompt (a stand-in judge)"
            if setting.profile.judge.backend == STAND_IN
            else f"prompt {setting.prompt.id} (sha256 {setting.prompt.sha256[:12]}), "
            f"{judge_precision(setting.profile)} (`plan` prices it as {setting.precision})"
        )
        say(
            f"{label}: {setting.given}{' with ' + ' '.join(setting.overrides) if setting.overrides else ''}"
            f" = {setting.judge}, {said}: {counts.graded:,} of {counts.pairs:,} pairs graded"
        )
    print_agreement(agreement.model_dump())
    spearman = agreement.expected_spearman
    say(f"Spearman of the expected level: {fraction(spearman.value)} (A: {spearman.a}; B: {spearman.b})")
    answer = agreement.answer
    say(
        f"answers (level >= {answer.threshold}): B's precision {fraction(answer.precision)} and recall "
        f"{fraction(answer.recall)} against A's ({answer.reference:,} answers in A, {answer.predicted:,} in "
        f"B, {answer.both:,} in both)"
    )
    if record.stability is not None:  # records written before it have none
        say(stability_line(record.stability, batching_only(record.settings["A"].profile, record.settings["B"].profile)))
    print_bills(record.gpu_hours)
    say(f"the rule: {record.verdict.rule_text}")
    say(record.verdict.line)


def fraction(value) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def print_bills(bills: PilotGpuHours) -> None:
    table = Table(title="paper-scale judging from `plan` (each setting at its precision)")
    for column in ("setting", "precision", "row", "GPU-hours", "GPU-hours, prefix cached", "utilisation from"):
        table.add_column(column, justify="right")
    for label, bill in (("A", bills.A), ("B", bills.B)):
        for row in bill.rows:
            table.add_row(label, bill.precision, row.label, f"{row.hours:,.0f}", f"{row.cached_hours:,.0f}", row.source)
        for line in bill.notes:
            say(f"{label}: {line}")
    if table.row_count:
        results.print(table)
    saved = bills.saved
    if saved is None:
        say("saved: not priced (plan gives no paper-scale row for one of the settings)")
    else:
        say(
            f"saved: B costs {saved.b:,.0f} GPU-hours at the paper's scale, A {saved.a:,.0f} (row "
            f"'{saved.row}', prefix cached): {saved.saved:,.0f} GPU-hours"
            + (f" ({saved.share:.0%} of A's)" if saved.share is not None else "")
        )
