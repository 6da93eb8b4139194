"""The release's training configs and its dev split, ids only (ClueWeb22's licence keeps the texts out):

- `dev`: the train questions whose sha256(f"{seed}:{qid}") falls below the profile's `training.dev_share`
  (`dev_questions`), so a model is chosen on questions disjoint from both train and test; the split moves with
  the question, so every config with splits has it.
- `hard-negatives` (Tevatron v2's columns, generation/schema.py): one row per (sub-question, positive): the
  positive judged at level >= `complexity.answer_level`, and the `training.negatives` (k) hardest documents of the
  same sub-question judged at level <= `training.negative_level`: reranker rank first, then BM25 rank (a missing
  rank last), then docid, so the choice is deterministic. A positive whose sub-question has fewer than k such
  documents is left out and counted (`short_positives`): every row has exactly k negatives, which
  sentence-transformers' (anchor, positive, negative_1..k) n-tuples need.
- `graded-lists`: one row per sub-question: every graded judgment (level descending, then docid) with its level
  and, in distribution mode, the judge's `expected` and `probs`.

Rows are grouped by sub-question with the release's sorted runs (generation/spill.py `TableRuns`), keyed by
(sub-question position, arrival), so memory stays bounded however many judgments there are. Output rows follow
the sub-questions' order in the `subquestions` tables, so `validate` re-derives the same rows in the same order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from generation.schema import arrow_schema
from generation.spill import TableRuns

CONFIGS = {"hard-negatives": "hard_negatives", "graded-lists": "graded_lists"}  # config -> schema table
COLUMNS = ["docid", "level", "bm25_rank", "rerank_rank", "expected", "probs"]  # of the judgments it reads
RUN_ROWS = 250_000  # judgments buffered before a sorted run goes to disk (~20 MB)
MERGE_BLOCK_ROWS = 8_192  # rows of each run in hand while merging: ~100 runs at the paper's scale, ~800k rows
SERIAL_BITS = 36  # the key's low bits: arrival order, unique per judgment (64G judgments)
TRAIN = "train"
DEV = "dev"


def dev_share_of(qids: pa.Array | pa.ChunkedArray, seed: int) -> np.ndarray:
    """Per question, sha256(f"{seed}:{qid}")'s first 8 bytes as a number in [0, 1)."""
    return np.array(
        [int.from_bytes(hashlib.sha256(f"{seed}:{q}".encode()).digest()[:8], "big") / 2**64 for q in qids.to_pylist()],
        np.float64,
    )


def dev_questions(qids: pa.Array | pa.ChunkedArray, seed: int, share: float) -> np.ndarray:
    return dev_share_of(qids, seed) < share


def with_dev_split(questions: pa.Table, training) -> pa.Table:
    """The questions table with the train questions `dev_questions` picks moved to the `dev` split."""
    split = questions["split"]
    moved = dev_questions(questions["qid"], training.seed, training.dev_share) & pc.equal(split, TRAIN).to_numpy(
        zero_copy_only=False
    )
    if not moved.any():
        return questions
    new = pc.if_else(pa.array(moved), DEV, split)
    return questions.set_column(questions.schema.get_field_index("split"), questions.schema.field("split"), new)


class JudgmentRuns(TableRuns):
    """`TableRuns` whose runs are written, and so read back while merging, in blocks of MERGE_BLOCK_ROWS rows (a
    run file's record batches are the sorted table's chunks, cut to at most spill.RUN_BATCH_ROWS): with a hundred
    runs of judgments, the merge holds a hundred small blocks rather than a hundred of spill.py's 32k rows."""

    def _sorted_buffer(self) -> pa.Table | None:
        table = super()._sorted_buffer()
        return (
            None
            if table is None
            else pa.Table.from_batches(table.to_batches(max_chunksize=MERGE_BLOCK_ROWS), table.schema)
        )


@dataclass
class TrainingCounts:
    rows: dict = field(default_factory=dict)  # config -> split -> rows
    positives: int = 0  # (sub-question, positive) pairs
    short_positives: int = 0  # of them, left out: fewer than k hard negatives


