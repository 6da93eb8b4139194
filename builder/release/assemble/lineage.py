"""Where a release comes from: the profile and judge the judgment shards were made under, read from
their completion records (`_done/judgments-*.json`, generation/storage/shards.py), never from the command line
alone. A `--profile` that is not the one the judgments were made under is an error. Imported labels
(`import-labels`) are made under the profile the import named."""

from __future__ import annotations

from pathlib import Path

from generation.errors import InputError
from generation.profiles.profile import Profile, bundled_profiles, load_profile
from generation.stages import stage_hash
from generation.stages.import_labels import IMPORTED_PREFIX
from generation.storage.shards import DONE_DIR, Completion, ShardError


def judgment_config_hash(profile: Profile) -> str:
    return stage_hash(profile, "judgments")


def judgment_records(folders: list[Path]) -> list[tuple[Path, Completion]]:
    records = []
    for folder in folders:
        for path in sorted((Path(folder) / DONE_DIR).glob("judgments-*.json")):
            try:
                records.append((path, Completion.read(path)))
            except (OSError, ShardError) as e:
                raise InputError(path, 0, f"unreadable completion record ({e})") from None
    if not records:
        raise InputError(
            ", ".join(map(str, folders)), 0, f"no completion records in {DONE_DIR}/: not judge-stage output"
        )
    return records


def _hash_of_file(path: Path) -> str | None:
    try:
        return judgment_config_hash(load_profile(path))
    except (ValueError, OSError):  # ProfileError is a ValueError: not a profile, not ours
        return None


def release_profile(folders: list[Path], requested: str | Path | Profile | None = None) -> tuple[Profile, list[str]]:
    """The profile the judgments were made under (checked against `requested` when given) and the judge
    descriptions their records name."""
    records = judgment_records(folders)
    hashes = {r.config_hash for _, r in records}
    if len(hashes) != 1:
        mixed = len({str(h).startswith(IMPORTED_PREFIX) for h in hashes}) > 1
        raise InputError(
            records[0][0].parent,
            0,
            f"judgment shards made under {len(hashes)} different configs "
            f"{sorted(map(str, hashes))}: one release holds one profile's judgments"
            + ("; imported labels and the kit's own judgments cannot share one" if mixed else ""),
        )
    # an import's shards carry "imported-" + the judge stage's hash under the profile the import named
    made_under = str(hashes.pop()).removeprefix(IMPORTED_PREFIX)
    matching = [name for name in bundled_profiles() if judgment_config_hash(load_profile(name)) == made_under]
    hint = f"the bundled profile that matches is {matching[0]!r}" if matching else "no bundled profile matches"
    beside = [
        path for folder in folders for path in sorted(Path(folder).glob("*.yaml")) if _hash_of_file(path) == made_under
    ]  # `judge --backend/--endpoint` wrote it
    if beside:
        hint += f"; {beside[0]}, which judge wrote beside them, does"
    if requested is not None:
        profile = requested if isinstance(requested, Profile) else load_profile(requested)
        if judgment_config_hash(profile) != made_under:
            raise InputError(
                records[0][0],
                0,
                f"the judgments were made under config {made_under}, profile "
                f"{profile.name!r} has {judgment_config_hash(profile)} ({hint}); pass the profile "
                "they were judged with",
            )
    elif matching:
        profile = load_profile(matching[0])
    else:
        raise InputError(
            records[0][0],
            0,
            f"the judgments were made under config {made_under} and {hint}; "
            "pass --profile with the profile file they were judged with",
        )
    judges = sorted({str((r.extra or {}).get("judge", "unknown")) for _, r in records})
    return profile, judges
