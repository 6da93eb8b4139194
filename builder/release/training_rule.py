"""The training configs' rule primitives, shared by the build (assemble/training_configs.py, assemble/hard_negatives.py)
and `validate`'s own re-derivation (validate/training_reference.py): the names, the constants and the hashes the rule
is stated in. No derivation lives here: each side derives the rows by its own code path, so a bug in one is not made
twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

CONFIGS = {"hard-negatives": "hard_negatives", "graded-lists": "graded_lists"}  # config -> schema table
COLUMNS = ["docid", "level", "bm25_rank", "rerank_rank", "expected", "probs"]  # of the judgments the rule reads
TRAIN = "train"
DEV = "dev"
SOURCES = ("judged", "retrieved_unjudged", "other_question")
OTHER_QUESTIONS = 1_024  # questions per split whose documents judged <= negative_level make the other-question pool
SAMPLE_SALT = "other-question-negatives"
DEV_RULE = "sha256(f'{seed}:{qid}')[:8] as a big-endian integer / 2**64 < dev_share, train questions only"

FNV_OFFSET, FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


def dev_share_of(qids: pa.Array | pa.ChunkedArray, seed: int) -> np.ndarray:
    """Per question, sha256(f"{seed}:{qid}")'s first 8 bytes as a number in [0, 1)."""
    return np.array(
        [int.from_bytes(hashlib.sha256(f"{seed}:{q}".encode()).digest()[:8], "big") / 2**64 for q in qids.to_pylist()],
        np.float64,
    )


def dev_questions(qids: pa.Array | pa.ChunkedArray, seed: int, share: float) -> np.ndarray:
    return dev_share_of(qids, seed) < share


def sha_numbers(keys: Sequence[str], prefix: str) -> np.ndarray:
    """sha256(f"{prefix}:{key}")'s first 8 bytes as a big-endian unsigned integer, per key."""
    return np.array(
        [int.from_bytes(hashlib.sha256(f"{prefix}:{k}".encode()).digest()[:8], "big") for k in keys], np.uint64
    )


def fnv1a64(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """FNV-1a, 64-bit, of each string's UTF-8 bytes (Fowler, Noll, Vo: offset basis 0xcbf29ce484222325, prime
    0x100000001b3), one byte position at a time for every string at once."""
    strings = (strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings).cast(pa.large_string())
    offsets = np.frombuffer(strings.buffers()[1], np.int64)[strings.offset : strings.offset + len(strings) + 1]
    data = np.frombuffer(strings.buffers()[2], np.uint8) if len(strings) else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    hashes: np.ndarray = np.full(len(strings), FNV_OFFSET, np.uint64)
    with np.errstate(over="ignore"):
        for i in range(int(lengths.max()) if len(strings) else 0):
            live = np.flatnonzero(lengths > i)
            hashes[live] = (hashes[live] ^ data[starts[live] + i].astype(np.uint64)) * FNV_PRIME
    return hashes
