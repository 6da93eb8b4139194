"""Statistics of judgments, accumulated batch by batch as numpy counts over sub-question positions
(memory follows the number of sub-questions, not of judgments): Table 1 of the paper recomputed,
judgments per sub-question, statuses, provenance shares and clicked coverage.

To count something new, add an entry to `ROW_CLASSES` (a name and a mask over a batch) or a column to
`VALUE_COUNTS`; `summary()` reports every entry. `validate` counts them by its own code
(builder/release/validate/statistics.py), so a new entry here needs its count there too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.layout import LEVELS
from builder.release.topic_index import mix


@dataclass(frozen=True)
class Batch:
    """One record batch of judgments with its rows' positions (see `topic_index`)."""

    table: pa.Table
    question: np.ndarray  # question position per row
    subquestion: np.ndarray  # sub-question position per row
    document: np.ndarray  # 64-bit docid hash per row
    bm25_top: int | None = None
    rerank_top: int | None = None

    def in_top(self, column: str, top: int | None) -> np.ndarray:
        ranks = self.table[column]
        valid = pc.is_valid(ranks)
        mask = valid if top is None else pc.and_(valid, pc.less_equal(ranks.fill_null(0), top))
        return mask.to_numpy(zero_copy_only=False)

    @cached_property
    def bm25(self) -> np.ndarray:
        return self.in_top("bm25_rank", self.bm25_top)

    @cached_property
    def rerank(self) -> np.ndarray:
        return self.in_top("rerank_rank", self.rerank_top)

    @cached_property
    def clicked(self) -> np.ndarray:
        return self.table["clicked"].fill_null(False).to_numpy(zero_copy_only=False)


ROW_CLASSES: dict[str, Callable[[Batch], np.ndarray]] = {
    # a document can have several sources: these three overlap
    "bm25": lambda b: b.bm25,
    "rerank": lambda b: b.rerank,
    "clicked": lambda b: b.clicked,
    # and these four partition the rows (BM25-top-k only, reranker-top-k only, both, clicked only)
    "bm25_only": lambda b: b.bm25 & ~b.rerank,
    "rerank_only": lambda b: b.rerank & ~b.bm25,
    "bm25_and_rerank": lambda b: b.bm25 & b.rerank,
    "clicked_only": lambda b: b.clicked & ~(b.bm25 | b.rerank),
    # not provenance: contexts the judge cut further, by tokens, to fit max_model_len
    "context_cut_by_tokens": lambda b: (
        b.table["context_cut_by_tokens"].fill_null(False).to_numpy(zero_copy_only=False)
        if "context_cut_by_tokens" in b.table.column_names
        else np.zeros(b.table.num_rows, bool)
    ),
}
PROVENANCE = ("bm25", "rerank", "clicked", "bm25_only", "rerank_only", "bm25_and_rerank", "clicked_only")
VALUE_COUNTS = ("status", "source")  # string columns counted by value ("null" for a missing value)


@dataclass
class SplitStats:
    n_subquestions: int  # sub-question positions of the whole index (counts are kept per position)
    subquestions: int = 0  # in the subquestions table of this split
    clicked_total: int = 0  # clicked documents in the questions table of this split
    levels: Counter = field(default_factory=Counter)  # level -> judgments; "unparsed" for Other
    rows: Counter = field(default_factory=Counter)  # ROW_CLASSES name -> judgments
    values: dict = field(default_factory=dict)  # VALUE_COUNTS column -> Counter
    per_subquestion: np.ndarray | None = None
    _clicked_keys: list = field(default_factory=list)

    def add(self, batch: Batch) -> None:
        table = batch.table
        levels = table["level"]
        for value, count in _value_counts(levels.drop_null()):
            self.levels[int(value)] += count
        self.levels["unparsed"] += levels.null_count
        counts = np.bincount(batch.subquestion, minlength=self.n_subquestions)
        self.per_subquestion = counts if self.per_subquestion is None else self.per_subquestion + counts
        for name, mask in ROW_CLASSES.items():
            self.rows[name] += int(np.count_nonzero(mask(batch)))
        for column in VALUE_COUNTS:
            counter = self.values.setdefault(column, Counter())
            if column in table.column_names:
                for value, count in _value_counts(table[column].fill_null("null")):
                    counter[value] += count
        clicked = batch.clicked
        if clicked.any():
            self._clicked_keys.append(np.unique(mix(batch.question[clicked], batch.document[clicked])))

    @property
    def judgments(self) -> int:
        return sum(self.levels.values())

    def summary(self) -> dict:
        """Plain numbers, as the card, the manifest and `validate` state them."""
        per = self.per_subquestion if self.per_subquestion is not None else np.zeros(0, np.int64)
        judged = per[per > 0]
        denominator = self.subquestions or len(judged) or 1
        table1 = [
            {"level": str(n), "count": self.levels[n], "per_subquestion": round(self.levels[n] / denominator, 2)}
            for n in sorted(LEVELS, reverse=True)
        ]
        table1.append(
            {
                "level": "Other",
                "count": self.levels["unparsed"],
                "per_subquestion": round(self.levels["unparsed"] / denominator, 4),
            }
        )
        total = self.judgments or 1
        clicked_judged = len(np.unique(np.concatenate(self._clicked_keys))) if self._clicked_keys else 0
        return {
            "judgments": self.judgments,
            "subquestions": self.subquestions,
            "subquestions_judged": int(len(judged)),
            "table1": table1,
            "judgments_per_subquestion": {
                "mean": round(self.judgments / denominator, 2),
                "min": int(judged.min()) if len(judged) else 0,
                "max": int(judged.max()) if len(judged) else 0,
            },
            "provenance_share": {k: round(self.rows[k] / total, 4) for k in PROVENANCE},
            "context_cut_by_tokens": self.rows["context_cut_by_tokens"],
            "counts": {column: dict(sorted(self.values.get(column, {}).items())) for column in VALUE_COUNTS},
            "clicked": {
                "in_questions": self.clicked_total,
                "judged": clicked_judged,
                "coverage": round(clicked_judged / self.clicked_total, 4) if self.clicked_total else 0.0,
            },
            "level_share": {str(k): round(self.levels[k] / total, 6) for k in [*LEVELS, "unparsed"]},
        }


def _value_counts(array) -> list[tuple]:
    if len(array) == 0:
        return []
    counts = pc.value_counts(array)
    return list(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
