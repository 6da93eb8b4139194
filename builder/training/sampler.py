"""A sentence-transformers batch sampler that keeps judged positives out of an anchor's in-batch negatives, and the
count of such false negatives for any batching.

MultipleNegativesRankingLoss (sentence_transformers/sentence_transformer/losses/multiple_negatives_ranking.py,
sentence-transformers 6.x, default direction "query_to_doc") scores each anchor against every document column of
the batch: its own positive is the target, every other row's positive and every row's hard negatives are negatives.
Sibling sub-questions of one question are judged over one shared pool, so another row's positive is often a
document judged >= answer_level for this anchor too: a false negative by construction.

`JudgedPositivesBatchSampler` is a `DefaultBatchSampler` (sentence_transformers/base/sampler.py), passed to the
trainer as `SentenceTransformerTrainingArguments(batch_sampler=guard.batch_sampler)`: the trainer calls it with
(dataset, batch_size, drop_last, valid_label_columns, generator, seed) and calls `set_epoch` on it each epoch
(base/trainer.py `get_batch_sampler`). Like `NoDuplicatesBatchSampler` it reads a shuffled order, seeded with
seed + epoch, and defers a row that conflicts with the batch to a later batch (deferred rows are tried first); a row
joins a batch only when none of its documents is a judged positive of an anchor already in the batch, and none of
the batch's documents is a judged positive of its anchor.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from sentence_transformers.base.sampler import DefaultBatchSampler


@dataclass(frozen=True)
class RowDocuments:
    """What the sampler knows of one training row: its anchor, the documents it brings into a batch (its positive
    first, then its hard negatives) and the documents judged >= answer_level for its anchor (every one, not only
    the positives that have a row)."""

    anchor: str
    documents: tuple[str, ...]
    positives: frozenset[str]


class FalseNegativeGuard:
    """The rows of one training dataset, in its row order, as the sampler and the false-negative count see them."""

    def __init__(self, rows: Sequence[RowDocuments]):
        self.rows = list(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def batch_sampler(
        self, dataset, batch_size: int, drop_last: bool, valid_label_columns=None, generator=None, seed: int = 0
    ) -> JudgedPositivesBatchSampler:
        """The callable `SentenceTransformerTrainingArguments.batch_sampler` takes."""
        return JudgedPositivesBatchSampler(
            dataset,
            batch_size=batch_size,
            drop_last=drop_last,
            valid_label_columns=valid_label_columns,
            generator=generator,
            seed=seed,
            guard=self,
        )

    def conflicts(self, row: int, batch: Iterable[int]) -> bool:
        own = self.rows[row]
        return any(
            not own.positives.isdisjoint(self.rows[other].documents)
            or not self.rows[other].positives.isdisjoint(own.documents)
            for other in batch
        )


class JudgedPositivesBatchSampler(DefaultBatchSampler):
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
        self._cached: tuple[int, list[list[int]]] = (-1, [])

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches_of_epoch())

    def __len__(self) -> int:
        """Exact: the batches of this epoch, computed once (a deferred row can make more, shorter batches than
        rows / batch_size, and the trainer sizes its schedule by this length)."""
        return len(self.batches_of_epoch())

    def batches_of_epoch(self) -> list[list[int]]:
        if self._cached[0] != self.epoch:
            self._cached = (self.epoch, self._batches(self.seed + self.epoch))
        return self._cached[1]

    def _batches(self, seed: int) -> list[list[int]]:
        """Rows deferred by earlier batches are tried first, then the shuffled order is read on: each row is looked at
        once unless it is deferred, so an epoch costs O(rows) when conflicts are rare (the paper's ~90k questions)
        and O(deferred^2) at worst (a sample of a dozen questions)."""
        generator = self.generator or torch.Generator()
        generator.manual_seed(seed)
        stream = iter(torch.randperm(len(self.guard), generator=generator).tolist())
        pending: list[int] = []
        batches = []
        exhausted = False
        while pending or not exhausted:
            batch: list[int] = []
            blocked: set[str] = set()  # judged positives of the batch's anchors
            present: set[str] = set()  # documents the batch's rows bring
            still: list[int] = []

            def take(row: int, batch=batch, blocked=blocked, present=present) -> bool:
                described = self.guard.rows[row]
                if blocked.isdisjoint(described.documents) and present.isdisjoint(described.positives):
                    batch.append(row)
                    blocked.update(described.positives)
                    present.update(described.documents)
                    return True
                return False

            for position, row in enumerate(pending):
                if len(batch) == self.batch_size:
                    still.extend(pending[position:])
                    break
                if not take(row):
                    still.append(row)
            while len(batch) < self.batch_size and not exhausted:
                row = next(stream, None)
                if row is None:
                    exhausted = True
                elif not take(row):
                    still.append(row)
            pending = still
            if len(batch) == self.batch_size or not self.drop_last:
                batches.append(batch)
        return batches


@dataclass
class FalseNegativeCount:
    """In-batch negatives (one per document column an anchor is scored against, its own positive left out) and
    how many of them are judged >= answer_level for the anchor; rows with at least one."""

    negatives: int = 0
    false_negatives: int = 0
    rows: int = 0
    rows_hit: int = 0
    batches: int = 0

    @property
    def share(self) -> float:
        return self.false_negatives / self.negatives if self.negatives else 0.0

    @property
    def rows_share(self) -> float:
        return self.rows_hit / self.rows if self.rows else 0.0


def count_false_negatives(batches: Iterable[Sequence[int]], guard: FalseNegativeGuard) -> FalseNegativeCount:
    count = FalseNegativeCount()
    for batch in batches:
        count.batches += 1
        columns = [document for row in batch for document in guard.rows[row].documents]
        for row in batch:
            described = guard.rows[row]
            negatives = list(columns)
            negatives.remove(described.documents[0])  # the anchor's own positive is its target, not a negative
            hits = sum(document in described.positives for document in negatives)
            count.negatives += len(negatives)
            count.false_negatives += hits
            count.rows += 1
            count.rows_hit += hits > 0
    return count


def sequential_batches(rows: int, batch_size: int) -> list[list[int]]:
    """File order, as a trainer without shuffling batches it."""
    return [list(range(start, min(start + batch_size, rows))) for start in range(0, rows, batch_size)]


def as_batches(sampler) -> list[list[int]]:
    return [list(map(int, batch)) for batch in sampler]


def row_documents(
    anchors: Sequence[str], documents: Sequence[Sequence[str]], positives_of: dict[str, frozenset[str]]
) -> FalseNegativeGuard:
    """The guard of rows given as parallel lists: each row's anchor and its documents (positive first)."""
    empty: frozenset[str] = frozenset()
    return FalseNegativeGuard(
        [RowDocuments(anchor, tuple(docs), positives_of.get(anchor, empty)) for anchor, docs in zip(anchors, documents)]
    )
