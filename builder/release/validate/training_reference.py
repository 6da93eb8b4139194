"""`validate`'s own derivation of `graded-lists` and `hard-negatives`, written from the rule as
builder/release/assemble/training_configs.py and hard_negatives.py state it. The build derives the same rows by its
own code; the two share only the rule's names and hashes (builder/release/training_rule.py), so a bug in one
derivation is not made in the other.

- Output order, per split: question by question, a question at the place of its first sub-question in the
  `subquestions` tables, its sub-questions in table order.
- A graded list: the sub-question's graded judgments, level descending, then rerank rank, then BM25 rank (a missing
  rank last), then docid.
- A hard-negatives row per positive (level >= complexity.answer_level), in graded-list order, with k negatives taken
  source by source in training.fill_order. The i-th positive needing m documents when a source's turn comes takes,
  of `judged` (its sub-question's documents at level <= negative_level, in list order) or `retrieved_unjudged` (its
  question's stored list), the candidates (i*m + j) mod n, j < min(m, n), in candidate order; of `other_question`,
  the first m documents of the split's pool walked from (FNV-1a 64 of query_id + i*m) mod its size, passing over the
  documents graded for the question and those in its retrieved list. A positive left short of k is counted, not
  written.
- The pool: the documents judged <= negative_level for a sub-question of the split's sampled questions (all of them,
  or the OTHER_QUESTIONS with the smallest sha256(f"{SAMPLE_SALT}:{qid}")), ordered by (that number, docid), each
  document once at its first place.

Memory: judgments are in no question order on disk. Their graded rows are spilled into buckets of consecutive
questions of the output order (temporary Arrow IPC files, about BUCKET_ROWS judgments each, by question count), then
derived bucket by bucket, rows coming out in output order. A bucket is one stable Arrow sort (its arrival order
breaks what the keys leave tied), its graded lists cut from the sorted columns by offsets, and its hard negatives
index arithmetic over them (reference_negatives.py): no Python object per judgment.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from builder.release.training_rule import COLUMNS, CONFIGS, OTHER_QUESTIONS, SAMPLE_SALT, SOURCES, sha_numbers
from builder.release.validate.reference_negatives import Candidates, GradedLists, hard_negatives, ragged
from builder.release.validate.stored_lists import StoredLists
from generation.storage.schema import arrow_schema

BUCKET_ROWS = 100_000  # judgments a bucket holds, about
SPILL = ipc.IpcWriteOptions(compression="zstd")  # Arrow IPC: a third of Parquet's CPU to write, smaller on disk
SLICE = 262_144  # question ids turned into Python strings at a time
LIST_ORDER = [  # the order within a graded list, which the card's statements of it are checked against
    ("level", "descending", "at_end"),
    ("rerank_rank", "ascending", "at_end"),
    ("bm25_rank", "ascending", "at_end"),
    ("docid", "ascending", "at_end"),
]
GRADED_ORDER = [  # the lists' place, then each list's order; the sort is stable, so arrival order breaks what is left
    ("rank", "ascending", "at_end"),
    ("position", "ascending", "at_end"),
    *LIST_ORDER,
]  # pc.sort_indices: "a stable sort", nulls "at_end" (pyarrow/_compute docstring)


@dataclass
class ReferenceCounts:
    positives: int = 0
    short_positives: int = 0
    by_source: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))

    def negatives_by_source(self) -> dict[str, int]:
        return {s: self.by_source[s] for s in SOURCES}


class TrainingReference:
    """Judgments added in any order (`add`, with their sub-questions' positions), then `tables()`: per bucket, the
    (split code, config, rows) the rule gives, in output order."""

    def __init__(self, subquestions: pa.Table, subq_split: np.ndarray, answer_level: int, training, judgments: int):
        self.ids = subquestions["subq_id"].combine_chunks()
        self.texts = subquestions["text"].combine_chunks()
        self.split: np.ndarray = subq_split.astype(np.int64)
        self.answer_level, self.training = answer_level, training
        self.questions, self.rank_of = _questions_in_order(subquestions["qid"])
        self.qids = pa.array(self.questions, pa.string())
        self.buckets = max(1, -(-judgments // BUCKET_ROWS))
        self.bucket_of: np.ndarray = self.rank_of * self.buckets // max(len(self.questions), 1)
        self.sampled = self._sampled()
        self.pool_pairs: dict[int, set[tuple[str, str]]] = {}
        self.folder = tempfile.TemporaryDirectory(prefix="validate-training-")
        self.writers: dict[int, ipc.RecordBatchFileWriter] = {}
        self.counts = ReferenceCounts()
        self.listed_judged: list[tuple[str, str]] = []  # (qid, docid) a stored list holds though a judgment covers it

    def _sampled(self) -> np.ndarray:
        """Per position, whether its question is one of its split's sampled questions."""
        sampled: np.ndarray = np.zeros(len(self.split), bool)
        for code in np.unique(self.split).tolist():
            in_split = self.split == code
            ranks = sorted(set(self.rank_of[in_split].tolist()))
            if len(ranks) > OTHER_QUESTIONS:  # the smallest numbers, a tie going to the smaller qid
                qids = [self.questions[r] for r in ranks]
                ranked = sorted(zip(sha_numbers(qids, SAMPLE_SALT).tolist(), qids, ranks))
                ranks = [r for _, _, r in ranked[:OTHER_QUESTIONS]]
            sampled |= in_split & np.isin(self.rank_of, ranks)
        return sampled

    def add(self, table: pa.Table, position: np.ndarray) -> None:
        graded = np.flatnonzero(pc.is_valid(table["level"]).to_numpy(zero_copy_only=False))
        if not len(graded):
            return
        order = graded[np.argsort(self.bucket_of[position[graded]], kind="stable")]  # arrival order kept
        position = position[order]
        table = table.select(COLUMNS).take(pa.array(order)).append_column("position", pa.array(position))
        self._gather_pool(table, position)
        bucket = self.bucket_of[position]
        cuts = np.r_[0, np.flatnonzero(np.diff(bucket)) + 1, len(bucket)]
        for start, stop in zip(cuts[:-1], cuts[1:]):
            b = int(bucket[start])
            if b not in self.writers:
                self.writers[b] = ipc.new_file(self._path(b), table.schema, options=SPILL)
            self.writers[b].write_table(table.slice(start, stop - start))

    def _path(self, bucket: int) -> Path:
        return Path(self.folder.name) / f"bucket-{bucket:05d}.arrow"

    def _gather_pool(self, table: pa.Table, position: np.ndarray) -> None:
        level = table["level"].to_numpy(zero_copy_only=False)
        low = self.sampled[position] & (level <= self.training.negative_level)
        for docid, p in zip(table["docid"].filter(pa.array(low)).to_pylist(), position[low].tolist()):
            self.pool_pairs.setdefault(int(self.split[p]), set()).add((docid, self.questions[self.rank_of[p]]))

    def _pools(self) -> list[pa.Array]:
        """Per split code, its pool in walk order (empty where none of its sampled questions has a document)."""
        pools = [pa.array([], pa.string()) for _ in range(int(self.split.max(initial=-1)) + 1)]
        for code, pairs in self.pool_pairs.items():
            qids = sorted({q for _, q in pairs})
            number = dict(zip(qids, sha_numbers(qids, SAMPLE_SALT).tolist()))
            ordered = sorted(pairs, key=lambda pair: (number[pair[1]], pair[0]))
            pools[code] = pa.array(list(dict.fromkeys(docid for docid, _ in ordered)), pa.string())
        return pools

    def tables(self, listed: StoredLists) -> Iterator[tuple[int, str, pa.Table]]:
        for writer in self.writers.values():
            writer.close()
        pools = self._pools()
        schemas = {name: arrow_schema(table) for name, table in CONFIGS.items()}
        try:
            for b in sorted(self.writers):
                table = ipc.open_file(self._path(b)).read_all()
                table = table.append_column("rank", pa.array(self.rank_of[table["position"].to_numpy()]))
                yield from self._bucket(table.take(pc.sort_indices(table, GRADED_ORDER)), listed, pools, schemas)
        finally:
            self.folder.cleanup()

    def _bucket(self, table: pa.Table, listed: StoredLists, pools: list[pa.Array], schemas: dict) -> Iterator:
        """A bucket's rows, its judgments sorted in graded-list order: per split code, its two configs' tables."""
        position = table["position"].to_numpy()
        starts = np.r_[0, np.flatnonzero(np.diff(position)) + 1]  # each sub-question's (group's) first row
        lists = GradedLists(
            docids=table["docid"].combine_chunks(),
            level=table["level"].to_numpy().astype(np.int64),
            group=np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(position)])),
            position=position[starts],
            rank=self.rank_of[position[starts]],
            code=self.split[position[starts]],
        )
        negatives = hard_negatives(lists, self._candidates(lists, listed, pools), self.training, self.answer_level)
        self._count(negatives)
        graded = self._graded_lists(table, starts, lists, schemas["graded-lists"])
        rows = self._hard_negative_rows(negatives, lists, schemas["hard-negatives"])
        codes = np.unique(lists.code).tolist()
        if len(codes) == 1:
            yield codes[0], "graded-lists", graded
            yield codes[0], "hard-negatives", rows
            return
        row_code = lists.code[negatives.group]
        for code in codes:
            yield code, "graded-lists", graded.filter(pa.array(lists.code == code))
            yield code, "hard-negatives", rows.filter(pa.array(row_code == code))

    def _candidates(self, lists: GradedLists, listed: StoredLists, pools: list[pa.Array]) -> Candidates:
        """What the sources draw from, the bucket's stored lists checked against its judgments on the way."""
        first = np.r_[True, lists.rank[1:] != lists.rank[:-1]]  # a question's first group: groups come by question
        question = np.cumsum(first) - 1  # per group, the bucket's question
        start, length = listed.spans([self.questions[r] for r in lists.rank[first].tolist()])
        self._check_lists(lists, question, listed.docids, start, length)
        return Candidates(
            listed.docids, start[question], length[question], pools, self.ids.take(pa.array(lists.position))
        )

    def _count(self, negatives) -> None:
        self.counts.positives += negatives.positives
        self.counts.short_positives += negatives.short
        for source, count in negatives.by_source.items():
            self.counts.by_source[source] += count

    def _check_lists(
        self, lists: GradedLists, question: np.ndarray, listed: pa.Array, start: np.ndarray, length: np.ndarray
    ) -> None:
        """Notes the documents a question's stored list holds though a judgment of the question covers them."""
        row, j = ragged(length)  # row: the bucket's question
        docids = listed.take(pa.array(start[row] + j))
        codes = pc.dictionary_encode(pa.concat_arrays([lists.docids, docids])).indices.to_numpy()
        stride = int(codes.max(initial=0)) + 1
        judged = question[lists.group] * stride + codes[: len(lists.docids)]
        both = np.flatnonzero(np.isin(row * stride + codes[len(lists.docids) :], judged))
        rank = lists.rank[np.searchsorted(question, row[both])]  # the question's first group
        self.listed_judged += [
            (self.questions[r], docid) for r, docid in zip(rank.tolist(), docids.take(pa.array(both)).to_pylist())
        ]

    def _graded_lists(self, table: pa.Table, starts: np.ndarray, lists: GradedLists, schema: pa.Schema) -> pa.Table:
        offsets = pa.array(np.r_[starts, len(lists.docids)], pa.int32())
        target = {"docid": "docids", "level": "labels", "expected": "expected", "probs": "probs"}

        def as_lists(name: str, nullable: bool = False) -> pa.Array:
            values = table[name].combine_chunks().cast(schema.field(target[name]).type.value_type)
            # a list is null where the judge gave none for any of its documents (generate mode)
            none = np.add.reduceat(pc.is_valid(values).to_numpy(zero_copy_only=False), starts) == 0
            mask = pa.array(none) if nullable and none.any() else None
            return pa.ListArray.from_arrays(offsets, values, schema.field(target[name]).type, mask=mask)

        return as_table(
            {
                "query_id": self.ids.take(pa.array(lists.position)),
                "qid": self.qids.take(pa.array(lists.rank)),
                "docids": as_lists("docid"),
                "labels": as_lists("level"),
                "expected": as_lists("expected", nullable=True),
                "probs": as_lists("probs", nullable=True),
            },
            schema,
        )

    def _hard_negative_rows(self, negatives, lists: GradedLists, schema: pa.Schema) -> pa.Table:
        rows, k = len(negatives.group), self.training.negatives
        position = pa.array(lists.position[negatives.group])
        every = pa.array(np.arange(rows + 1) * k, pa.int32())
        return as_table(
            {
                "query_id": self.ids.take(position),
                "query_text": self.texts.take(position),
                "positive_document_ids": pa.ListArray.from_arrays(
                    pa.array(np.arange(rows + 1), pa.int32()), lists.docids.take(pa.array(negatives.positive))
                ),
                "negative_document_ids": pa.ListArray.from_arrays(every, negatives.negatives),
                "negative_sources": pa.ListArray.from_arrays(every, negatives.sources),
                "qid": self.qids.take(pa.array(lists.rank[negatives.group])),
            },
            schema,
        )


def as_table(columns: dict[str, pa.Array], schema: pa.Schema) -> pa.Table:
    """The derived columns as a table of the config's schema (generation/storage/schema.py)."""
    if list(columns) != schema.names:
        raise ValueError(
            f"{schema.metadata[b'table'].decode()}: columns {schema.names}, the derivation gives {list(columns)}"
        )
    return pa.table([columns[name].cast(f.type) for name, f in zip(schema.names, schema)], schema=schema)


def _questions_in_order(qids: pa.Array | pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """The questions in output order (each at its first sub-question's place), and per position its question's
    rank in that order."""
    rank: dict[str, int] = {}
    rank_of: np.ndarray = np.zeros(len(qids), np.int64)
    for start in range(0, len(qids), SLICE):
        part = qids.slice(start, SLICE).to_pylist()
        rank_of[start : start + len(part)] = [rank.setdefault(q, len(rank)) for q in part]
    return list(rank), rank_of
