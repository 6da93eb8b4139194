"""`validate`'s checks that one prompt made a release's labels, and that the card's pilot section is its record's.

How a release could come to hold two prompts' labels in one config, and what catches each:
- judgment shards judged under two prompts: their config hashes differ (the prompt is in the judge section), so
  build-release refuses them (assemble/lineage.py); shards or records merged by hand then name two prompts in
  their judges (`judge_description` writes "prompt ID"), which build-release refuses and `check_one_prompt` catches
  in the manifest's judges;
- imported labels have no prompt of their own, but OpenAI Batch answers were parsed with a prompt's parser: that
  parser must be the profile's prompt, and only one (`imported.parsers`);
- a pilot record (`build-release --pilot`): the setting that made the labels must name the release's prompt and
  judge config; its other setting's prompt is said in the card's pilot section, which must be the record's
  (`check_pilot`, rendered again by builder/pilot/card_text.py).

The manifest's `pilot` is read through its contract (builder/pilot/contract.py `PilotEntry`): a key missing, added or
of another type fails the manifest check, naming it, before these checks run.
"""

from __future__ import annotations

import math

from builder.pilot.card_text import PILOT_HEADING, pilot_markdown
from builder.pilot.contract import PilotEntry
from builder.pilot.figures import figure_problems
from builder.release.contract import Manifest
from generation.judging.prompts import get_prompt
from generation.stages.judge import named_prompts

ONE_PROMPT = "one prompt made the labels: the manifest's, its profile's, every judge's and the pilot's labels setting's"
PILOT = (
    "the card's pilot section is the manifest's pilot record, and the record is about these labels, its figures those "
    "of its confusion table"
)


def check_one_prompt(manifest: Manifest, profile, check) -> None:
    """The manifest's prompt is its profile's, and no judge, import parser or pilot labels setting names another."""
    stated = manifest.prompt
    own = profile.judge.prompt if profile is not None else None
    imported = manifest.imported
    if imported is not None:
        parsers = set(imported.parsers)
        if len(parsers) > 1 or (own is not None and parsers - {own}):
            check.fail(
                f"manifest.json: the import parsed answers with the prompts {sorted(parsers)}; its profile's is {own}: "
                "labels of two prompts in one config"
            )
        return
    if stated is None:
        check.fail("manifest.json: no prompt (id and sha256) for labels the kit judged")
        return
    if own is not None and stated.id != own:
        check.fail(f"manifest.json: prompt {stated.id}, but its profile's judge uses {own}")
    judges = manifest.models.judge
    other = sorted(named_prompts([judges]) - {stated.id})
    if other:
        check.fail(
            f"manifest.json: the judges name the prompt{'s' if len(other) > 1 else ''} {', '.join(other)} beside "
            f"{stated.id} ({judges!r}): labels of two prompts in one config"
        )
    pilot = manifest.pilot
    if pilot is not None:
        made = pilot.record.settings[pilot.labels].prompt
        if (made.id, made.sha256) != (stated.id, stated.sha256):
            check.fail(
                f"manifest.json: the pilot's setting {pilot.labels!r} made the labels with prompt {made.id!r} (sha256 "
                f"{made.sha256}), the manifest names {stated.id} (sha256 {stated.sha256})"
            )


def check_pilot(body: str, manifest: Manifest, judgment_hash: str | None, check) -> None:
    """No pilot section without a record; with one: the record is about these labels, its figures follow from its
    confusion table and its verdict and saving from its figures, its prompts are the kit's, and the card's section is
    the record rendered again."""
    entry = manifest.pilot
    if entry is None:
        if PILOT_HEADING in body:
            check.fail(f"README.md has a pilot section ({PILOT_HEADING!r}) and manifest.json no pilot record")
        else:
            check.skip("no pilot record (and no pilot section in README.md)")
        return
    problems = record_problems(entry, judgment_hash)
    section = pilot_markdown(entry)
    for problem in problems:
        check.fail(f"manifest.json: pilot record: {problem}")
    if section not in body:
        card = body[body.find(PILOT_HEADING) :].split("\n\n#", 1)[0] if PILOT_HEADING in body else ""
        first = next(
            (f"card {c!r}, record {r!r}" for c, r in zip(card.splitlines(), section.splitlines()) if c != r),
            "no pilot section in README.md",
        )
        check.fail(f"README.md: the pilot section is not the manifest's record rendered ({first})")


def record_problems(entry: PilotEntry, judgment_hash: str | None) -> list[str]:
    """What is inconsistent in a pilot entry: the labels setting, the prompts, the figures against the confusion table,
    the verdict and the saving."""
    record, labels = entry.record, entry.labels
    settings, agreement = record.settings, record.agreement
    problems = []
    made = settings[labels].judge_config_hash
    if judgment_hash is not None and made != judgment_hash:
        problems.append(f"setting {labels} has judge config {made}, the labels {judgment_hash}")
    for label, setting in settings.items():
        prompt = setting.prompt
        try:
            kit = get_prompt(prompt.id).sha256
        except KeyError:
            problems.append(f"setting {label}'s prompt {prompt.id!r} is none of the kit's")
            continue
        if prompt.sha256 != kit:
            problems.append(f"setting {label}'s prompt {prompt.id} has sha256 {prompt.sha256}, the kit's {kit}")
    problems += figure_problems(record)
    counted = sum(map(sum, agreement.confusion.rows_a_columns_b))
    if counted != agreement.coverage.both or counted > record.sample.taken.pairs:
        problems.append(
            f"the confusion table counts {counted:,} pairs, the coverage {agreement.coverage.both:,}, the "
            f"sample {record.sample.taken.pairs:,}"
        )
    saved = record.gpu_hours.saved
    if saved is not None and not math.isclose(saved.saved, saved.a - saved.b, rel_tol=1e-9, abs_tol=1e-6):
        problems.append(f"saved {saved.saved} GPU-hours, but A's {saved.a} less B's {saved.b} differ")
    return problems
