"""Fingerprints of the files a stage read (size and modification time), kept in its shards' completion records,
so a changed or deleted input is noticed: a re-run of the stage refuses a done shard whose inputs changed (its
output would no longer be what its inputs say), and a reader of the shards is warned that they still hold what
the inputs were. Size and mtime, not a checksum: re-hashing a ClueWeb22 copy on every run would cost more than
the stage."""

from __future__ import annotations

from pathlib import Path

from generation.notices import warn
from generation.storage.shards import DONE_DIR, Completion, ShardError

KEY = "inputs"  # the completion record's `extra` entry


def fingerprint(paths: list[Path]) -> dict[str, dict]:
    return {str(p): {"bytes": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns} for p in map(Path, paths)}


def changes(recorded: dict, now: dict) -> list[str]:
    """What differs between two fingerprints, one phrase per file."""
    found = []
    for path, was in recorded.items():
        is_ = now.get(path)
        if is_ is None:
            found.append(
                f"{path} is gone" if not Path(path).exists() else f"{path} is no longer an input of this shard"
            )
        elif is_ != was:
            found.append(
                f"{path} changed ({is_['bytes']:,} bytes, recorded {was['bytes']:,}"
                + (", modified since" if is_["mtime_ns"] != was["mtime_ns"] else "")
                + ")"
            )
    found += [f"{path} is a new input of this shard" for path in now if path not in recorded]
    return found


def refuse_changed(record_path: Path, paths: list[Path]) -> None:
    """Before a re-run skips a done shard: its recorded inputs must be the ones given now, unchanged."""
    if not Path(record_path).exists():
        return
    recorded = Completion.read(record_path).extra.get(KEY)
    if recorded is None:  # a record written before inputs were fingerprinted
        return
    found = changes(recorded, fingerprint(paths))
    if found:
        raise ShardError(
            f"{record_path}: the shard was made from other inputs than now: {found[0]}"
            + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
            + "; remove the shard and its record to make it again from these inputs"
        )


def warn_changed(shards: list[Path]) -> None:
    """For a reader of finished shards: a shard holds its inputs as they were when it was made."""
    for shard in map(Path, shards):
        recorded = Completion.read(shard.parent / DONE_DIR / f"{shard.stem}.json").extra.get(KEY)
        if not recorded:
            continue
        found = changes(recorded, fingerprint([Path(p) for p in recorded if Path(p).is_file()]))
        if found:
            warn(
                f"{shard} was made from inputs that changed since: {found[0]}"
                + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
                + "; it still holds the documents they had then (rerun that stage to follow them)"
            )
