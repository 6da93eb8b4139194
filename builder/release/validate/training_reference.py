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

BUCKET_ROWS = 100_000  # judgments a bucket holds, about: as Python objects, a few hundred bytes each
SLICE = 262_144  # sub-question ids turned into Python strings at a time
SPILLED = ["position", *COLUMNS]  # a bucket's rows keep their arrival order: a graded list's last tie-break
POSITION, DOCID, LEVEL, BM25, RERANK, EXPECTED, PROBS = range(len(SPILLED))
FIELDS = {  # a derived row's values, in the config's columns' order (generation/schema.py)
    "graded-lists": ("query_id", "qid", "docids", "labels", "expected", "probs"),
    "hard-negatives": (
        "query_id", "query_text", "positive_document_ids", "negative_document_ids", "negative_sources", "qid"
    ),
}  # fmt: skip


def fnv1a64(text: str) -> int:
    """FNV-1a, 64-bit, of the string's UTF-8 bytes, a byte at a time (Fowler, Noll, Vo)."""
    value = int(FNV_OFFSET)
    for byte in text.encode():
        value = ((value ^ byte) * int(FNV_PRIME)) % 2**64
    return value


def graded_order(judgment: tuple) -> tuple:
    """Level descending, rerank rank, BM25 rank (a missing rank last), docid; `sorted` is stable, so arrival order
    breaks what is left."""
    rerank, bm25 = judgment[RERANK], judgment[BM25]
    return (
        -judgment[LEVEL],
        LAST if rerank is None else rerank,
        LAST if bm25 is None else bm25,
        judgment[DOCID],
    )


