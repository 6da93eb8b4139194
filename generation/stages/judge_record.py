"""What a judged shard's summary and completion record count (generation/stages/judge.py writes the record,
judge_retry.py rewrites it after a retry, build-release reads `failed_pairs`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from generation.stages.base import StageSummary
from generation.storage.shards import Completion

FAILED_STATUS = "request_failed"  # schema.JUDGMENT_STATUSES: the request failed after its retries


@dataclass(slots=True)
class JudgeSummary(StageSummary):
    """A judged shard (`judge`, `judge --limit`, `judge --import-batch`, a pilot setting): its pairs and what their
    judgments count."""

    pairs: int = 0
    judged_now: int = 0
    chunks_done_before: int = 0  # a resumed shard's chunks judged by an earlier run
    levels: Counter[int] = field(default_factory=Counter)
    unparsed: int = 0
    not_verbatim: int = 0  # r3a's extracts that are not verbatim
    statuses: Counter[str] = field(default_factory=Counter)
    cut_by_tokens: int = 0
    judge: str = ""  # the judge's description
    failed_pairs: int = 0  # request_failed after their retries
    retried: int = 0  # failed pairs of a done shard judged again by this run
    limit: int | None = None  # judge --limit N: N; None for a whole shard
    shard_pairs: int | None = None  # judge --limit: the shard's pairs before the cut
    batch_lines: dict[str, dict] | None = None  # judge --import-batch: the result lines set aside, by kind


def tally(summary: JudgeSummary, table: pa.Table) -> None:
    """Adds a table of judgment rows to the summary's counts."""
    summary.levels.update(v for v in table["level"].to_pylist() if v is not None)
    summary.unparsed += table["level"].null_count
    summary.not_verbatim += pc.sum(pc.invert(table["extract_verbatim"].fill_null(True))).as_py() or 0
    summary.statuses.update(table["status"].to_pylist())
    summary.cut_by_tokens += pc.sum(table["context_cut_by_tokens"].fill_null(False)).as_py() or 0


def record_fields(summary: JudgeSummary, pairs: int) -> dict:
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
