"""`hard-negatives` rows from `graded-lists` rows: one row per (sub-question, positive), every positive kept, its k
negatives filled from the sources in `training.fill_order`, each negative's source named in `negative_sources`:

- `judged`: the sub-question's documents judged <= negative_level, hardest first (the graded list's order: level
  descending, then rerank rank, then BM25 rank, then docid);
- `retrieved_unjudged`: documents the question's runs retrieved that no judgment covers
  (`questions.retrieved_unjudged`, hardest first): unjudged, so a few may answer the sub-question;
- `other_question`: documents judged <= negative_level for a sub-question of another question of the split, from a
  fixed sample of OTHER_QUESTIONS questions (those with the smallest sha256(f"{SAMPLE_SALT}:{qid}")): unjudged for
  this sub-question too.

Rotation: the i-th positive of a sub-question (graded-list order) needing m documents when a source's turn comes
takes candidates (i*m + j) mod n, j < min(m, n), of that source's n candidates, in candidate order, so a
sub-question's positives do not all share one set of negatives. `other_question` walks the split's sample from
(FNV-1a 64 of query_id + i*m) mod its size, passing over documents judged for the question or retrieved for it. A
positive that all the sources together cannot give k documents is left out and counted (`short_positives`).

The build and `training-files` (builder/training/rows.py) derive rows with `derive_rows`, chunk by chunk of whole
questions; `validate` re-derives them by its own code path (builder/release/validate/training_reference.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.training_rule import OTHER_QUESTIONS, SAMPLE_SALT, SOURCES, fnv1a64, sha_numbers


@dataclass(frozen=True)
class NegativeRule:
    answer_level: int
    negative_level: int
    negatives: int  # k
    fill_order: tuple[str, ...] = SOURCES

    @classmethod
    def of(cls, training, answer_level: int) -> NegativeRule:
        return cls(answer_level, training.negative_level, training.negatives, tuple(training.fill_order))


@dataclass
class NegativeCounts:
    positives: int = 0
    short_positives: int = 0  # left out: fewer than k documents from every source together
    by_source: Counter = field(default_factory=Counter)

    def add(self, other: NegativeCounts) -> None:
        self.positives += other.positives
        self.short_positives += other.short_positives
        self.by_source.update(other.by_source)

    def negatives_by_source(self) -> dict[str, int]:
        return {s: self.by_source.get(s, 0) for s in SOURCES}


def sampled_questions(qids: Sequence[str]) -> set[str]:
    """The OTHER_QUESTIONS questions of `qids` (one split's) with the smallest sha256(f"{SAMPLE_SALT}:{qid}")."""
    qids = sorted(set(qids))
    if len(qids) <= OTHER_QUESTIONS:
        return set(qids)
    order = np.argsort(sha_numbers(qids, SAMPLE_SALT), kind="stable")[:OTHER_QUESTIONS]
    return {qids[i] for i in order}


class OtherQuestionPool:
    """One split's documents judged <= negative_level for a sub-question of a sampled question, each once, ordered
    by (sha256 of that question, docid), its first such question counting: what `other_question` negatives are
    drawn from. A document judged for the row's own question is passed over, so no question draws its own."""

    WINDOW = 8  # candidates looked at past the m wanted, before a positive falls back to walking the whole pool

    def __init__(self, pairs: pa.Table):
        pairs = pairs.group_by(["docid", "qid"], use_threads=False).aggregate([])
        order = sha_numbers(pairs["qid"].to_pylist(), SAMPLE_SALT)
        pairs = pairs.append_column("order", pa.array(order)).sort_by([("order", "ascending"), ("docid", "ascending")])
        docids = pairs["docid"].combine_chunks()
        codes = pc.dictionary_encode(docids).indices.to_numpy(zero_copy_only=False)
        first = np.sort(np.unique(codes, return_index=True)[1]) if len(codes) else np.zeros(0, np.int64)
        self.docids = docids.take(pa.array(first, pa.int64()))

    def __len__(self) -> int:
        return len(self.docids)

    def take(self, start: int, m: int, excluded: set[str]) -> list[str]:
        """Walking the pool from `start`, the first m documents not in `excluded`."""
        taken: list[str] = []
        n = len(self.docids)
        for step in range(n):
            if len(taken) == m:
                break
            docid = self.docids[(start + step) % n].as_py()
            if docid not in excluded and docid not in taken:
                taken.append(docid)
        return taken


@dataclass
class RowLists:
    """Per row of a chunk, its question's retrieved-unjudged docids: `docids[start[row]:stop[row]]`."""

    docids: pa.Array
    start: np.ndarray
    stop: np.ndarray


@dataclass
class ChunkInputs:
    """What `derive_rows` reads besides the graded lists: each row's sub-question text, its question's
    retrieved-unjudged list, and the split's other-question pool."""

    query_text: pa.Array
    retrieved: RowLists | None
    pool: OtherQuestionPool | None


def derive_rows(lists: pa.Table, inputs: ChunkInputs, rule: NegativeRule) -> tuple[pa.Table, NegativeCounts]:
    """The hard-negatives rows of a chunk of graded-lists rows (query_id, qid, docids, labels) holding whole
    questions; their order: the chunk's, then each sub-question's positives in graded-list order."""
    chunk = _Chunk(lists, inputs, rule)
    chunk.fill()
    k = rule.negatives
    keep = chunk.filled == k
    counts = NegativeCounts(len(keep), int((~keep).sum()))
    codes = chunk.source[keep].ravel()
    counts.by_source.update({SOURCES[c]: int(n) for c, n in enumerate(np.bincount(codes, minlength=len(SOURCES)))})
    rows = pa.array(chunk.pos_row[keep], pa.int64())
    n = int(keep.sum())
    offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
    documents = pa.concat_arrays([chunk.docids, *chunk.blocks])
    table = pa.table(
        {
            "query_id": lists["query_id"].take(rows),
            "query_text": inputs.query_text.take(rows),
            "positive_document_ids": pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32)), chunk.docids.take(pa.array(chunk.positive[keep]))
            ),
            "negative_document_ids": pa.ListArray.from_arrays(
                offsets, documents.take(pa.array(chunk.chosen[keep].ravel()))
            ),
            "negative_sources": pa.ListArray.from_arrays(offsets, pa.array(SOURCES).take(pa.array(codes))),
            "qid": lists["qid"].take(rows),
        }
    )
    return table, counts


