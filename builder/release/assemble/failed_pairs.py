"""Judgment shards holding pairs whose requests failed (status `request_failed` after the judge's retries, counted
as `failed_pairs` in each shard's completion record: generation/stages/judge.py). `judge` retries them on its next
run (generation/stages/judge_retry.py), so `build-release` refuses such shards unless asked to publish them, and
then counts them in the manifest and the card."""

from __future__ import annotations

from pathlib import Path

from builder.release.assemble.lineage import judgment_records
from generation.errors import InputError


def failed_pairs(folders: list[Path], allow: bool = False) -> int:
    """The failed pairs the judge recorded in these folders' shards; an InputError naming the first shard that holds
    some, unless `allow`."""
    found = [(path, int((record.extra or {}).get("failed_pairs") or 0)) for path, record in judgment_records(folders)]
    found = [(path, n) for path, n in found if n]
    total = sum(n for _, n in found)
    if found and not allow:
        path, n = found[0]
        raise InputError(
            path,
            0,
            f"{total:,} judged pair{'s' if total != 1 else ''} in {len(found)} shard"
            f"{'s' if len(found) != 1 else ''} failed after their retries ({n:,} here, status "
            "request_failed): run `judge` again with the same options to retry exactly those, or pass "
            "--allow-failed-pairs to publish them without a level (counted in the card)",
        )
    return total