def rotation(candidates: list[str], i: int, m: int) -> list[str]:
    """(i*m + j) mod n for j < min(m, n), in candidate order: a run of the list from (i*m) mod n, wrapping round."""
    n = len(candidates)
    if not n:
        return []
    start, count = (i * m) % n, min(m, n)
    wrapped = start + count - n
    return candidates[:wrapped] + candidates[start:] if wrapped > 0 else candidates[start : start + count]


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
    positives: int = 0
    short_positives: int = 0
    by_source: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))

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
        self.ids, self.texts = subquestions["subq_id"], subquestions["text"]
        self.split: np.ndarray = subq_split.astype(np.int64)
        self.answer_level, self.training = answer_level, training
        self.questions, self.rank_of = _questions_in_order(subquestions["qid"])
        self.buckets = max(1, -(-judgments // BUCKET_ROWS))
        self.bucket_of: np.ndarray = self.rank_of * self.buckets // max(len(self.questions), 1)
        self.sampled = self._sampled()
        self.pool_pairs: dict[int, set[tuple[str, str]]] = {}
        self.folder = tempfile.TemporaryDirectory(prefix="validate-training-")
        self.writers: dict[int, pq.ParquetWriter] = {}
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
        graded = pc.is_valid(table["level"]).to_numpy(zero_copy_only=False)
        if not graded.any():
            return
        table = pa.table(
            {"position": pa.array(position[graded]), **{c: table[c].filter(pa.array(graded)) for c in COLUMNS}}
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
            self.pool_pairs.setdefault(int(self.split[p]), set()).add((docid, self.questions[self.rank_of[p]]))

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
                out: dict[tuple[int, str], list[tuple]] = {}
                judged = self._judgments_of(b)
                for rank, positions in self._questions_of(b).items():
                    self._question(rank, positions, judged, listed, pools, out)
                judged = {}  # let go before the stored rows are read beside these
                for (code, name), records in out.items():
                    yield code, name, as_table(records, schemas[name], FIELDS[name])
        finally:
            self.folder.cleanup()

    def _questions_of(self, bucket: int) -> dict[int, list[int]]:
        """The bucket's questions in output order (rank), each with its sub-questions' positions in table order."""
        positions = np.flatnonzero(self.bucket_of == bucket)
        members: dict[int, list[int]] = {}
        for rank, p in zip(self.rank_of[positions].tolist(), positions.tolist()):
            members.setdefault(rank, []).append(p)
        return dict(sorted(members.items()))

    def _judgments_of(self, bucket: int) -> dict[int, list[tuple]]:
        """Per position, its graded judgments in the bucket as (SPILLED) tuples."""
        if bucket not in self.writers:
            return {}
        table = pq.read_table(self._path(bucket))
        judged: dict[int, list[tuple]] = {}
        for judgment in zip(*(table[c].to_pylist() for c in SPILLED)):
            judged.setdefault(judgment[POSITION], []).append(judgment)
        return judged

    def _question(
        self, rank: int, members: list[int], judged: dict, listed: StoredLists, pools: dict, out: dict
    ) -> None:
        qid = self.questions[rank]
        positions = [p for p in members if p in judged]
        if not positions:
            return
        lists = {p: sorted(judged[p], key=graded_order) for p in positions}
        graded: dict[int, set[str]] = {}
        for p in positions:
            graded.setdefault(int(self.split[p]), set()).update(j[DOCID] for j in lists[p])
        retrieved = listed.of(qid)
        every = set().union(*graded.values())
        self.listed_judged += [(qid, d) for d in retrieved if d in every]
        for p in positions:
            code = int(self.split[p])
            subquestion = SubQuestion(self.ids[p].as_py(), qid, self.texts[p].as_py())
            out.setdefault((code, "graded-lists"), []).append(graded_list(subquestion, lists[p]))
            excluded = graded[code] | set(retrieved)
            rows = self._hard_negatives(subquestion, lists[p], retrieved, pools.get(code, []), excluded)
            out.setdefault((code, "hard-negatives"), []).extend(rows)

    def _hard_negatives(
        self,
        subquestion: SubQuestion,
        judgments: list[tuple],
        retrieved: list[str],
        pool: list[str],
        excluded: set[str],
    ) -> list[tuple]:
        k, rows = self.training.negatives, []
        low = [j[DOCID] for j in judgments if j[LEVEL] <= self.training.negative_level]
        positives = [j[DOCID] for j in judgments if j[LEVEL] >= self.answer_level]
        start = fnv1a64(subquestion.id) if positives else 0
        by_source = self.counts.by_source
        for i, positive in enumerate(positives):
            taken: list[str] = []
            sources: list[str] = []
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
                taken += found
                sources += [source] * len(found)
            if len(taken) < k:
                self.counts.short_positives += 1
                continue
            for source in sources:
                by_source[source] += 1
            rows.append((subquestion.id, subquestion.text, [positive], taken, sources, subquestion.qid))
        self.counts.positives += len(positives)
        return rows


@dataclass(frozen=True)
class SubQuestion:
    id: str
    qid: str
    text: str


def graded_list(subquestion: SubQuestion, judgments: list[tuple]) -> tuple:
    expected, probs = [j[EXPECTED] for j in judgments], [j[PROBS] for j in judgments]
    return (
        subquestion.id,
        subquestion.qid,
        [j[DOCID] for j in judgments],
        [j[LEVEL] for j in judgments],
        # a list is null where the judge gave none for any of its documents (generate mode)
        expected if any(e is not None for e in expected) else None,
        probs if any(x is not None for x in probs) else None,
    )


def as_table(records: list[tuple], schema: pa.Schema, fields: tuple[str, ...]) -> pa.Table:
    """Rows (tuples of `fields`) as a table of the config's schema, built column by column."""
    if tuple(schema.names) != fields:
        raise ValueError(f"{schema.metadata[b'table'].decode()}: columns {schema.names}, the derivation gives {fields}")
    columns = list(zip(*records)) or [()] * len(fields)
    return pa.table([pa.array(column, f.type) for column, f in zip(columns, schema)], schema=schema)


def _questions_in_order(qids: pa.Array | pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """The questions in output order (each at its first sub-question's place), and per position its question's
    rank in that order."""
    rank: dict[str, int] = {}
    rank_of: np.ndarray = np.zeros(len(qids), np.int64)
    for start in range(0, len(qids), SLICE):
        part = qids.slice(start, SLICE).to_pylist()
        rank_of[start : start + len(part)] = [rank.setdefault(q, len(rank)) for q in part]
    return list(rank), rank_of
