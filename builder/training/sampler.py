"""A sentence-transformers batch sampler for the release's hard-negatives rows, and the count of what lands among an
anchor's in-batch negatives for any batching.

MultipleNegativesRankingLoss (sentence_transformers/sentence_transformer/losses/multiple_negatives_ranking.py,
sentence-transformers 6.x, default direction "query_to_doc") scores each anchor against every document column of
the batch: its own positive is the target; every other row's positive and every row's negatives are negatives.
Sibling sub-questions of one question are judged over one shared pool, so a sibling's positive is often a document
judged >= answer_level for this anchor too: a false negative by construction.

`QuestionApartBatchSampler` is a `DefaultBatchSampler` (sentence_transformers/base/sampler.py), passed to the trainer
as `SentenceTransformerTrainingArguments(batch_sampler=guard.batch_sampler)`: the trainer calls it with (dataset,
batch_size, drop_last, valid_label_columns, generator, seed) and calls `set_epoch` on it each epoch (base/trainer.py
`get_batch_sampler`). A row joins a batch only when

- no row of its question is in the batch (siblings apart, as the dataset card asks);
- none of its documents is judged >= answer_level for an anchor already there, and none of the batch's documents is
  judged >= answer_level for its own anchor;
- with `between_out`, the same for documents judged between negative_level and answer_level.

Batches fill as far as those rules allow: each epoch spreads every question's rows evenly over a seeded order
(seed + epoch), and, as `NoDuplicatesBatchSampler` does, a row that conflicts with the batch is deferred to a later
one (deferred rows are tried first). The tail follows sentence-transformers: with `drop_last=False` (the trainer's
default) the batches the rules leave short are yielded, so every row is used once an epoch; with `drop_last=True`
they are dropped, as `NoDuplicatesBatchSampler` drops them, and a warning says how many rows that leaves out.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from sentence_transformers.base.sampler import DefaultBatchSampler

logger = logging.getLogger(__name__)


class Csr:
    """Lists of integer codes, one per key, as offsets into one array (memory: 4 bytes a code)."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, size: int):
        order = np.argsort(keys, kind="stable")
        self.values = values[order].astype(np.int32)
        self.offsets = np.r_[0, np.cumsum(np.bincount(keys, minlength=size))].astype(np.int64)

    def of(self, key: int) -> list[int]:
        return self.values[self.offsets[key] : self.offsets[key + 1]].tolist()


class FalseNegativeGuard:
    """The rows of one training dataset, in its row order, as integer codes, with the judged documents of each
    anchor: what the sampler and the in-batch count read. Row i: `anchors[i]` (sub-question), `questions[i]`,
    `documents[i]` (positive first, then negatives); anchor a: `high.of(a)` (documents judged >= answer_level) and
    `middle.of(a)` (judged between negative_level and answer_level); `names[code]`: the docid."""

    def __init__(
        self,
        anchors: np.ndarray,
        questions: np.ndarray,
        documents: np.ndarray,
        high: Csr,
        middle: Csr,
        names: Sequence[str] = (),
        between_out: bool = True,
    ):
        self.anchors, self.questions, self.documents = anchors, questions, documents
        self.high, self.middle, self.names, self.between_out = high, middle, names, between_out
        self.anchor_ids: pa.Array | None = None  # subq_id of each anchor code, when built from ids

    def __len__(self) -> int:
        return len(self.anchors)

    def blocked(self, row: int) -> list[int]:
        """The documents this row's anchor must not meet among its in-batch negatives."""
        anchor = int(self.anchors[row])
        return self.high.of(anchor) + self.middle.of(anchor) if self.between_out else self.high.of(anchor)

    def batch_sampler(
        self, dataset, batch_size: int, drop_last: bool, valid_label_columns=None, generator=None, seed: int = 0
    ) -> QuestionApartBatchSampler:
        """The callable `SentenceTransformerTrainingArguments.batch_sampler` takes."""
        return QuestionApartBatchSampler(
            dataset,
            batch_size=batch_size,
            drop_last=drop_last,
            valid_label_columns=valid_label_columns,
            generator=generator,
            seed=seed,
            guard=self,
        )

    def conflicts(self, row: int, batch: Iterable[int]) -> bool:
        """Whether the rules keep `row` out of a batch holding `batch`."""
        open_batch = OpenBatch(self)
        for other in batch:
            open_batch.add(other)
        return bool(open_batch.rows) and not open_batch.admits(row)


