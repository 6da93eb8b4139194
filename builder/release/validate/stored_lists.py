"""`questions.retrieved_unjudged` as `validate` reads it: per question, the documents its runs retrieved that no
judgment covers, hardest first (rerank rank, then BM25 rank, a missing rank last, then docid), at most
`training.retrieved_kept` (builder/release/assemble/retrieved.py states the rule). Each list is checked on its own
here as it is read; the docids are kept end to end in one Arrow array, a question's place in it by qid, for the
re-derivation of the `retrieved_unjudged` negatives (training_reference.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

LAST = float("inf")


def hardness(entry: dict) -> tuple:
    """A retrieved document's place in hardest-first order: rerank rank, BM25 rank (a missing one last), docid."""
    rerank, bm25 = entry["rerank_rank"], entry["bm25_rank"]
    return (LAST if rerank is None else rerank, LAST if bm25 is None else bm25, entry["docid"])


class StoredLists:
    """The retrieved-unjudged lists of every split's questions table, added batch by batch (`add`)."""

    def __init__(self, kept: int):
        self.kept = kept
        self.span: dict[str, tuple[int, int]] = {}  # qid -> (start, stop) in `docids`, its first row counting
        self.parts: list[pa.Array] = []
        self.size = 0
        self.present = False  # some question has a list (null lists: a release built without runs)
        self.wrong: dict[str, str] = {}  # kind -> the first question's finding

    def add(self, questions: pa.Table) -> None:
        column = questions["retrieved_unjudged"].combine_chunks()
        self.present = self.present or column.null_count < len(column)
        for qid, entries in zip(questions["qid"].to_pylist(), column.to_pylist()):
            entries = entries or []
            self._check(qid, entries)
            self.span.setdefault(qid, (self.size, self.size + len(entries)))
            self.size += len(entries)
        self.parts.append(pc.struct_field(pc.list_flatten(column), "docid"))

    def _check(self, qid: str, entries: list[dict]) -> None:
        keys = [hardness(e) for e in entries]
        if any(a > b for a, b in zip(keys, keys[1:])):
            self.wrong.setdefault("order", f"qid {qid}: not hardest first")
        docids = [e["docid"] for e in entries]
        if len(set(docids)) < len(docids):
            twice = next(d for d in docids if docids.count(d) > 1)
            self.wrong.setdefault("twice", f"qid {qid}: {twice} twice")
        if len(entries) > self.kept:
            self.wrong.setdefault("long", f"qid {qid}: {len(entries)} documents, more than {self.kept}")

    def closed(self) -> StoredLists:
        self.docids = pa.concat_arrays(self.parts) if self.parts else pa.array([], pa.string())
        self.parts = []
        return self

    def spans(self, qids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per question, its list's first place in `docids` and its length (none for a question the tables lack)."""
        spans = np.array([self.span.get(q, (0, 0)) for q in qids], np.int64).reshape(-1, 2)
        return spans[:, 0], spans[:, 1] - spans[:, 0]

    def findings(self) -> list[str]:
        return list(self.wrong.values())
