"""Statistics of judgments, accumulated batch by batch (memory bounded by the number of sub-questions):
Table 1 of the paper recomputed, judgments per sub-question, provenance shares and clicked coverage."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from builder.layout import LEVELS


@dataclass
class SplitStats:
    levels: Counter = field(default_factory=Counter)  # level -> judgments; "unparsed" for Other
    per_subquestion: Counter = field(default_factory=Counter)  # subq_id -> judgments
    provenance: Counter = field(default_factory=Counter)  # bm25 / rerank / clicked -> judgments
    clicked_judged: set = field(default_factory=set)  # (qid, docid) of clicked documents that were judged
    subquestions: int = 0  # in the subquestions table of this split
    clicked_total: int = 0  # clicked documents in the questions table of this split

    def add(self, batch: pa.RecordBatch | pa.Table, bm25_top: int | None = None, rerank_top: int | None = None) -> None:
        levels = batch.column("level")
        for value, count in _value_counts(levels.drop_null() if hasattr(levels, "drop_null") else levels):
            self.levels[int(value)] += count
        self.levels["unparsed"] += levels.null_count
        for value, count in _value_counts(batch.column("subq_id")):
            self.per_subquestion[value] += count
        bm25 = pc.is_valid(batch.column("bm25_rank"))
        rerank = pc.is_valid(batch.column("rerank_rank"))
        if bm25_top is not None:
            bm25 = pc.and_(bm25, pc.less_equal(batch.column("bm25_rank").fill_null(0), bm25_top))
        if rerank_top is not None:
            rerank = pc.and_(rerank, pc.less_equal(batch.column("rerank_rank").fill_null(0), rerank_top))
        self.provenance["bm25"] += pc.sum(bm25).as_py() or 0
        self.provenance["rerank"] += pc.sum(rerank).as_py() or 0
        clicked = batch.column("clicked")
        self.provenance["clicked"] += pc.sum(clicked).as_py() or 0
        picked = batch.filter(clicked) if isinstance(batch, pa.Table) else pa.Table.from_batches([batch]).filter(clicked)
        self.clicked_judged.update(zip(picked["qid"].to_pylist(), picked["docid"].to_pylist()))

    @property
    def judgments(self) -> int:
        return sum(self.levels.values())

    def summary(self) -> dict:
        """Plain numbers, as the card, the manifest and `validate` state them."""
        counts = list(self.per_subquestion.values())
        denominator = self.subquestions or len(counts) or 1
        table1 = [{"level": str(n), "count": self.levels[n], "per_subquestion": round(self.levels[n] / denominator, 2)}
                  for n in sorted(LEVELS, reverse=True)]
        table1.append({"level": "Other", "count": self.levels["unparsed"],
                       "per_subquestion": round(self.levels["unparsed"] / denominator, 4)})
        total = self.judgments or 1
        return {
            "judgments": self.judgments,
            "subquestions": self.subquestions,
            "subquestions_judged": len(counts),
            "table1": table1,
            "judgments_per_subquestion": {
                "mean": round(self.judgments / denominator, 2),
                "min": min(counts) if counts else 0, "max": max(counts) if counts else 0},
            "provenance_share": {k: round(self.provenance[k] / total, 4) for k in ("bm25", "rerank", "clicked")},
            "clicked": {"in_questions": self.clicked_total, "judged": len(self.clicked_judged),
                        "coverage": round(len(self.clicked_judged) / self.clicked_total, 4) if self.clicked_total else 0.0},
            "level_share": {str(k): round(self.levels[k] / total, 6) for k in [*LEVELS, "unparsed"]},
        }


def _value_counts(array) -> list[tuple]:
    if len(array) == 0:
        return []
    counts = pc.value_counts(array)
    return list(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
