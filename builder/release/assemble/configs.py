"""The configs retrieval tools read, derived from the judgments and sub-questions once those are written:

- `queries` (`_id`, `text`): the sub-questions, as BEIR and MTEB read a `queries` config beside `qrels`;
- `qrels-binary`: `qrels` with score 1 where level >= the binary threshold, else 0, for BEIR/MTEB tools that
  count any score >= 1 as relevant and take no threshold;
- `corpus-ids` (`_id`, `url_hash`, `url`): every judged document, no text (ClueWeb22's licence);
- `diversity-qrels`: TREC Web-track diversity qrels per question (query-id = qid, subtopic = the
  sub-question's 1-based position, corpus-id, score) for ndeval / ir-measures' alpha_nDCG.

Each function takes Arrow tables, so `build-release` (from the batches it routes) and the `datasets`
builder class (from the judgment shards) produce the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from generation.errors import InputError
from generation.storage.schema import arrow_schema
from generation.storage.spill import TableRuns

BATCH_ROWS = 262_144


def queries(subquestions: pa.Table) -> pa.Table:
    return pa.table({"_id": subquestions["subq_id"], "text": subquestions["text"]}, schema=arrow_schema("queries"))


def subtopics(subquestions: pa.Table) -> pa.Table:
    """subq_id -> its 1-based position among its question's sub-questions, in the subquestions table's order
    (the order of `gpt4_decomposition.subquestions`); a question's rows need not be contiguous."""
    codes = pc.dictionary_encode(subquestions["qid"].combine_chunks()).indices.to_numpy(zero_copy_only=False)
    return pa.table({"subq_id": subquestions["subq_id"], "subtopic": pa.array(subtopic_numbers(codes), pa.int32())})


def subtopic_numbers(codes: np.ndarray) -> np.ndarray:
    """Per row, its 1-based position among the rows of the same question code, in row order."""
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    index = np.arange(len(codes))
    starts = (
        np.maximum.accumulate(np.where(np.r_[True, ordered[1:] != ordered[:-1]], index, 0)) if len(codes) else index
    )
    number = np.empty(len(codes), np.int32)
    number[order] = index - starts + 1
    return number


def binary_qrels(rows: pa.Table, threshold: int) -> pa.Table:
    graded = rows.filter(pc.is_valid(rows["level"]))
    relevant = pc.cast(pc.greater_equal(graded["level"], threshold), pa.int32())
    return pa.table(
        {"query-id": graded["subq_id"], "corpus-id": graded["docid"], "score": relevant}, schema=arrow_schema("qrels")
    )


class Subtopics:
    """subq_id -> subtopic number. The sub-questions are sorted by question once, with each question's row
    range in a dict; a batch looks its sub-question ids up among the sub-questions of its own questions only,
    so no lookup table over every sub-question of the split is rebuilt per batch."""

    def __init__(self, subquestions: pa.Table):
        table = subtopics(subquestions)
        table = pa.table({"qid": subquestions["qid"], "subq_id": table["subq_id"], "subtopic": table["subtopic"]})
        self.table = table.sort_by("qid")
        qids = self.table["qid"].combine_chunks() if self.table.num_rows else pa.array([], pa.string())
        changes = pc.not_equal(qids[1:], qids[:-1]).to_numpy(zero_copy_only=False) if len(qids) > 1 else np.array([])
        starts = np.concatenate([[0], np.flatnonzero(changes) + 1]) if len(qids) else np.array([], np.int64)
        ends = np.append(starts[1:], len(qids))
        self.ranges = dict(
            zip(qids.take(pa.array(starts, pa.int64())).to_pylist(), zip(starts.tolist(), ends.tolist()))
        )

    def of(self, qids, subq_ids) -> pa.Array:
        spans = [self.ranges.get(q, (0, 0)) for q in pc.unique(qids).to_pylist()]
        rows = np.concatenate([np.arange(a, b) for a, b in spans]) if spans else np.array([], np.int64)
        candidates = self.table.take(pa.array(rows, pa.int64()))
        index = pc.index_in(subq_ids, value_set=candidates["subq_id"])
        if index.null_count:
            missing = pc.filter(subq_ids, pc.is_null(index))
            raise InputError(
                "judgments",
                0,
                f"{len(missing)} judgments of sub-questions not in the subquestions tables, e.g. {missing[0]}",
                field="subq_id",
            )
        return pc.take(candidates["subtopic"], index)


def diversity_qrels(rows: pa.Table, numbers: Subtopics) -> pa.Table:
    graded = rows.filter(pc.is_valid(rows["level"]))
    return pa.table(
        {
            "query-id": graded["qid"],
            "subtopic": numbers.of(graded["qid"], graded["subq_id"]),
            "corpus-id": graded["docid"],
            "score": pc.cast(graded["level"], pa.int32()),
            "subq_id": graded["subq_id"],
        },
        schema=arrow_schema("diversity_qrels"),
    )


def clicked_urls(questions: pa.Table) -> pa.Table:
    """url_hash -> url (`url_min`: the smallest when two records differ) of the questions' clicked documents
    (Researchy's DocStream), the only URLs a release carries."""
    clicked = pc.list_flatten(questions["clicked"])
    urls = pa.table({"url_hash": pc.struct_field(clicked, "url_hash"), "url": pc.struct_field(clicked, "url")})
    return urls.group_by("url_hash", use_threads=False).aggregate([("url", "min")])


def with_urls(docs: pa.Table, urls: pa.Table) -> pa.Table:
    """`corpus-ids` rows of (docid, url_hash) rows: the URL of a clicked document, else null."""
    url = pc.take(urls["url_min"], pc.index_in(docs["url_hash"], value_set=urls["url_hash"]))
    return pa.table({"_id": docs["docid"], "url_hash": docs["url_hash"], "url": url}, schema=arrow_schema("corpus_ids"))


class CorpusIds:
    """The distinct judged documents of a split, in docid order. Each batch's distinct (docid, url_hash) rows go
    to sorted runs that spill to disk past a fixed number of rows (generation/storage/spill.py), so memory stays
    flat however many documents are judged; a document's first row wins (its url_hash is the same in every row)."""

    def __init__(self, questions: pa.Table, memory: int | None = None):
        self.urls = clicked_urls(questions)
        self.runs = TableRuns("docid", **({"memory": memory} if memory else {}))

    def add(self, rows: pa.Table) -> None:
        self.runs.add(self._distinct(rows.select(["docid", "url_hash"])))

    @staticmethod
    def _distinct(table: pa.Table) -> pa.Table:
        """The first row of each docid, in the batch's order."""
        codes = pc.dictionary_encode(table["docid"].combine_chunks()).indices.to_numpy(zero_copy_only=False)
        _, first = np.unique(codes, return_index=True)
        return table.take(pa.array(np.sort(first)))

    def tables(self) -> Iterator[pa.Table]:
        """`corpus-ids` rows in docid order, a chunk at a time."""
        for docs in self.runs.merged():
            yield with_urls(docs, self.urls)