def _pair(qids: pa.Array, docids: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(qids, docids, "\x1f")


def _combined(chunks: pa.Array | pa.ChunkedArray) -> pa.Array:
    return chunks.combine_chunks() if isinstance(chunks, pa.ChunkedArray) else chunks


class _Chunk:
    """The flattened graded lists of a chunk: element e is docid `docids[e]` with label `labels[e]` of row
    `row_of[e]`; `positive` / `low`: elements at level >= answer_level / <= negative_level, in list order. Each
    positive's negatives: `chosen`, indices into `docids` followed by `blocks` (the documents taken from outside the
    lists); `source`, codes into SOURCES; `filled` of them. Every source is filled in numpy, for every positive at
    once, in the fill order."""

    def __init__(self, lists: pa.Table, inputs: ChunkInputs, rule: NegativeRule):
        self.lists, self.inputs, self.rule = lists, inputs, rule
        lengths = pc.list_value_length(lists["docids"]).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        self.list_start = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        self.docids = pc.list_flatten(_combined(lists["docids"]))
        labels = pc.list_flatten(_combined(lists["labels"])).to_numpy(zero_copy_only=False)
        self.row_of: np.ndarray = np.repeat(np.arange(lists.num_rows), lengths)
        self.positive = np.flatnonzero(labels >= rule.answer_level)
        self.low = np.flatnonzero(labels <= rule.negative_level)
        self.pos_row = self.row_of[self.positive]
        self.index = np.arange(len(self.positive)) - np.searchsorted(self.pos_row, self.pos_row, "left")
        self.low_count = np.bincount(self.row_of[self.low], minlength=lists.num_rows)
        self.low_start = np.r_[0, np.cumsum(self.low_count)[:-1]].astype(np.int64)
        n, k = len(self.positive), rule.negatives
        self.chosen: np.ndarray = np.zeros((n, k), np.int64)
        self.source: np.ndarray = np.zeros((n, k), np.int8)
        self.filled: np.ndarray = np.zeros(n, np.int64)
        self.blocks: list[pa.Array] = []
        self.size = len(self.docids)  # of `docids` and `blocks` together
        self.qids: list[str] | None = None
        self.graded_of: dict[str, set[str]] = {}

    def fill(self) -> None:
        for source in self.rule.fill_order:
            if source == "other_question":
                self._walk_pool()
            else:
                self._rotate(source)

    def _rotate(self, source: str) -> None:
        """Every positive short of k takes its rotated share of a source's candidates (its sub-question's low
        documents, or its question's retrieved list): (i*m + j) mod n, j < min(m, n), in candidate order."""
        k = self.rule.negatives
        short = np.flatnonzero(self.filled < k)
        row = self.pos_row[short]
        retrieved = self.inputs.retrieved
        if source == "judged":
            start, count = self.low_start[row], self.low_count[row]
        elif retrieved is not None:
            start, count = retrieved.start[row], retrieved.stop[row] - retrieved.start[row]
        else:
            return
        m = k - self.filled[short]
        take = np.minimum(m, count)
        slots = np.arange(k)[None, :]
        valid = slots < take[:, None]
        offset = (self.index[short][:, None] * m[:, None] + slots) % np.maximum(count, 1)[:, None]
        offset = np.sort(np.where(valid, offset, np.iinfo(np.int64).max), axis=1)
        at = (start[:, None] + np.where(valid, offset, 0))[valid]
        if not len(at):
            return
        if source == "judged":
            where = self.low[at]
        elif retrieved is not None:  # always, for the retrieved source: it returned above otherwise
            unique, where = np.unique(at, return_inverse=True)
            self.blocks.append(retrieved.docids.take(pa.array(unique)))
            where = self.size + where
            self.size += len(unique)
        positives: np.ndarray = np.repeat(short, take)
        columns = (self.filled[short][:, None] + slots)[valid]
        self.chosen[positives, columns] = where
        self.source[positives, columns] = SOURCES.index(source)
        self.filled[short] += take

    def _walk_pool(self) -> None:
        """Every positive short of k walks the other-question pool from (fnv1a64(query_id) + i*m) mod n and takes
        the first m documents not graded for its question nor in its retrieved list: a window of m + WINDOW
        candidates in numpy, the whole pool in Python for the few whose window was not enough."""
        pool, k = self.inputs.pool, self.rule.negatives
        short = np.flatnonzero(self.filled < k)
        if pool is None or not len(pool) or not len(short):
            return
        n, row, m = len(pool), self.pos_row[short], k - self.filled[short]
        rows = np.unique(row)
        start = np.zeros(self.lists.num_rows, np.uint64)
        start[rows] = fnv1a64(self.lists["query_id"].take(pa.array(rows))) % np.uint64(n)
        width = min(int(m.max()) + pool.WINDOW, n)
        at = (start[row].astype(np.int64)[:, None] + (self.index[short] * m)[:, None] + np.arange(width)) % n
        candidates = pool.docids.take(pa.array(at.ravel()))
        near = pa.concat_arrays([self.docids, self._listed_of(rows)])
        hit = pc.is_in(candidates, value_set=near).to_numpy(zero_copy_only=False).reshape(at.shape)
        valid = ~hit
        if hit.any():  # graded or retrieved for some question of the chunk: is it this row's question?
            flat = np.flatnonzero(hit.ravel())
            np.put(valid, flat, ~self._judged_or_listed(row[flat // width], candidates.take(pa.array(flat))))
        pick = valid & (np.cumsum(valid, axis=1) <= m[:, None])
        got = pick.sum(axis=1)
        whole = (got == m) | (width == n)
        chosen = np.flatnonzero((pick & whole[:, None]).ravel())
        self._place(short[whole], np.repeat(short[whole], got[whole]), candidates.take(pa.array(chosen)), got[whole])
        for p in short[~whole].tolist():
            r, i, want = int(self.pos_row[p]), int(self.index[p]), int(k - self.filled[p])
            taken = pool.take(int(start[r]) + i * want, want, self._excluded(r))
            self._place(np.array([p]), np.full(len(taken), p), pa.array(taken, pa.string()), np.array([len(taken)]))

    def _place(self, short: np.ndarray, positives: np.ndarray, documents: pa.Array, got: np.ndarray) -> None:
        """Append other-question `documents` (in positive order, `got[i]` for positive `short[i]`)."""
        if not len(documents):
            return
        columns = np.repeat(self.filled[short], got) + np.arange(len(positives)) - np.repeat(np.cumsum(got) - got, got)
        self.chosen[positives, columns] = self.size + np.arange(len(documents))
        self.source[positives, columns] = SOURCES.index("other_question")
        self.blocks.append(documents)
        self.size += len(documents)
        self.filled[short] += got

    def _judged_or_listed(self, rows: np.ndarray, docids: pa.Array) -> np.ndarray:
        """Per (row, docid): graded for a sub-question of the row's question, or in its retrieved list."""
        qids = _combined(self.lists["qid"])
        wanted = pc.is_in(self.docids, value_set=docids).to_numpy(zero_copy_only=False)
        elements = np.flatnonzero(wanted)
        known = [_pair(qids.take(pa.array(self.row_of[elements])), self.docids.take(pa.array(elements)))]
        retrieved = self.inputs.retrieved
        if retrieved is not None:
            near = np.unique(rows)
            counts = retrieved.stop[near] - retrieved.start[near]
            known.append(_pair(qids.take(pa.array(np.repeat(near, counts))), self._listed_of(near)))
        return pc.is_in(_pair(qids.take(pa.array(rows)), docids), value_set=pa.concat_arrays(known)).to_numpy(
            zero_copy_only=False
        )

    def _listed_of(self, rows: np.ndarray) -> pa.Array:
        """The retrieved lists of these rows, end to end."""
        retrieved = self.inputs.retrieved
        if retrieved is None or not len(rows):
            return pa.array([], pa.string())
        counts = retrieved.stop[rows] - retrieved.start[rows]
        at = (
            np.repeat(retrieved.start[rows], counts)
            + np.arange(counts.sum())
            - np.repeat(np.cumsum(counts) - counts, counts)
        )
        return retrieved.docids.take(pa.array(at, pa.int64()))

    def _listed(self, row: int) -> pa.Array:
        retrieved = self.inputs.retrieved
        if retrieved is None:
            return pa.array([], pa.string())
        return retrieved.docids[int(retrieved.start[row]) : int(retrieved.stop[row])]

    def _excluded(self, row: int) -> set[str]:
        """Documents graded for any sub-question of this row's question (its rows sit together in the chunk), and
        its retrieved list."""
        if self.qids is None:
            self.qids = self.lists["qid"].to_pylist()
        qid = self.qids[row]
        if qid not in self.graded_of:
            first = last = row
            while first > 0 and self.qids[first - 1] == qid:
                first -= 1
            while last + 1 < len(self.qids) and self.qids[last + 1] == qid:
                last += 1
            graded = self.docids[self.list_start[first] : self.list_start[last + 1]].to_pylist()
            self.graded_of[qid] = set(graded) | set(self._listed(row).to_pylist())
        return self.graded_of[qid]


def whole_groups(chunks: Iterator[pa.Table], column: str) -> Iterator[pa.Table]:
    """The rows of sorted `chunks` cut so that no value of `column` spans two tables (the last value's rows wait
    for the next chunk)."""
    carry = None
    for chunk in chunks:
        if carry is not None:
            chunk = pa.concat_tables([carry, chunk])
        whole = pc.not_equal(chunk[column], chunk[column][-1])
        carry = chunk.filter(pc.invert(whole))
        if pc.any(whole).as_py():
            yield chunk.filter(whole)
    if carry is not None and carry.num_rows:
        yield carry
