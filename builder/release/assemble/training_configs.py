"""The release's training configs and its dev split, ids only (ClueWeb22's licence keeps the texts out):

- `dev`: the train questions whose sha256(f"{seed}:{qid}") falls below the profile's `training.dev_share`
  (`dev_questions`), so a model is chosen on questions disjoint from both train and test; the split moves with
  the question, so every config with splits has it.
- `graded-lists`: one row per sub-question: every graded judgment, level descending, then rerank rank, then BM25
  rank (a missing rank last), then docid, so each level's hardest come first; with its level and, in distribution
  mode, the judge's `expected` and `probs`.
- `hard-negatives` (Tevatron v2's columns, generation/storage/schema.py): one row per (sub-question, positive judged at
  level >= `complexity.answer_level`), its k negatives from the sources of `training.fill_order`, derived from the
  graded lists (builder/release/assemble/hard_negatives.py).

Rows are grouped in sorted runs on disk (builder/release/assemble/natural_runs.py), keyed by (the question's place in the
output order, arrival), so memory stays bounded however many judgments there are. The output order is question by
question (a question at the place of its first sub-question in the `subquestions` tables), each question's
sub-questions in table order, so every chunk holds whole questions. `validate` re-derives the same rows in the same
order by its own code path (builder/release/validate/training_reference.py). With `runs`
(builder/release/assemble/retrieved.py), the questions' retrieved-unjudged lists are derived beside them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.assemble.hard_negatives import (
    ChunkInputs,
    NegativeCounts,
    NegativeRule,
    OtherQuestionPool,
    derive_rows,
    sampled_questions,
    whole_groups,
)
from builder.release.assemble.natural_runs import NaturalRuns
from builder.release.assemble.retrieved import HARDNESS, RunsOfQuestions, lists_by_row
from builder.release.training_rule import COLUMNS, CONFIGS, DEV, TRAIN, dev_questions
from generation.storage.schema import arrow_schema

# a graded list's order, hardest first within a level; the card states it in words (card_statements.order_text)
LIST_ORDER = [("level", "descending"), *HARDNESS]
SERIAL_BITS = 36  # the key's low bits: arrival order, unique per judgment (64G judgments)
GROUP_ROWS = 65_536  # merged rows handled at once (~4 MB): larger chunks cost no less CPU and hold more memory


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


@dataclass
class TrainingCounts:
    rows: dict = field(default_factory=dict)  # config -> split -> rows
    negatives: NegativeCounts = field(default_factory=NegativeCounts)
    retrieved: str = "none"  # where questions.retrieved_unjudged came from


def output_order(qids: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Per sub-question position, its place in the output order (question by question, at the place of the
    question's first sub-question), and per position, its question's code (the place of that first sub-question)."""
    codes = pc.index_in(qids, value_set=pc.unique(qids)).to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(codes)
    first: np.ndarray = np.full(int(codes.max()) + 1 if n else 0, n, np.int64)
    np.minimum.at(first, codes, np.arange(n))
    question = first[codes]
    order = np.lexsort((np.arange(n), question))
    place: np.ndarray = np.empty(n, np.int64)
    place[order] = np.arange(n)
    return place, place[question]