class OpenBatch:
    """The batch being filled: its questions, the documents its rows bring and the documents its anchors block."""

    def __init__(self, guard: FalseNegativeGuard):
        self.guard = guard
        self.rows: list[int] = []
        self.questions: set[int] = set()
        self.present: set[int] = set()
        self.blocked: set[int] = set()

    def admits(self, row: int) -> bool:
        guard = self.guard
        return (
            int(guard.questions[row]) not in self.questions
            and self.blocked.isdisjoint(guard.documents[row].tolist())
            and self.present.isdisjoint(guard.blocked(row))
        )

    def add(self, row: int) -> None:
        guard = self.guard
        self.rows.append(row)
        self.questions.add(int(guard.questions[row]))
        self.present.update(guard.documents[row].tolist())
        self.blocked.update(guard.blocked(row))


def spread_order(questions: np.ndarray, generator: torch.Generator) -> np.ndarray:
    """Row indices in an order that spreads each question's rows evenly: the j-th of a question's n rows (in a
    shuffled order) sits at (j + u) / n, u uniform per question, ties broken by a shuffle. Read in this order, a
    batch meets as many questions as the epoch can give it, so batches fill as far as the question rule allows."""
    n = len(questions)
    if n == 0:
        return np.zeros(0, np.int64)
    shuffle = torch.randperm(n, generator=generator).numpy()
    _, question = np.unique(questions, return_inverse=True)
    offset = torch.rand(int(question.max()) + 1, generator=generator, dtype=torch.float64).numpy()
    order = shuffle[np.argsort(question[shuffle], kind="stable")]  # rows by question, shuffled within it
    grouped = question[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    counts = np.diff(np.r_[starts, n])
    rank = np.arange(n) - np.repeat(starts, counts)
    place = (rank + offset[grouped]) / np.repeat(counts, counts)
    tiebreak = torch.rand(n, generator=generator, dtype=torch.float64).numpy()
    return order[np.lexsort((tiebreak, place))]


class QuestionApartBatchSampler(DefaultBatchSampler):
    def __init__(
        self,
        dataset,
        batch_size: int,
        drop_last: bool,
        valid_label_columns=None,
        generator: torch.Generator | None = None,
        seed: int = 0,
        *,
        guard: FalseNegativeGuard,
    ):
        super().__init__(
            dataset,
            batch_size=batch_size,
            drop_last=drop_last,
            valid_label_columns=valid_label_columns,
            generator=generator,
            seed=seed,
        )
        if len(guard) != len(dataset):
            raise ValueError(
                f"the guard describes {len(guard):,} rows, the dataset has {len(dataset):,}: "
                "build both from the same rows in the same order"
            )
        self.guard = guard
        self._cached: tuple[int, list[list[int]], int] = (-1, [], 0)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches_of_epoch())

    def __len__(self) -> int:
        """Exact: the batches of this epoch, computed once (the rules can make more, shorter batches than
        rows / batch_size, and the trainer sizes its learning-rate schedule by this length)."""
        return len(self.batches_of_epoch())

    @property
    def rows_left_out(self) -> int:
        """Rows of this epoch in short batches that `drop_last=True` dropped."""
        self.batches_of_epoch()
        return self._cached[2]

    def batches_of_epoch(self) -> list[list[int]]:
        if self._cached[0] != self.epoch:
            batches = self._batches(self.seed + self.epoch)
            kept = [b for b in batches if len(b) == self.batch_size] if self.drop_last else batches
            left_out = sum(len(b) for b in batches) - sum(len(b) for b in kept)
            if batches and not kept:
                raise ValueError(
                    f"drop_last=True leaves no batch: the question and judged-document rules fit at most "
                    f"{max(len(b) for b in batches)} of these {len(self.guard):,} rows in one batch, fewer than "
                    f"{self.batch_size}; lower the batch size or keep drop_last=False"
                )
            if left_out:
                logger.warning(
                    "drop_last=True: %d of %d rows sit in batches the question and judged-document rules leave "
                    "short of %d; they are left out of epoch %d (drop_last=False keeps them)",
                    left_out,
                    len(self.guard),
                    self.batch_size,
                    self.epoch,
                )
            self._cached = (self.epoch, kept, left_out)
        return self._cached[1]

    def _batches(self, seed: int) -> list[list[int]]:
        """Rows deferred by earlier batches are tried first, then the spread order is read on: each row is looked at
        once unless it is deferred, so an epoch costs O(rows) when conflicts are rare (the paper's ~90k questions)
        and O(deferred x batches) at worst (a sample of a dozen questions)."""
        generator = self.generator or torch.Generator()
        generator.manual_seed(seed)
        stream: Iterator[int] = iter(spread_order(self.guard.questions, generator).tolist())
        pending: list[int] = []
        batches = []
        exhausted = False
        while pending or not exhausted:
            batch = OpenBatch(self.guard)
            still: list[int] = []
            for position, row in enumerate(pending):
                if len(batch.rows) == self.batch_size:
                    still.extend(pending[position:])
                    break
                if batch.admits(row):
                    batch.add(row)
                else:
                    still.append(row)
            while len(batch.rows) < self.batch_size and not exhausted:
                fresh = next(stream, None)
                if fresh is None:
                    exhausted = True
                elif batch.admits(fresh):
                    batch.add(fresh)
                else:
                    still.append(fresh)
            pending = still
            batches.append(batch.rows)
        return batches


