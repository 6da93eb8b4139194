"""Integer positions of questions and sub-questions, so that per-row work on judgments is numpy arithmetic.

Looking up a column of a record batch costs one dictionary encoding plus one probe per distinct value:
judgments are laid out sub-question by sub-question, so a 262k-row batch holds ~14k distinct
sub-questions. The ids are indexed once as sorted 64-bit hashes (8 bytes an id, not a Python string and
a hash-table slot), never once per batch as `pc.is_in(value_set=...)` does; a probe's hit is confirmed
by comparing the strings, so a hash collision can never map a value to another id.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

MISSING = -1


class IdIndex:
    """Positions of the strings of an id column, by sorted 64-bit hashes."""

    BLOCK = 262_144

    def __init__(self, ids: pa.Array | pa.ChunkedArray):
        self.ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
        hashes = np.concatenate(
            [
                pd.util.hash_array(self.ids.slice(i, self.BLOCK).to_numpy(zero_copy_only=False), categorize=False)
                for i in range(0, len(self.ids), self.BLOCK)
            ]
            or [np.zeros(0, np.uint64)]
        )
        self.order = np.argsort(hashes, kind="stable")
        self.sorted = hashes[self.order]
        self.unique = len(self.sorted) < 2 or bool((self.sorted[1:] != self.sorted[:-1]).all())
        self._fallback = None
        if not self.unique:  # equal hashes: repeated ids (or, at odds of 2^-64, a collision): look up by string
            strings = pd.Index(self.ids.to_numpy(zero_copy_only=False), dtype=object)
            self._first = np.flatnonzero(~strings.duplicated())
            self._fallback = strings[self._first]

    def __len__(self) -> int:
        return len(self.ids)

    def hashes(self) -> np.ndarray:
        """Each id's 64-bit hash by position, the hash `string_hashes` gives the same string."""
        out = np.empty(len(self.sorted), np.uint64)
        out[self.order] = self.sorted
        return out

    def get_indexer(self, values: np.ndarray | pa.Array) -> np.ndarray:
        """Position of each value, MISSING for values not in the index (first position for repeated ids)."""
        array = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
        if self._fallback is not None:
            found = self._fallback.get_indexer(array.to_numpy(zero_copy_only=False))
            return np.where(found >= 0, self._first[np.maximum(found, 0)], MISSING).astype(np.int64)
        if len(array) == 0 or len(self.sorted) == 0:
            return np.full(len(array), MISSING, np.int64)
        hashes = pd.util.hash_array(array.to_numpy(zero_copy_only=False), categorize=False)
        slot = np.minimum(np.searchsorted(self.sorted, hashes), len(self.sorted) - 1)
        found = np.where(self.sorted[slot] == hashes, self.order[slot], MISSING).astype(np.int64)
        hit = found != MISSING
        if hit.any():
            same = pc.equal(array.filter(pa.array(hit)), self.ids.take(pa.array(found[hit]))).to_numpy(
                zero_copy_only=False
            )
            found[np.flatnonzero(hit)[~same]] = MISSING
        return found


def _index(values: pa.Array | pa.ChunkedArray) -> IdIndex:
    return IdIndex(values)


def _encoded(column: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    encoded = pc.dictionary_encode(column)
    return encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded


def positions(column: pa.Array | pa.ChunkedArray, index: IdIndex) -> np.ndarray:
    """Position of each value in `index`; MISSING (-1) for values it lacks (and for nulls)."""
    encoded = _encoded(column)
    found = index.get_indexer(encoded.dictionary)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    if encoded.indices.null_count:
        codes = encoded.indices.fill_null(0).to_numpy()
        out = found[codes]
        out[encoded.indices.is_null().to_numpy(zero_copy_only=False)] = MISSING
        return out
    return found[codes] if len(found) else np.full(len(codes), MISSING, np.int64)


def string_hashes(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """64-bit hashes of strings (equal strings hash equally); collisions are for the caller to re-check."""
    return hashed_codes(column)[0]


def hashed_codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hash per row, hash per distinct value, the row's distinct-value code): `string_hashes` and the distinct
    values it found on the way."""
    encoded = _encoded(column)
    hashed = pd.util.hash_array(encoded.dictionary.to_numpy(zero_copy_only=False).astype(object), categorize=False)
    codes = encoded.indices.fill_null(0).to_numpy()
    return (hashed[codes] if len(hashed) else np.zeros(len(encoded), np.uint64)), hashed, codes


def mix(*parts: np.ndarray) -> np.ndarray:
    """One 64-bit key from several integer columns (splitmix64 finaliser over a running combination)."""
    key = np.zeros(len(parts[0]), np.uint64)
    with np.errstate(over="ignore"):
        for part in parts:
            key = (key ^ part.astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15)
            key ^= key >> np.uint64(29)
            key *= np.uint64(0xBF58476D1CE4E5B9)
            key ^= key >> np.uint64(32)
    return key


class TopicIndex:
    """Questions and sub-questions of a release (or of a build's inputs) by position."""

    def __init__(
        self,
        qids: pa.Array | pa.ChunkedArray,
        splits: list[str],
        question_splits: pa.Array | pa.ChunkedArray,
        subq_ids: pa.Array | pa.ChunkedArray,
        subq_qids: pa.Array | pa.ChunkedArray,
    ):
        self.splits = list(splits)
        self.questions = _index(qids)
        self.subquestions = _index(subq_ids)
        split_code = {s: i for i, s in enumerate(self.splits)}
        self.question_split = np.array([split_code.get(s, MISSING) for s in question_splits.to_pylist()], np.int64)
        self.subq_question = positions(subq_qids, self.questions) if len(subq_ids) else np.zeros(0, np.int64)
        known = self.subq_question[self.subq_question >= 0]
        self.subquestions_of = np.bincount(known, minlength=len(self.questions))

    def question_positions(self, column) -> np.ndarray:
        return positions(column, self.questions)

    def subquestion_positions(self, column) -> np.ndarray:
        return positions(column, self.subquestions)

    def split_of_subquestions(self) -> np.ndarray:
        """Split code of each sub-question (MISSING when its question is unknown)."""
        out = np.full(len(self.subq_question), MISSING, np.int64)
        known = self.subq_question >= 0
        out[known] = self.question_split[self.subq_question[known]]
        return out
