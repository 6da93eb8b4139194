"""`questions.retrieved_unjudged`: per question, the documents its BM25 and reranker runs retrieved that no judgment
covers (the pool left them out), hardest first (rerank rank, then BM25 rank, a missing rank last, then docid), at
most `training.retrieved_kept`. A release records only its pools' documents; these come from the `retrieve` and
`rerank` stages' runs (`build-release --runs`), read here and grouped by question beside the judgments.

`RunsOfQuestions` (the build): run rows added in any order, sorted into runs on disk by question like the judgments,
handed back per chunk of whole questions. `StoredRetrieved` (training-files): the lists a release holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.assemble.hard_negatives import RowLists
from generation.storage.schema import RETRIEVED_DOC
from generation.storage.spill import TableRuns

SERIAL_BITS = 36
RUN_COLUMNS = ["qid", "docid", "rank", "stage"]
RUN_BATCH_ROWS = 262_144
HARDNESS = [("rerank_rank", "ascending", "at_end"), ("bm25_rank", "ascending", "at_end"), ("docid", "ascending")]


def run_files(folders: list[Path], profile) -> list[Path]:
    """The completed `bm25` and `rerank` run shards of each folder, checked against their completion records and
    the profile's retrieval settings (generation/stages/base.py `completed_files`)."""
    from generation.stages.rerank import RerankStage
    from generation.stages.retrieve import RetrieveStage

    files = []
    for folder in folders:
        for stage in (RetrieveStage, RerankStage):
            files += stage.completed_files(Path(folder), profile)
    return files


def hardest_first(rows: pa.Table) -> pa.Table:
    return rows.take(pc.sort_indices(rows, [("question", "ascending"), *HARDNESS]))


class RunsOfQuestions:
    """Run rows keyed by the rank of their question in the release's output order (`question_key`: qid -> key),
    sorted on disk, then read back beside the judgments' chunks (`upto`)."""

    def __init__(self, qids: pa.Array, question_key: np.ndarray, kept: int, memory: int = 1_000_000):
        self.qids, self.question_key, self.kept = qids, question_key, kept
        self.runs = TableRuns("key", memory)
        self.serial = 0
        self.unknown = 0  # run rows of questions outside the release
        self._merged: Iterator[pa.Table] | None = None
        self._carry: pa.Table | None = None
        self.lists: list[pa.Table] = []  # (question, docid, bm25_rank, rerank_rank) chunks: the kept ones

    def add_files(self, files: list[Path]) -> None:
        for path in files:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=RUN_BATCH_ROWS, columns=RUN_COLUMNS):
                self.add(pa.Table.from_batches([batch]))

    def add(self, rows: pa.Table) -> None:
        where = pc.index_in(rows["qid"], value_set=self.qids).fill_null(-1).to_numpy(zero_copy_only=False)
        known = where >= 0
        known[known] = self.question_key[where[known]] >= 0  # a question without sub-questions has no rows
        self.unknown += int((~known).sum())
        if not known.any():
            return
        rows, where = rows.filter(pa.array(known)), where[known]
        key = (self.question_key[where].astype(np.uint64) << np.uint64(SERIAL_BITS)) + np.arange(
            self.serial, self.serial + len(where), dtype=np.uint64
        )
        self.serial += len(where)
        bm25 = pc.equal(rows["stage"], "bm25")
        self.runs.add(
            pa.table(
                {
                    "key": pa.array(key, pa.uint64()),
                    "docid": rows["docid"],
                    "bm25_rank": pc.if_else(bm25, rows["rank"], pa.scalar(None, pa.int32())),
                    "rerank_rank": pc.if_else(bm25, pa.scalar(None, pa.int32()), rows["rank"]),
                }
            )
        )

    def upto(self, last: int | None) -> pa.Table:
        """The run rows of questions keyed <= `last` (every one left when None), not yet handed back."""
        if self._merged is None:
            self._merged = self.runs.merged()
        parts = [self._carry] if self._carry is not None else []
        self._carry = None
        while True:
            if parts and last is not None and parts[-1].num_rows and _question(parts[-1]["key"][-1].as_py()) > last:
                break
            chunk = next(self._merged, None)
            if chunk is None:
                break
            parts.append(chunk)
        table = pa.concat_tables(parts) if parts else None
        if table is None or not table.num_rows:
            return RUN_ROWS.empty_table()
        question = pc.shift_right(table["key"], SERIAL_BITS)
        if last is not None:
            later = pc.greater(question, last)
            self._carry = table.filter(later)
            table, question = table.filter(pc.invert(later)), question.filter(pc.invert(later))
        return table.append_column("question", question)

    def kept_lists(self, runs: pa.Table, graded: pa.Table) -> pa.Table:
        """Per question of `runs`, its documents no graded judgment of the question covers, hardest first, at most
        `kept`: (question, docid, bm25_rank, rerank_rank). `graded`: (question, docid) of the chunk's judgments."""
        if not runs.num_rows:
            return KEPT.empty_table()
        merged = runs.group_by(["question", "docid"], use_threads=False).aggregate(
            [("bm25_rank", "min"), ("rerank_rank", "min")]
        )
        merged = merged.rename_columns(["question", "docid", "bm25_rank", "rerank_rank"])
        judged = pc.is_in(_pair_key(merged["question"], merged["docid"]), value_set=_pair_key(*graded.columns))
        merged = hardest_first(merged.filter(pc.invert(judged)))
        question = merged["question"].combine_chunks()
        starts = np.flatnonzero(np.r_[True, pc.not_equal(question[1:], question[:-1]).to_numpy(zero_copy_only=False)])
        place = np.arange(len(question)) - np.repeat(starts, np.diff(np.r_[starts, len(question)]))
        kept = merged.filter(pa.array(place < self.kept)) if len(question) else merged
        self.lists.append(kept)
        return kept

    def column(self, question_of_qid: np.ndarray) -> pa.Array:
        """`retrieved_unjudged` for the questions table: row i holds the list of question key
        `question_of_qid[i]` (an empty list where the runs retrieved nothing unjudged)."""
        table = pa.concat_tables(self.lists) if self.lists else KEPT.empty_table()
        table = table.take(pc.sort_indices(table, [("question", "ascending")]))  # stable: keeps hardness order
        question = table["question"].to_numpy(zero_copy_only=False).astype(np.int64)
        start = np.searchsorted(question, question_of_qid, "left")
        stop = np.searchsorted(question, question_of_qid, "right")
        order = np.concatenate([np.arange(a, b) for a, b in zip(start, stop)] or [np.zeros(0, np.int64)])
        values = table.select(["docid", "bm25_rank", "rerank_rank"]).take(pa.array(order, pa.int64()))
        structs = pa.StructArray.from_arrays(
            [values[c].combine_chunks() for c in ("docid", "bm25_rank", "rerank_rank")],
            fields=list(RETRIEVED_DOC),
        )
        return pa.ListArray.from_arrays(pa.array(np.r_[0, np.cumsum(stop - start)].astype(np.int32)), structs)


