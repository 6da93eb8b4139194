"""`validate`'s own derivation of `graded-lists` and `hard-negatives`, written from the rule as
builder/release/assemble/training_configs.py and hard_negatives.py state it, per question in plain Python. The build
derives the same rows in numpy over chunks of many questions; the two share only the rule's names and hashes
(builder/release/training_rule.py), so a bug in one derivation is not made in the other.

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
questions of the output order (temporary Parquet files, about BUCKET_ROWS judgments each, by question count), then
derived bucket by bucket: rows come out in output order, and one bucket's judgments are Python objects at a time.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.training_rule import (
    COLUMNS,
    CONFIGS,
    FNV_OFFSET,
    FNV_PRIME,
    OTHER_QUESTIONS,
    SAMPLE_SALT,
    SOURCES,
    sha_numbers,
)
from builder.release.validate.stored_lists import LAST, StoredLists
from generation.schema import arrow_schema

BUCKET_ROWS = 250_000  # judgments a bucket holds, about: as Python objects, a few hundred bytes each
SPILLED = ["position", "serial", *COLUMNS]  # serial: arrival order, the last tie-break of a graded list
POSITION, SERIAL, DOCID, LEVEL, BM25, RERANK, EXPECTED, PROBS = range(len(SPILLED))


def fnv1a64(text: str) -> int:
    """FNV-1a, 64-bit, of the string's UTF-8 bytes, a byte at a time (Fowler, Noll, Vo)."""
    value = int(FNV_OFFSET)
    for byte in text.encode():
        value = ((value ^ byte) * int(FNV_PRIME)) % 2**64
    return value


def graded_order(judgment: tuple) -> tuple:
    rerank, bm25 = judgment[RERANK], judgment[BM25]
    return (
        -judgment[LEVEL],
        LAST if rerank is None else rerank,
        LAST if bm25 is None else bm25,
        judgment[DOCID],
        judgment[SERIAL],
    )


def rotation(candidates: list[str], i: int, m: int) -> list[str]:
    n = len(candidates)
    return [candidates[x] for x in sorted({(i * m + j) % n for j in range(min(m, n))})] if n else []


def walk(pool: list[str], start: int, m: int, excluded: set[str]) -> list[str]:
    taken: list[str] = []
    for step in range(len(pool)):
        if len(taken) == m:
            break
        docid = pool[(start + step) % len(pool)]
        if docid not in excluded:
            taken.append(docid)
    return taken


@dataclass
class ReferenceCounts:
    rows: Counter = field(default_factory=Counter)  # (config, split code) -> rows
    positives: int = 0
    short_positives: int = 0
    by_source: Counter = field(default_factory=Counter)

    def record(self) -> dict:
        return {
            "positives": self.positives,
            "short_positives": self.short_positives,
            "negatives_by_source": {s: self.by_source[s] for s in SOURCES},
        }


