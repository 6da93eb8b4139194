"""What the completion record of a judged shard counts (generation/stages/judge.py writes it, judge_retry.py
rewrites it after a retry, build-release reads `failed_pairs`)."""

from __future__ import annotations

import pyarrow.compute as pc

from generation.shards import Completion

FAILED_STATUS = "request_failed"  # schema.JUDGMENT_STATUSES: the request failed after its retries


def tally(summary, table) -> None:
    """Adds a table of judgment rows to the summary's counts."""
    summary.levels.update(v for v in table["level"].to_pylist() if v is not None)
    summary.unparsed += table["level"].null_count
    summary.not_verbatim += pc.sum(pc.invert(table["extract_verbatim"].fill_null(True))).as_py() or 0
    summary.statuses.update(table["status"].to_pylist())
    summary.cut_by_tokens += pc.sum(table["context_cut_by_tokens"].fill_null(False)).as_py() or 0


def record_fields(summary, pairs: int) -> dict:
    """The completion record's fields of a judged shard. `failed_pairs`: requests that failed after their retries
    (status request_failed), which the next `judge` run retries (generation/stages/judge_retry.py)."""
    summary.failed_pairs = summary.statuses.get(FAILED_STATUS, 0)
    return {
        "judge": summary.judge,
        "pairs": pairs,
        "unparsed": summary.unparsed,
        "levels": dict(summary.levels),
        "not_verbatim": summary.not_verbatim,
        "statuses": dict(summary.statuses),
        "cut_by_tokens": summary.cut_by_tokens,
        "failed_pairs": summary.failed_pairs,
    }


def failed_pairs(record: Completion) -> int:
    """The failed pairs a judge shard's record counts (records before `failed_pairs` existed: its statuses)."""
    extra = record.extra or {}
    return int(extra.get("failed_pairs", (extra.get("statuses") or {}).get(FAILED_STATUS, 0)) or 0)