class TrainingRows:
    """Graded judgments added in any order (positions into `subquestions`); `tables()` gives back, per chunk of
    whole sub-questions in position order, (split code, config, rows)."""

    def __init__(
        self, subquestions: pa.Table, subq_split: np.ndarray, answer_level: int, training, memory: int | None = None
    ):
        self.ids, self.qids, self.texts = subquestions["subq_id"], subquestions["qid"], subquestions["text"]
        self.subq_split, self.answer_level, self.training = subq_split, answer_level, training
        self.runs = JudgmentRuns("key", memory or RUN_ROWS)
        self.serial = 0
        self.counts = TrainingCounts()

    def add(self, rows: pa.Table, subquestion: np.ndarray) -> None:
        graded = pc.is_valid(rows["level"]).to_numpy(zero_copy_only=False)
        if not graded.any():
            return
        n = int(graded.sum())
        key = (subquestion[graded].astype(np.uint64) << np.uint64(SERIAL_BITS)) + np.arange(
            self.serial, self.serial + n, dtype=np.uint64
        )
        self.serial += n
        table = rows.select(COLUMNS) if graded.all() else rows.select(COLUMNS).filter(pa.array(graded))
        self.runs.add(table.append_column("key", pa.array(key, pa.uint64())))

    def groups(self) -> Iterator[pa.Table]:
        """Chunks of whole sub-questions, in position order, with a `position` column."""
        carry = None
        for chunk in self.runs.merged():
            position = pc.shift_right(chunk["key"], SERIAL_BITS)
            chunk = chunk.append_column("position", position)
            if carry is not None:
                chunk = pa.concat_tables([carry, chunk])
            last = chunk["position"][-1]
            whole = pc.not_equal(chunk["position"], last)
            carry = chunk.filter(pc.invert(whole))
            if pc.any(whole).as_py():
                yield chunk.filter(whole)
        if carry is not None and carry.num_rows:
            yield carry

    def tables(self) -> Iterator[tuple[int, str, pa.Table]]:
        for chunk in self.groups():
            for name, table in (
                ("graded-lists", self.graded_lists(chunk)),
                ("hard-negatives", self.hard_negatives(chunk)),
            ):
                split = (
                    self.subq_split[table["position"].to_numpy(zero_copy_only=False)]
                    if table.num_rows
                    else np.zeros(0, np.int64)
                )
                for code in np.unique(split):
                    part = table.filter(pa.array(split == code)).drop_columns(["position"])
                    self.counts.rows.setdefault(name, {}).setdefault(int(code), 0)
                    self.counts.rows[name][int(code)] += part.num_rows
                    yield int(code), name, part

    def _subquestion(self, position: pa.Array, column) -> pa.Array:
        return column.take(position.cast(pa.int64()))

    def graded_lists(self, chunk: pa.Table) -> pa.Table:
        chunk = chunk.take(
            pc.sort_indices(chunk, [("position", "ascending"), ("level", "descending"), ("docid", "ascending")])
        )
        position = chunk["position"].combine_chunks()
        starts = group_starts(position)
        offsets = pa.array(np.append(starts, len(position)).astype(np.int32))
        first = position.take(pa.array(starts))

        def lists(column, nullable=False):
            values = chunk[column].combine_chunks()
            if not nullable:
                return pa.ListArray.from_arrays(offsets, values)
            # a sub-question's list is null where the judge gave none for any of its documents (generate mode)
            given = (
                np.add.reduceat(pc.is_valid(values).to_numpy(zero_copy_only=False).astype(np.int64), starts)
                if len(starts)
                else np.zeros(0, np.int64)
            )
            return pa.ListArray.from_arrays(offsets, values, mask=pa.array(given == 0))

        return pa.table(
            {
                "query_id": self._subquestion(first, self.ids),
                "qid": self._subquestion(first, self.qids),
                "docids": lists("docid"),
                "labels": lists("level"),
                "expected": lists("expected", True),
                "probs": lists("probs", True),
                "position": first,
            }
        )

    def hard_negatives(self, chunk: pa.Table) -> pa.Table:
        k = self.training.negatives
        level = chunk["level"]
        positives = chunk.filter(pc.greater_equal(level, self.answer_level))
        positives = positives.take(
            pc.sort_indices(positives, [("position", "ascending"), ("level", "descending"), ("docid", "ascending")])
        )
        negatives = chunk.filter(pc.less_equal(level, self.training.negative_level))
        negatives = negatives.take(
            pc.sort_indices(
                negatives,
                [
                    ("position", "ascending"),
                    ("rerank_rank", "ascending", "at_end"),
                    ("bm25_rank", "ascending", "at_end"),
                    ("docid", "ascending"),
                ],
            )
        )
        neg_position = negatives["position"].to_numpy(zero_copy_only=False)
        pos_position = positives["position"].to_numpy(zero_copy_only=False)
        # each positive's sub-question: where its negatives start in `negatives`, and how many it has
        start = np.searchsorted(neg_position, pos_position, "left")
        count = np.searchsorted(neg_position, pos_position, "right") - start
        enough = count >= k
        self.counts.positives += len(pos_position)
        self.counts.short_positives += int((~enough).sum())
        positives, start = positives.filter(pa.array(enough)), start[enough]
        n = positives.num_rows
        taken = (start[:, None] + np.arange(k)).ravel()
        negative_ids = pa.ListArray.from_arrays(
            pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)),
            negatives["docid"].take(pa.array(taken, pa.int64())).combine_chunks(),
        )
        position = positives["position"].combine_chunks()
        return pa.table(
            {
                "query_id": self._subquestion(position, self.ids),
                "query_text": self._subquestion(position, self.texts),
                "positive_document_ids": pa.ListArray.from_arrays(
                    pa.array(np.arange(n + 1, dtype=np.int32)), positives["docid"].combine_chunks()
                ),
                "negative_document_ids": negative_ids,
                "qid": self._subquestion(position, self.qids),
                "position": position,
            }
        )


