"""A pilot record in a release (`build-release --pilot OUT/pilot.json`): read through its contract
(builder/pilot/record.py), checked to be about these labels, held by the manifest (`pilot`: which setting made the
labels, and the record), and stated by the card (`pilot_markdown`, builder/pilot/card_text.py), which `validate`
renders again from the manifest and finds in the card verbatim (validate/pilot.py).

A record is about these labels when one of its settings has the judge config hash of the judgment shards and the
prompt (id and sha256) the release names. Its figures must follow from its confusion table, and its verdict from
its figures (builder/pilot/figures.py). Its other setting names another prompt or precision; the card says so."""

from __future__ import annotations

from pathlib import Path

from builder.pilot.contract import PilotEntry
from builder.pilot.figures import figure_problems
from builder.pilot.record import labels_setting, read_pilot_record
from generation.errors import InputError
from generation.judging.prompts import Prompt


def pilot_for_release(path: Path, judgment_hash: str, prompt: Prompt, imported: bool) -> PilotEntry:
    """The manifest's `pilot` entry (which setting made the labels, and the record); an InputError naming the file
    when the record is not about these labels."""
    record = read_pilot_record(path)
    settings = record.settings
    compared = ", ".join(
        f"{label} (prompt {s.prompt.id}, judge config {s.judge_config_hash})" for label, s in settings.items()
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
    wrong = figure_problems(record)
    if wrong:
        more = f"; and {len(wrong) - 3} more" if len(wrong) > 3 else ""
        raise InputError(path, 0, f"{'; '.join(wrong[:3])}{more}: the record was edited or made by another kit")
    stated = settings[labels].prompt
    if (stated.id, stated.sha256) != (prompt.id, prompt.sha256):
        raise InputError(
            path,
            0,
            f"setting {labels} names prompt {stated.id} (sha256 {stated.sha256}); this kit's {prompt.id} "
            f"has sha256 {prompt.sha256}: the pilot judged another prompt text",
        )
    return PilotEntry(labels=labels, record=record)