def _question(key: int) -> int:
    return key >> SERIAL_BITS


def _pair_key(question, docid) -> pa.Array:
    return pc.binary_join_element_wise(pc.cast(question, pa.string()), docid, "\x1f")


RUN_ROWS = pa.schema(
    [("key", pa.uint64()), ("docid", pa.string()), ("bm25_rank", pa.int32()), ("rerank_rank", pa.int32()),
     ("question", pa.uint64())]
)  # fmt: skip
KEPT = pa.schema(
    [("question", pa.uint64()), ("docid", pa.string()), ("bm25_rank", pa.int32()), ("rerank_rank", pa.int32())]
)


def lists_by_row(question: np.ndarray, docids: pa.Array, row_key: np.ndarray) -> RowLists:
    """Per row, the `docids` (sorted by `question`, hardest first within one) of question `row_key[row]` (none for
    a key absent or -1)."""
    return RowLists(docids, np.searchsorted(question, row_key, "left"), np.searchsorted(question, row_key, "right"))


class StoredRetrieved:
    """The lists a release holds (`questions.retrieved_unjudged`, one per qid): what training-files
    (builder/training/rows.py) gives `derive_rows`."""

    def __init__(self, qids: pa.Array | pa.ChunkedArray, column: pa.Array | pa.ChunkedArray):
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        self.qids = qids.combine_chunks() if isinstance(qids, pa.ChunkedArray) else qids
        lengths = pc.list_value_length(column).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        self.question = np.repeat(np.arange(len(self.qids)), lengths)
        self.docids = pc.struct_field(pc.list_flatten(column), "docid")

    def of_rows(self, qids: pa.Array | pa.ChunkedArray) -> RowLists:
        where = pc.index_in(qids, value_set=self.qids).fill_null(-1).to_numpy(zero_copy_only=False)
        return lists_by_row(self.question, self.docids, where.astype(np.int64))