class TrainingRows:
    """Graded judgments added in any order (positions into `subquestions`); `tables()` gives back, per chunk of
    whole questions in output order, (split code, config, rows). `retrieved`: a `RunsOfQuestions` to derive the
    retrieved-unjudged lists from runs (the build), or None."""

    def __init__(
        self,
        subquestions: pa.Table,
        subq_split: np.ndarray,
        answer_level: int,
        training,
        retrieved=None,
    ):
        self.ids, self.qids, self.texts = subquestions["subq_id"], subquestions["qid"], subquestions["text"]
        self.subq_split, self.training = subq_split, training
        self.rule = NegativeRule.of(training, answer_level)
        self.place, self.question_place = output_order(self.qids)
        self.position_of_place = np.argsort(self.place)
        self.question_of_place = self.question_place[self.position_of_place]
        self.runs = NaturalRuns("key")
        self.retrieved = retrieved
        self.serial = 0
        self.counts = TrainingCounts()
        self.pools = OtherQuestionPools(self.qids, subq_split)

    def add(self, rows: pa.Table, subquestion: np.ndarray) -> None:
        graded = pc.is_valid(rows["level"]).to_numpy(zero_copy_only=False)
        if not graded.any():
            return
        n = int(graded.sum())
        table = rows.select(COLUMNS) if graded.all() else rows.select(COLUMNS).filter(pa.array(graded))
        position = subquestion[graded]
        self.pools.add(table, position, self.rule.negative_level)
        place = self.place[position]
        key = (self.question_of_place[place].astype(np.uint64) << np.uint64(SERIAL_BITS)) + np.arange(
            self.serial, self.serial + n, dtype=np.uint64
        )
        self.serial += n
        self.runs.add(table.append_column("place", pa.array(place)).append_column("key", pa.array(key, pa.uint64())))

    def groups(self) -> Iterator[pa.Table]:
        """Chunks of whole questions, in output order, with `place` and `question` (its first place) columns."""
        chunks = (
            chunk.append_column("question", pc.cast(pc.shift_right(chunk["key"], SERIAL_BITS), pa.int64()))
            for chunk in _gathered(self.runs.merged(), GROUP_ROWS)
        )
        yield from whole_groups(chunks, "question")

    def tables(self) -> Iterator[tuple[int, str, pa.Table]]:
        pools = self.pools.result()
        for chunk in self.groups():
            lists = self.graded_lists(chunk)
            retrieved = self._retrieved(chunk, lists)
            split = self.subq_split[self.position_of_place[lists["place"].to_numpy(zero_copy_only=False)]]
            for code in np.unique(split):
                part = lists.filter(pa.array(split == code))
                rows, counts = derive_rows(
                    part,
                    ChunkInputs(part["query_text"], retrieved(part), pools.get(int(code))),
                    self.rule,
                )
                self.counts.negatives.add(counts)
                for name, table in (("graded-lists", part.drop_columns(["place", "question", "query_text"])),
                                    ("hard-negatives", rows)):  # fmt: skip
                    self.counts.rows.setdefault(name, {}).setdefault(int(code), 0)
                    self.counts.rows[name][int(code)] += table.num_rows
                    yield int(code), name, table
        if isinstance(self.retrieved, RunsOfQuestions):
            self.retrieved.kept_lists(self.retrieved.upto(None), _no_pairs())  # questions with runs, no judgments

    def _retrieved(self, chunk: pa.Table, lists: pa.Table):
        """part -> the `derive_rows` lookup of its rows' retrieved-unjudged lists."""
        if isinstance(self.retrieved, RunsOfQuestions):
            runs = self.retrieved.upto(int(chunk["question"][-1].as_py()))
            graded = pa.table({"question": chunk["question"], "docid": chunk["docid"]})
            kept = self.retrieved.kept_lists(runs, graded)
            question = kept["question"].to_numpy(zero_copy_only=False).astype(np.int64)
            docids = kept["docid"].combine_chunks()
            return lambda part: lists_by_row(
                question, docids, part["question"].to_numpy(zero_copy_only=False).astype(np.int64)
            )
        return lambda part: None

    def graded_lists(self, chunk: pa.Table) -> pa.Table:
        """One row per sub-question of the chunk, in output order, each list hardest first within a level."""
        chunk = chunk.take(pc.sort_indices(chunk, [("place", "ascending"), *LIST_ORDER]))
        place = chunk["place"].combine_chunks()
        starts = group_starts(place)
        offsets = pa.array(np.append(starts, len(place)).astype(np.int32))
        first = place.take(pa.array(starts))
        position = pa.array(self.position_of_place[first.to_numpy(zero_copy_only=False)], pa.int64())

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
                "query_id": self.ids.take(position),
                "qid": self.qids.take(position),
                "docids": lists("docid"),
                "labels": lists("level"),
                "expected": lists("expected", True),
                "probs": lists("probs", True),
                "place": first,
                "question": chunk["question"].take(pa.array(starts)),
                "query_text": self.texts.take(position),
            }
        )