@dataclass
class InBatchCount:
    """In-batch negatives (one per document column an anchor is scored against, its own positive left out): how
    many are judged >= answer_level for the anchor (false negatives) or between the levels; rows with a false
    negative; pairs of rows of one question in a batch; rows and batches."""

    negatives: int = 0
    false_negatives: int = 0
    between: int = 0
    rows: int = 0
    rows_hit: int = 0
    same_question_pairs: int = 0
    batches: int = 0

    @property
    def share(self) -> float:
        return self.false_negatives / self.negatives if self.negatives else 0.0

    @property
    def rows_per_batch(self) -> float:
        return self.rows / self.batches if self.batches else 0.0


def count_in_batch(batches: Iterable[Sequence[int]], guard: FalseNegativeGuard) -> InBatchCount:
    count = InBatchCount()
    for batch in batches:
        count.batches += 1
        columns = Counter(d for row in batch for d in guard.documents[row].tolist())
        _, per_question = np.unique(guard.questions[list(batch)], return_counts=True)
        count.same_question_pairs += int((per_question * (per_question - 1) // 2).sum())
        width = sum(columns.values())
        for row in batch:
            anchor, positive = int(guard.anchors[row]), int(guard.documents[row][0])
            high, middle = set(guard.high.of(anchor)), set(guard.middle.of(anchor))
            # every document column of the batch but the anchor's own positive (its target) is a negative
            hits = sum(columns[d] for d in high) - (positive in high)
            count.negatives += width - 1
            count.false_negatives += hits
            count.between += sum(columns[d] for d in middle) - (positive in middle)
            count.rows += 1
            count.rows_hit += hits > 0
    return count


def sequential_batches(rows: int, batch_size: int) -> list[list[int]]:
    """File order, as a trainer without shuffling batches it."""
    return [list(range(start, min(start + batch_size, rows))) for start in range(0, rows, batch_size)]


def as_batches(sampler) -> list[list[int]]:
    return [list(map(int, batch)) for batch in sampler]


def build_guard(
    rows: pa.Table, graded: pa.Table, answer_level: int, negative_level: int, between_out: bool = True
) -> FalseNegativeGuard:
    """The guard of `rows` (the id sidecar's columns: query_id, qid, positive_id, negative_ids) with the judged
    documents of their anchors from `graded` (the `graded-lists` columns query_id, docids, labels), in Arrow and
    numpy throughout: the paper's ~7M rows cost ~16 bytes a document code."""
    anchors = pc.unique(rows["query_id"])
    anchor_of = pc.index_in(rows["query_id"], value_set=anchors).to_numpy(zero_copy_only=False)
    question_of = pc.index_in(rows["qid"], value_set=pc.unique(rows["qid"])).to_numpy(zero_copy_only=False)
    graded = graded.filter(pc.is_in(graded["query_id"], value_set=anchors))
    docids = pc.list_flatten(graded["docids"])
    labels = pc.list_flatten(graded["labels"]).to_numpy(zero_copy_only=False)
    graded_anchor = np.repeat(
        pc.index_in(graded["query_id"], value_set=anchors).to_numpy(zero_copy_only=False),
        pc.list_value_length(graded["docids"]).to_numpy(zero_copy_only=False),
    )
    negatives = rows["negative_ids"].combine_chunks() if rows.num_rows else pa.array([], pa.list_(pa.string()))
    width = 1 + (len(negatives[0]) if len(negatives) else 0)
    names = pc.unique(pa.chunked_array([rows["positive_id"], pc.list_flatten(negatives), docids], pa.string()))
    positive = pc.index_in(rows["positive_id"], value_set=names).to_numpy(zero_copy_only=False)
    rest = pc.index_in(pc.list_flatten(negatives), value_set=names).to_numpy(zero_copy_only=False)
    documents = np.column_stack([positive, rest.reshape(len(positive), width - 1)]).astype(np.int64)
    graded_code = pc.index_in(docids, value_set=names).to_numpy(zero_copy_only=False)
    high, middle = labels >= answer_level, (labels > negative_level) & (labels < answer_level)
    size = len(anchors)
    guard = FalseNegativeGuard(
        anchor_of.astype(np.int64),
        question_of.astype(np.int64),
        documents,
        Csr(graded_anchor[high], graded_code[high], size),
        Csr(graded_anchor[middle], graded_code[middle], size),
        names.to_pylist(),
        between_out,
    )
    guard.anchor_ids = anchors
    return guard