def group_starts(sorted_keys: pa.Array) -> np.ndarray:
    """Where each run of equal values starts in a sorted column."""
    if len(sorted_keys) == 0:
        return np.zeros(0, np.int64)
    changes = pc.not_equal(sorted_keys[1:], sorted_keys[:-1]).to_numpy(zero_copy_only=False)
    return np.concatenate([[0], np.flatnonzero(changes) + 1]).astype(np.int64)


def conformed(name: str, table: pa.Table) -> pa.Table:
    return table.cast(arrow_schema(CONFIGS[name]))


def settings_record(profile, counts: TrainingCounts) -> dict:
    """`manifest.training`: the settings the configs were derived with and what they left out."""
    from generation.profiles import Complexity, TrainingConfigsSettings

    training = profile.training if profile is not None else TrainingConfigsSettings()
    answer_level = (profile.complexity if profile is not None else Complexity()).answer_level
    return {
        **training.model_dump(),
        "answer_level": answer_level,
        "positives": counts.positives,
        "short_positives": counts.short_positives,
        "dev_rule": "sha256(f'{seed}:{qid}')[:8] as a big-endian integer / 2**64 < dev_share, train questions only",
    }


class TrainingWriters:
    """`build-release`'s side: rows added per routed batch, the two configs written per split at the end."""

    def __init__(
        self,
        out: Path,
        subquestions: pa.Table,
        subq_split: np.ndarray,
        splits: list[str],
        profile,
        rows_per_file: int,
        memory: int | None = None,
    ):
        from builder.release.assemble.writer import RollingWriter
        from builder.release.layout import config
        from generation.profiles import Complexity, TrainingConfigsSettings

        training = profile.training if profile is not None else TrainingConfigsSettings()
        answer_level = (profile.complexity if profile is not None else Complexity()).answer_level
        self.rows = TrainingRows(subquestions, subq_split, answer_level, training, memory)
        self.splits = splits
        self.writers = {
            (name, s): RollingWriter(Path(out) / "data" / config(name).folders[0], split, CONFIGS[name], rows_per_file)
            for name in CONFIGS
            for s, split in enumerate(splits)
        }

    def add(self, rows: pa.Table, subquestion: np.ndarray) -> None:
        self.rows.add(rows, subquestion)

    def close(self, summary) -> TrainingCounts:
        for code, name, table in self.rows.tables():
            self.writers[(name, code)].write(conformed(name, table))
        for (name, code), writer in self.writers.items():
            summary.files += writer.close()
            summary.rows.setdefault(name, {})[self.splits[code]] = writer.rows
        return self.rows.counts