class TrainingReference:
    """Judgments added in any order (`add`, with their sub-questions' positions), then `tables()`: per bucket, the
    (split code, config, rows) the rule gives, in output order."""

    def __init__(self, subquestions: pa.Table, subq_split: np.ndarray, answer_level: int, training, judgments: int):
        self.ids, self.qids = subquestions["subq_id"].to_pylist(), subquestions["qid"].to_pylist()
        self.texts = subquestions["text"]
        self.split = subq_split.tolist()
        self.answer_level, self.training = answer_level, training
        members: dict[str, list[int]] = {}
        for position, qid in enumerate(self.qids):
            members.setdefault(qid, []).append(position)
        self.questions, self.members = list(members), list(members.values())  # in output order
        rank = {qid: r for r, qid in enumerate(self.questions)}
        self.buckets = max(1, -(-judgments // BUCKET_ROWS))
        self.bucket_of_rank = np.arange(len(self.questions)) * self.buckets // max(len(self.questions), 1)
        self.bucket_of = self.bucket_of_rank[[rank[q] for q in self.qids]] if self.qids else np.zeros(0, np.int64)
        self.sampled = self._sampled()
        self.pool_pairs: dict[int, set[tuple[str, str]]] = {}
        self.folder = tempfile.TemporaryDirectory(prefix="validate-training-")
        self.writers: dict[int, pq.ParquetWriter] = {}
        self.serial = 0
        self.counts = ReferenceCounts()
        self.listed_judged: list[tuple[str, str]] = []  # (qid, docid) a stored list holds though a judgment covers it

    def _sampled(self) -> np.ndarray:
        """Per position, whether its question is one of its split's sampled questions."""
        chosen = set()
        for code in set(self.split):
            qids = sorted({q for q, s in zip(self.qids, self.split) if s == code})
            if len(qids) > OTHER_QUESTIONS:
                numbers = sha_numbers(qids, SAMPLE_SALT).tolist()
                qids = [q for _, q in sorted(zip(numbers, qids))[:OTHER_QUESTIONS]]
            chosen |= {(code, q) for q in qids}
        return np.array([(s, q) in chosen for q, s in zip(self.qids, self.split)], bool)

    def add(self, table: pa.Table, position: np.ndarray) -> None:
        serial = np.arange(self.serial, self.serial + table.num_rows, dtype=np.int64)
        self.serial += table.num_rows
        graded = pc.is_valid(table["level"]).to_numpy(zero_copy_only=False)
        if not graded.any():
            return
        table = pa.table(
            {"position": pa.array(position[graded]), "serial": pa.array(serial[graded]),
             **{c: table[c].filter(pa.array(graded)) for c in COLUMNS}}
        )  # fmt: skip
        position = position[graded]
        self._gather_pool(table, position)
        bucket = self.bucket_of[position]
        order = np.argsort(bucket, kind="stable")
        table, bucket = table.take(pa.array(order)), bucket[order]
        cuts = np.r_[0, np.flatnonzero(np.diff(bucket)) + 1, len(bucket)]
        for start, stop in zip(cuts[:-1], cuts[1:]):
            b = int(bucket[start])
            if b not in self.writers:
                self.writers[b] = pq.ParquetWriter(self._path(b), table.schema)
            self.writers[b].write_table(table.slice(start, stop - start))

    def _path(self, bucket: int) -> Path:
        return Path(self.folder.name) / f"bucket-{bucket:05d}.parquet"

    def _gather_pool(self, table: pa.Table, position: np.ndarray) -> None:
        level = table["level"].to_numpy(zero_copy_only=False)
        low = self.sampled[position] & (level <= self.training.negative_level)
        for docid, p in zip(table["docid"].filter(pa.array(low)).to_pylist(), position[low].tolist()):
            self.pool_pairs.setdefault(self.split[p], set()).add((docid, self.qids[p]))

    def _pools(self) -> dict[int, list[str]]:
        pools = {}
        for code, pairs in self.pool_pairs.items():
            qids = sorted({q for _, q in pairs})
            number = dict(zip(qids, sha_numbers(qids, SAMPLE_SALT).tolist()))
            ordered = sorted(pairs, key=lambda pair: (number[pair[1]], pair[0]))
            pools[code] = list(dict.fromkeys(docid for docid, _ in ordered))
        return pools

    def tables(self, listed: StoredLists) -> Iterator[tuple[int, str, pa.Table]]:
        for writer in self.writers.values():
            writer.close()
        pools = self._pools()
        schemas = {name: arrow_schema(table) for name, table in CONFIGS.items()}
        try:
            for b in range(self.buckets):
                judged = self._judgments_of(b)
                out: dict[tuple[int, str], list[dict]] = {}
                ranks = np.flatnonzero(self.bucket_of_rank == b)
                for rank in ranks.tolist():
                    self._question(rank, judged, listed, pools, out)
                for (code, name), records in out.items():
                    self.counts.rows[(name, code)] += len(records)
                    yield code, name, pa.Table.from_pylist(records, schema=schemas[name])
        finally:
            self.folder.cleanup()

    def _judgments_of(self, bucket: int) -> dict[int, list[tuple]]:
        """Per position, its graded judgments in the bucket as (SPILLED) tuples."""
        if bucket not in self.writers:
            return {}
        table = pq.read_table(self._path(bucket))
        judged: dict[int, list[tuple]] = {}
        for judgment in zip(*(table[c].to_pylist() for c in SPILLED)):
            judged.setdefault(judgment[POSITION], []).append(judgment)
        return judged

    def _question(self, rank: int, judged: dict, listed: StoredLists, pools: dict, out: dict) -> None:
        qid = self.questions[rank]
        positions = [p for p in self.members[rank] if p in judged]
        if not positions:
            return
        lists = {p: sorted(judged[p], key=graded_order) for p in positions}
        graded: dict[int, set[str]] = {}
        for p in positions:
            graded.setdefault(self.split[p], set()).update(j[DOCID] for j in lists[p])
        retrieved = listed.of(qid)
        every = set().union(*graded.values())
        self.listed_judged += [(qid, d) for d in retrieved if d in every]
        for p in positions:
            code = self.split[p]
            out.setdefault((code, "graded-lists"), []).append(self._graded_list(p, lists[p]))
            excluded = graded[code] | set(retrieved)
            rows = self._hard_negatives(p, lists[p], retrieved, pools.get(code, []), excluded)
            out.setdefault((code, "hard-negatives"), []).extend(rows)

    def _graded_list(self, p: int, judgments: list[tuple]) -> dict:
        expected, probs = [j[EXPECTED] for j in judgments], [j[PROBS] for j in judgments]
        return {
            "query_id": self.ids[p],
            "qid": self.qids[p],
            "docids": [j[DOCID] for j in judgments],
            "labels": [j[LEVEL] for j in judgments],
            # a list is null where the judge gave none for any of its documents (generate mode)
            "expected": expected if any(e is not None for e in expected) else None,
            "probs": probs if any(x is not None for x in probs) else None,
        }

    def _hard_negatives(
        self, p: int, judgments: list[tuple], retrieved: list[str], pool: list[str], excluded: set[str]
    ) -> list[dict]:
        k, rows = self.training.negatives, []
        low = [j[DOCID] for j in judgments if j[LEVEL] <= self.training.negative_level]
        positives = [j[DOCID] for j in judgments if j[LEVEL] >= self.answer_level]
        start = fnv1a64(self.ids[p]) if positives else 0
        for i, positive in enumerate(positives):
            taken: list[tuple[str, str]] = []
            for source in self.training.fill_order:
                m = k - len(taken)
                if m == 0:
                    break
                if source == "judged":
                    found = rotation(low, i, m)
                elif source == "retrieved_unjudged":
                    found = rotation(retrieved, i, m)
                else:
                    found = walk(pool, (start + i * m) % len(pool), m, excluded) if pool else []
                taken += [(docid, source) for docid in found]
            self.counts.positives += 1
            if len(taken) < k:
                self.counts.short_positives += 1
                continue
            self.counts.by_source.update(source for _, source in taken)
            rows.append(
                {
                    "query_id": self.ids[p],
                    "query_text": self.texts[p].as_py(),
                    "positive_document_ids": [positive],
                    "negative_document_ids": [d for d, _ in taken],
                    "negative_sources": [s for _, s in taken],
                    "qid": self.qids[p],
                }
            )
        return rows
