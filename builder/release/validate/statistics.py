"""`validate`'s own count of a split's statistics (what manifest.json's `stats` and the card's statistics section
state), written apart from build-release's (builder/release/assemble/stats.py), so that a mistake in one is not
made again in the other: here the rows are counted with numpy over the columns, the value counts with Arrow's
group-by, and the clicked pairs with a lexicographic sort.

What each number means is the contract (builder/release/contract.py `SplitStats`): Table 1 per level and 'Other'
per sub-question of the split, judgments per judged sub-question, the provenance shares over the judgments (a
rank counts inside the pool's top-k), the status and source counts, the clicked documents judged, the level
shares."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from builder.release.contract import Clicked, ComplexityStats, LevelRow, PerSubquestion, ProvenanceShare, SplitStats
from builder.release.layout import LEVELS

COUNTED = ("status", "source")


def flags(table: pa.Table, column: str) -> np.ndarray:
    """A boolean column as numpy, null as false; all false when the column is absent."""
    if column not in table.column_names:
        return np.zeros(table.num_rows, bool)
    values = table[column].to_numpy(zero_copy_only=False)
    return np.array([bool(v) if v is not None else False for v in values], bool) if values.dtype == object else values


def in_top(table: pa.Table, column: str, top: int | None) -> np.ndarray:
    """Rows whose rank is set and, with a `top`, at most `top`."""
    ranks = table[column].cast(pa.float64()).to_numpy(zero_copy_only=False)
    present = ~np.isnan(ranks)
    return present if top is None else present & (np.nan_to_num(ranks, nan=np.inf) <= top)


class SplitCount:
    """Added to batch by batch (rows of known questions and sub-questions, with their positions)."""

    def __init__(self, positions: int, subquestions: int, bm25_top: int | None, rerank_top: int | None):
        self.per_subquestion: np.ndarray = np.zeros(positions, np.int64)
        self.subquestions = subquestions
        self.tops = bm25_top, rerank_top
        self.levels: Counter[int | None] = Counter()  # level value (None for null) -> rows
        self.classes: Counter[str] = Counter()
        self.values: dict[str, Counter] = {column: Counter() for column in COUNTED}
        self.clicked_pairs: list[np.ndarray] = []

    def add(self, table: pa.Table, question: np.ndarray, subquestion: np.ndarray, document: np.ndarray) -> None:
        level = table["level"].to_numpy(zero_copy_only=False)
        nulls = int(table["level"].null_count)
        graded = level[~np.isnan(level)] if level.dtype.kind == "f" else level
        for value, n in zip(*np.unique(graded.astype(np.int64), return_counts=True)):
            self.levels[int(value)] += int(n)
        self.levels[None] += nulls
        np.add.at(self.per_subquestion, subquestion, 1)
        bm25, rerank = in_top(table, "bm25_rank", self.tops[0]), in_top(table, "rerank_rank", self.tops[1])
        clicked = flags(table, "clicked")
        for name, mask in {
            "bm25": bm25,
            "rerank": rerank,
            "clicked": clicked,
            "bm25_only": bm25 & ~rerank,
            "rerank_only": rerank & ~bm25,
            "bm25_and_rerank": bm25 & rerank,
            "clicked_only": clicked & ~bm25 & ~rerank,
            "context_cut_by_tokens": flags(table, "context_cut_by_tokens"),
        }.items():
            self.classes[name] += int(mask.sum())
        for column in COUNTED:
            if column in table.column_names:
                counted = pa.table({"v": table[column]}).group_by("v").aggregate([([], "count_all")])
                for value, n in zip(counted["v"].to_pylist(), counted["count_all"].to_pylist()):
                    self.values[column]["null" if value is None else value] += n
        if clicked.any():
            self.clicked_pairs.append(np.stack([question[clicked].astype(np.uint64), document[clicked]], axis=1))

    def clicked_judged(self) -> int:
        if not self.clicked_pairs:
            return 0
        pairs = np.concatenate(self.clicked_pairs)
        ordered = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
        return int(1 + np.count_nonzero(np.any(ordered[1:] != ordered[:-1], axis=1)))

    def summary(self, clicked_in_questions: int, complexity: ComplexityStats) -> SplitStats:
        judgments = sum(self.levels.values())
        judged = self.per_subquestion[self.per_subquestion > 0]
        per = self.subquestions or len(judged) or 1
        total = judgments or 1
        table1 = [
            LevelRow(level=str(n), count=self.levels[n], per_subquestion=round(self.levels[n] / per, 2))
            for n in reversed(LEVELS)
        ]
        table1.append(
            LevelRow(level="Other", count=self.levels[None], per_subquestion=round(self.levels[None] / per, 4))
        )
        clicked = self.clicked_judged()
        shares = {str(n): round(self.levels[n] / total, 6) for n in LEVELS}
        return SplitStats(
            judgments=judgments,
            subquestions=self.subquestions,
            subquestions_judged=int(judged.size),
            table1=table1,
            judgments_per_subquestion=PerSubquestion(
                mean=round(judgments / per, 2),
                min=int(judged.min()) if judged.size else 0,
                max=int(judged.max()) if judged.size else 0,
            ),
            provenance_share=ProvenanceShare.model_validate(
                {name: round(self.classes[name] / total, 4) for name in ProvenanceShare.model_fields}
            ),
            context_cut_by_tokens=self.classes["context_cut_by_tokens"],
            counts={column: dict(sorted(counter.items())) for column, counter in self.values.items()},
            clicked=Clicked(
                in_questions=clicked_in_questions,
                judged=clicked,
                coverage=round(clicked / clicked_in_questions, 4) if clicked_in_questions else 0.0,
            ),
            level_share={**shares, "unparsed": round(self.levels[None] / total, 6)},
            complexity=complexity,
        )
