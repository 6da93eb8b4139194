"""The pilot record (`OUT/pilot.json`, written by `researchy-subq pilot`): its fields, how it is read back, and
what a release makes of it (`build-release --pilot`: the manifest holds it, the card states it; `validate` checks
the one against the other). Its typed contract, key by key, is contract.py `PilotRecord`.

Fields (schema_version 1):
- `settings.A`, `settings.B`: the profile as given and its overrides, the whole profile (a server's address
  withheld), its hash and the judge stage's config hash, the judge, the prompt (id, sha256, source, document first),
  the scale and the precision `plan` prices it at.
- `differences`: the judge keys B sets otherwise than A.
- `sample`: how it was drawn (generation/pilot/sample.py), what was asked and taken, the population, the inputs'
  sha256 and the sample file's.
- `agreement`: `agreement.compare` of A (rows) and B (columns) over the pairs both graded, each setting's statuses,
  the Spearman of the expected level, B's precision and recall of A's answers (level >= answer_level).
- `stability`: level flips over the pairs both graded and the largest |dP(level)| over those with a distribution in
  both, with its pair (builder/pilot/stability.py): a batch-size stability check's result.
- `gpu_hours`: each setting's paper-scale rows from `plan` at its precision, and what B saves on the headline row.
- `verdict`: the weighted kappa, its interval, the threshold, passed, and the line printed.
- `notes`: what the pilot said about the settings (document prefixes shared or not).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from builder.pilot.contract import Label, PilotPrompt, PilotRecord, PilotSetting
from generation.errors import InputError, first_problem, read_json_file
from generation.pilot.settings import Setting

PILOT_RECORD = "pilot.json"
KIND: Final = "researchy-subq pilot"
NEEDED = ("settings", "sample", "agreement", "gpu_hours", "verdict")


def setting_record(setting: Setting) -> PilotSetting:
    from generation.profiles.profile import looks_like_path, withhold_endpoint
    from generation.stages.judge import JudgeStage, judge_description

    profile, prompt = setting.profile, setting.prompt
    return PilotSetting(
        given=Path(setting.given).name if looks_like_path(setting.given) else setting.given,  # no local path
        overrides=list(setting.overrides),
        profile=withhold_endpoint(profile),
        profile_hash=profile.config_hash(),
        judge_config_hash=JudgeStage.config_hash(profile),
        judge=judge_description(profile.judge),
        prompt=PilotPrompt(
            id=prompt.id, sha256=prompt.sha256, source=prompt.source, document_first=prompt.document_first
        ),
        scale=[0, setting.max_level],
        precision=setting.precision,
    )


def finite(value):
    """The record as strict JSON: NaN (an undefined correlation) becomes null, in any nesting."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def record_json(record: PilotRecord) -> str:
    """The record's bytes: keys sorted, so two runs of one pilot (or a resumed one) write the same file. A record the
    contract would refuse, read back as `read_pilot_record` reads it, is never written (a ValidationError naming the
    key: a bug of the writer)."""
    text = json.dumps(finite(record.model_dump()), indent=1, allow_nan=False, sort_keys=True) + "\n"
    PilotRecord.model_validate_json(text, strict=True)
    return text


def read_pilot_record(path: Path) -> PilotRecord:
    """A pilot record, or an InputError naming the file and what is wrong with it (the first key, for a record that
    is not the contract's)."""
    path = Path(path)
    data = read_json_file(path, f"the {PILOT_RECORD} `researchy-subq pilot` wrote")
    if not isinstance(data, dict) or data.get("record") != KIND:
        raise InputError(path, 0, f'not a pilot record (no "record": "{KIND}"); pass OUT/{PILOT_RECORD} of a pilot')
    missing = [k for k in NEEDED if k not in data]
    if missing:
        raise InputError(path, 0, f"a pilot record without {', '.join(missing)}")
    try:  # strictly, as JSON: "4486" is not a count, true not 1 (builder/release/contract.py says why JSON)
        return PilotRecord.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as e:
        raise InputError(path, 0, f"{first_problem(e)}: not a record `researchy-subq pilot` writes") from None


def labels_setting(record: PilotRecord, judgment_config_hash: str) -> Label | None:
    """Which of the pilot's settings made labels of this judge config hash: "B", "A" or None (neither)."""
    for label in ("B", "A"):
        if record.settings[label].judge_config_hash == judgment_config_hash:
            return label
    return None