class OtherQuestionPools:
    """Per split, the (docid, qid) pairs judged <= negative_level for its sampled questions (hard_negatives.py
    `sampled_questions`), gathered as judgments are added: a few thousand pairs a split."""

    def __init__(self, qids: pa.Array | pa.ChunkedArray, subq_split: np.ndarray):
        self.qids = qids
        self.sampled: np.ndarray = np.zeros(len(qids), bool)
        for code in np.unique(subq_split):
            in_split = subq_split == code
            chosen = sampled_questions(qids.filter(pa.array(in_split)).to_pylist())
            self.sampled |= in_split & pc.is_in(qids, value_set=pa.array(sorted(chosen), pa.string())).to_numpy(
                zero_copy_only=False
            )
        self.subq_split = subq_split
        self.parts: dict[int, list[pa.Table]] = {}

    def add(self, table: pa.Table, position: np.ndarray, negative_level: int) -> None:
        level = table["level"].to_numpy(zero_copy_only=False)
        mask = self.sampled[position] & (level <= negative_level)
        if not mask.any():
            return
        where = position[mask]
        for code in np.unique(self.subq_split[where]):
            mine = self.subq_split[where] == code
            self.parts.setdefault(int(code), []).append(
                pa.table(
                    {
                        "docid": table["docid"].filter(pa.array(mask)).filter(pa.array(mine)),
                        "qid": self.qids.take(pa.array(where[mine], pa.int64())),
                    }
                )
            )

    def result(self) -> dict[int, OtherQuestionPool]:
        return {code: OtherQuestionPool(pa.concat_tables(parts)) for code, parts in self.parts.items()}


def _gathered(chunks: Iterator[pa.Table], rows: int) -> Iterator[pa.Table]:
    """Consecutive chunks joined until they hold `rows` rows: each chunk handed on costs a fixed overhead."""
    held, count = [], 0
    for chunk in chunks:
        held.append(chunk)
        count += chunk.num_rows
        if count >= rows:
            yield pa.concat_tables(held).combine_chunks()
            held, count = [], 0
    if held:
        yield pa.concat_tables(held).combine_chunks()


def _no_pairs() -> pa.Table:
    return pa.table({"question": pa.array([], pa.int64()), "docid": pa.array([], pa.string())})


def group_starts(sorted_keys: pa.Array) -> np.ndarray:
    """Where each run of equal values starts in a sorted column."""
    if len(sorted_keys) == 0:
        return np.zeros(0, np.int64)
    changes = pc.not_equal(sorted_keys[1:], sorted_keys[:-1]).to_numpy(zero_copy_only=False)
    return np.concatenate([[0], np.flatnonzero(changes) + 1]).astype(np.int64)


def conformed(name: str, table: pa.Table) -> pa.Table:
    return table.cast(arrow_schema(CONFIGS[name]))


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
        runs: list[Path] | None = None,
    ):
        from builder.release.assemble.retrieved import run_files
        from builder.release.assemble.writer import RollingWriter
        from builder.release.layout import config
        from generation.profiles.profile import Complexity, TrainingConfigsSettings

        training = profile.training if profile is not None else TrainingConfigsSettings()
        answer_level = (profile.complexity if profile is not None else Complexity()).answer_level
        retrieved = None
        if runs:
            place, question_place = output_order(subquestions["qid"])
            qids = pc.unique(subquestions["qid"])
            question_key: np.ndarray = np.full(len(qids), -1, np.int64)
            question_key[pc.index_in(subquestions["qid"], value_set=qids).to_numpy(zero_copy_only=False)] = (
                question_place
            )
            retrieved = RunsOfQuestions(qids, question_key, training.retrieved_kept)
            retrieved.add_files(run_files(runs, profile))
        self.rows = TrainingRows(subquestions, subq_split, answer_level, training, retrieved)
        self.rows.counts.retrieved = "runs" if runs else "none"
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

    def retrieved_column(self, questions: pa.Table) -> pa.Array | None:
        """`questions.retrieved_unjudged` for the questions table's rows (None without runs)."""
        retrieved = self.rows.retrieved
        if not isinstance(retrieved, RunsOfQuestions):
            return None
        where = pc.index_in(questions["qid"], value_set=retrieved.qids).fill_null(-1).to_numpy(zero_copy_only=False)
        return retrieved.column(np.where(where >= 0, retrieved.question_key[where], -1))
