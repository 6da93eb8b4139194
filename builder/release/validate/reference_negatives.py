"""`validate`'s own derivation of the `hard-negatives` rows of one bucket (training_reference.py states the rule),
as index arithmetic over the bucket's graded lists: every positive of every sub-question at once, no Python loop
per positive.

What makes that possible: a source's turn gives every positive of a sub-question the same count, min(m, n). A
rotation source's n is its candidate list's length; `other_question`'s is the pool's size less the pool's documents
excluded for the question (the walk passes over them, whatever its start). So each sub-question's counts, and
whether its positives are short, follow from a few lengths; only which documents differs from positive to positive:
(i*m + j) mod n of a rotation source's candidates, and the walk's first m kept pool positions from its start,
looked for in a window of m + (the question's excluded pool documents) positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.training_rule import FNV_OFFSET, FNV_PRIME, SOURCES


def fnv1a64(text: str) -> int:
    """FNV-1a, 64-bit, of the string's UTF-8 bytes, a byte at a time (Fowler, Noll, Vo)."""
    value = int(FNV_OFFSET)
    for byte in text.encode():
        value = ((value ^ byte) * int(FNV_PRIME)) % 2**64
    return value


def ragged(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows holding `counts` elements each, laid end to end: each element's row and its index in the row."""
    counts = np.asarray(counts, np.int64)
    row: np.ndarray = np.repeat(np.arange(len(counts)), counts)
    return row, np.arange(len(row)) - (np.cumsum(counts) - counts)[row]


def first_of(groups: np.ndarray, size: int) -> np.ndarray:
    """Where each group's run starts in an array sorted by group (group ids < size), runs laid end to end."""
    counts = np.bincount(groups, minlength=size)
    return np.cumsum(counts) - counts


@dataclass
class GradedLists:
    """A bucket's graded judgments in output order, row by row, and its sub-questions (groups) in order."""

    docids: pa.Array  # per row
    level: np.ndarray  # per row
    group: np.ndarray  # per row: its sub-question's group
    position: np.ndarray  # per group: the sub-question's position in the subquestions tables
    rank: np.ndarray  # per group: its question's rank in output order
    code: np.ndarray  # per group: its split


@dataclass
class Candidates:
    """The documents the sources draw from, for one bucket."""

    retrieved: pa.Array  # every question's stored list, end to end (StoredLists.docids)
    retrieved_start: np.ndarray  # per group: its question's list's first place in `retrieved`
    retrieved_length: np.ndarray  # per group
    pools: list[pa.Array]  # per split code: the other-question pool, in walk order
    query_ids: pa.Array  # per group: the walk starts at FNV-1a 64 of it


@dataclass
class Negatives:
    """The bucket's hard-negatives rows: per row its group, its positive's row, its k negatives and sources."""

    group: np.ndarray
    positive: np.ndarray  # row of the positive in GradedLists
    negatives: pa.Array  # k a row, end to end
    sources: pa.Array
    short: int  # positives left out
    by_source: dict[str, int]
    positives: int


def hard_negatives(lists: GradedLists, found: Candidates, training, answer_level: int) -> Negatives:
    groups, k = len(lists.position), training.negatives
    low = np.flatnonzero(lists.level <= training.negative_level)  # rows, in list order
    low_first = first_of(lists.group[low], groups)
    walk = Walk.of(lists, found)
    counts = {
        "judged": np.bincount(lists.group[low], minlength=groups),
        "retrieved_unjudged": found.retrieved_length,
        "other_question": walk.size[lists.code] - walk.excluded[walk.owner],
    }
    wanted, given = {}, {}  # per source, per group: m when its turn comes, and what it gives, min(m, n)
    left: np.ndarray = np.full(groups, k, np.int64)
    for source in training.fill_order:
        wanted[source], given[source] = left, np.minimum(left, counts[source])
        left = left - given[source]
    short_group = left > 0
    positive = np.flatnonzero(lists.level >= answer_level)
    positives = np.bincount(lists.group[positive], minlength=groups)  # per group
    index = np.arange(len(positive)) - first_of(lists.group[positive], groups)[lists.group[positive]]
    kept = ~short_group[lists.group[positive]]
    positive, index = positive[kept], index[kept]
    group = lists.group[positive]
    pieces: list[pa.Array] = []
    places: list[np.ndarray] = []
    names: list[np.ndarray] = []
    before: np.ndarray = np.zeros(groups, np.int64)  # per group: the negatives earlier sources give a row
    for source in training.fill_order:
        m, count = wanted[source][group], given[source][group]
        row, j = ragged(count)
        if source == "other_question":
            pieces.append(walk.taken(group, index * m, m, count))
        else:
            turn = _rotation(index[row] * m[row], j, count[row], counts[source][group[row]])
            if source == "judged":
                pieces.append(lists.docids.take(pa.array(low[low_first[group[row]] + turn])))
            else:
                pieces.append(found.retrieved.take(pa.array(found.retrieved_start[group[row]] + turn)))
        places.append(row * k + before[group[row]] + j)
        names.append(np.full(len(row), SOURCES.index(source), np.int64))
        before += given[source]
    order = np.argsort(np.concatenate([np.zeros(0, np.int64), *places]), kind="stable")
    codes = np.concatenate([np.zeros(0, np.int64), *names])[order]
    return Negatives(
        group=group,
        positive=positive,
        negatives=pa.concat_arrays([pa.array([], pa.string()), *pieces]).take(pa.array(order)),
        sources=pa.array(SOURCES, pa.string()).take(pa.array(codes)),
        short=int(positives[short_group].sum()),
        by_source={s: int((given[s] * positives)[~short_group].sum()) if s in given else 0 for s in SOURCES},
        positives=int(positives.sum()),
    )


def _rotation(step: np.ndarray, j: np.ndarray, count: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The j-th of the candidates (step + j') mod n, j' < count, in candidate order: a run of the list from
    step mod n, its part wrapped round to the list's head coming first."""
    start = step % np.maximum(n, 1)
    wrapped = np.maximum(start + count - n, 0)
    return np.where(j < wrapped, j, start + j - wrapped)


@dataclass
class Walk:
    """The other-question pools as one bucket's walks see them. The groups of one question and split pass over the
    same documents (those graded for the question in the split, and its stored list's): they share an `owner`, their
    first group. Each pool position an owner's walk passes over is a key owner * stride + position."""

    code: np.ndarray  # per group: its split
    pools: list[pa.Array]  # per split code
    query_ids: pa.Array  # per group
    size: np.ndarray  # per split code: its pool's size
    owner: np.ndarray  # per group
    keys: np.ndarray  # sorted
    excluded: np.ndarray  # per owner: how many pool documents its walk passes over

    @classmethod
    def of(cls, lists: GradedLists, found: Candidates) -> Walk:
        codes = int(lists.code.max(initial=0)) + 1
        pools = [found.pools[c] if c < len(found.pools) else pa.array([], pa.string()) for c in range(codes)]
        size = np.array([len(p) for p in pools], np.int64)
        stride = int(size.max()) + 1
        key = lists.rank * codes + lists.code
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        owner = first[inverse]
        owners = np.unique(owner)
        row, j = ragged(found.retrieved_length[owners])
        listed = found.retrieved.take(pa.array(found.retrieved_start[owners][row] + j))  # each owner's question's
        parts: list[np.ndarray] = [np.zeros(0, np.int64)]
        for code in np.flatnonzero(size).tolist():
            for docids, of_group in ((lists.docids, lists.group), (listed, owners[row])):
                mine = lists.code[of_group] == code
                at = _positions(docids.filter(pa.array(mine)), pools[code])
                parts.append(owner[of_group[mine]][at >= 0] * stride + at[at >= 0])
        keys = np.unique(np.concatenate(parts))
        excluded = np.bincount(keys // stride, minlength=len(lists.position))
        return cls(lists.code, pools, found.query_ids, size, owner, keys, excluded)

    def taken(self, group: np.ndarray, step: np.ndarray, m: np.ndarray, count: np.ndarray) -> pa.Array:
        """Per row (a positive of `group`), its first count = min(m, what the pool holds for it) documents walked
        from (FNV-1a 64 of query_id + step) mod the pool's size, passing over its excluded ones; rows end to end."""
        needing = np.flatnonzero(count > 0)
        group, step, m = group[needing], step[needing], m[needing]
        code = self.code[group]
        size = self.size[code]
        groups, of_row = np.unique(group, return_inverse=True)
        ids = self.query_ids.take(pa.array(groups)).to_pylist()
        hashed = [fnv1a64(i) % int(s) for i, s in zip(ids, self.size[self.code[groups]].tolist())]
        start = (np.array(hashed, np.int64)[of_row] + step) % size
        window = np.minimum(m + self.excluded[self.owner[group]], size)  # holds m free places, or the whole pool
        row, t = ragged(window)
        place = (start[row] + t) % size[row]
        stride = int(self.size.max()) + 1
        free = ~np.isin(self.owner[group[row]] * stride + place, self.keys)
        free_before: np.ndarray = np.cumsum(free) - free
        row_first = np.cumsum(window) - window
        taken = free & (free_before - free_before[row_first][row] < m[row])
        if int(taken.sum()) != int(count.sum()):  # the window holds them all, by its size
            raise RuntimeError("the other-question walk took another count of documents than its pool holds")
        bases = np.cumsum(self.size) - self.size
        return pa.concat_arrays(self.pools).take(pa.array(bases[code[row[taken]]] + place[taken]))


def _positions(docids: pa.Array, pool: pa.Array) -> np.ndarray:
    """Each document's position in the pool, -1 where it is not in it."""
    found = pc.fill_null(pc.index_in(docids, value_set=pool), -1)
    return found.to_numpy(zero_copy_only=False).astype(np.int64)
