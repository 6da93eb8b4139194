"""Statistics of judgments, accumulated batch by batch as numpy counts over sub-question positions
(memory follows the number of sub-questions, not of judgments): Table 1 of the paper recomputed,
judgments per sub-question, statuses, provenance shares and clicked coverage.

To count something new, add an entry to `ROW_CLASSES` (a name and a mask over a batch) or a column to
`VALUE_COUNTS`, and its field to the contract's `SplitStats` (builder/release/contract.py), which
`SplitStatsAccumulator.summary` fills. `validate` counts them by its own code (builder/release/validate/statistics.py),
so a new entry here needs its count there too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.contract import (
    Clicked,
    ComplexityStats,
    LevelRow,
    PerSubquestion,
    ProvenanceShare,
    SplitStats,
)
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
PROVENANCE = tuple(ProvenanceShare.model_fields)  # the ROW_CLASSES stated as shares of the judgments
VALUE_COUNTS = ("status", "source")  # string columns counted by value ("null" for a missing value)


@dataclass
class SplitStatsAccumulator:
    """One split's statistics, added to batch by batch; `summary` gives them as the contract states them."""

    n_subquestions: int  # sub-question positions of the whole index (counts are kept per position)
    subquestions: int = 0  # in the subquestions table of this split
    clicked_total: int = 0  # clicked documents in the questions table of this split
    levels: Counter[int | str] = field(default_factory=Counter)  # level -> judgments; "unparsed" for Other
    rows: Counter[str] = field(default_factory=Counter)  # ROW_CLASSES name -> judgments
    values: dict[str, Counter[str]] = field(default_factory=dict)  # VALUE_COUNTS column -> value -> judgments
    per_subquestion: np.ndarray | None = None
    _clicked_keys: list[np.ndarray] = field(default_factory=list)

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

    def summary(self, complexity: ComplexityStats) -> SplitStats:
        """The split's statistics as the card, the manifest and `validate` state them, with its questions'
        retrieval-complexity figures (assemble/complexity.py `summary`, made once the questions table is whole)."""
        per = self.per_subquestion if self.per_subquestion is not None else np.zeros(0, np.int64)
        judged = per[per > 0]
        denominator = self.subquestions or len(judged) or 1
        table1 = [
            LevelRow(level=str(n), count=self.levels[n], per_subquestion=round(self.levels[n] / denominator, 2))
            for n in sorted(LEVELS, reverse=True)
        ]
        table1.append(
            LevelRow(
                level="Other",
                count=self.levels["unparsed"],
                per_subquestion=round(self.levels["unparsed"] / denominator, 4),
            )
        )
        total = self.judgments or 1
        clicked_judged = len(np.unique(np.concatenate(self._clicked_keys))) if self._clicked_keys else 0
        return SplitStats(
            judgments=self.judgments,
            subquestions=self.subquestions,
            subquestions_judged=int(len(judged)),
            table1=table1,
            judgments_per_subquestion=PerSubquestion(
                mean=round(self.judgments / denominator, 2),
                min=int(judged.min()) if len(judged) else 0,
                max=int(judged.max()) if len(judged) else 0,
            ),
            provenance_share=ProvenanceShare.model_validate({k: round(self.rows[k] / total, 4) for k in PROVENANCE}),
            context_cut_by_tokens=self.rows["context_cut_by_tokens"],
            counts={column: dict(sorted(self.values.get(column, {}).items())) for column in VALUE_COUNTS},
            clicked=Clicked(
                in_questions=self.clicked_total,
                judged=clicked_judged,
                coverage=round(clicked_judged / self.clicked_total, 4) if self.clicked_total else 0.0,
            ),
            level_share={
                **{str(n): round(self.levels[n] / total, 6) for n in LEVELS},
                "unparsed": round(self.levels["unparsed"] / total, 6),
            },
            complexity=complexity,
        )


def _value_counts(array: pa.Array | pa.ChunkedArray) -> list[tuple]:
    if len(array) == 0:
        return []
    counts = pc.value_counts(array)
    return list(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
