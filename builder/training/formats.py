"""The per-row files `training-files` writes (builder/training/files.py): sentence-transformers' n-tuples and their
id sidecar, FlagEmbedding lines, Tevatron rows; and the atomic JSON-lines writer they and the corpora share."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from generation.storage.atomic_files import COMPRESSION, commit, tmp_path
from generation.storage.schema import arrow_schema, n_tuple_schema


class AtomicLines:
    """A JSON-lines (or TSV) file that appears under its name only once complete."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp_path(path)
        self.file = open(self.tmp, "w", encoding="utf-8")

    def json(self, record: dict) -> None:
        self.file.write(json.dumps(record, ensure_ascii=False) + "\n")

    def close(self) -> None:
        self.file.close()
        commit(self.tmp, self.path)


@dataclass(frozen=True)
class TrainingRow:
    """One hard-negatives row as the writers see it."""

    query_id: str
    query_text: str
    qid: str
    positive: str
    negatives: list[str]
    sources: list[str]


class NTupleWriters:
    """The sentence-transformers dataset of a split and its id sidecar, row for row, renamed into place together."""

    def __init__(self, out: Path, split: str, negatives: int):
        self.negatives = negatives
        self.schemas = (n_tuple_schema(negatives), arrow_schema("training_ids"))
        self.paths = (
            out / "sentence-transformers" / f"{split}.parquet",
            out / "sentence-transformers-ids" / f"{split}.parquet",
        )
        self.tmps = tuple(tmp_path(p) for p in self.paths)
        for path in self.paths:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.writers = tuple(pq.ParquetWriter(t, s, compression=COMPRESSION) for t, s in zip(self.tmps, self.schemas))

    def write(self, kept: list[TrainingRow], texts: dict[str, str], levels: dict) -> None:
        texts_table = pa.table(
            [
                [r.query_text for r in kept],
                [texts[r.positive] for r in kept],
                *([texts[r.negatives[i]] for r in kept] for i in range(self.negatives)),
            ],
            schema=self.schemas[0],
        )
        ids_table = pa.table(
            [
                [r.query_id for r in kept],
                [r.qid for r in kept],
                [r.positive for r in kept],
                [r.negatives for r in kept],
                [r.sources for r in kept],
            ],
            schema=self.schemas[1],
        )
        for writer, table in zip(self.writers, (texts_table, ids_table)):
            writer.write_table(table)

    def close(self) -> None:
        for writer, tmp, path in zip(self.writers, self.tmps, self.paths):
            writer.close()
            commit(tmp, path)


class FlagEmbeddingLines(AtomicLines):
    """FlagEmbedding's lines; `pos_scores`/`neg_scores` (the judged levels, for --knowledge_distillation) only on
    rows whose negatives were all judged for the sub-question: an unjudged document has no level to give."""

    def __init__(self, out: Path, split: str, negatives: int):
        super().__init__(out / "flagembedding" / f"{split}.jsonl")

    def write(self, kept: list[TrainingRow], texts: dict[str, str], levels: dict) -> None:
        for r in kept:
            line = {"query": r.query_text, "pos": [texts[r.positive]], "neg": [texts[d] for d in r.negatives]}
            if all(source == "judged" for source in r.sources):
                line["pos_scores"] = [levels[(r.query_id, r.positive)]]
                line["neg_scores"] = [levels[(r.query_id, d)] for d in r.negatives]
            self.json(line)


class TevatronRows(AtomicLines):
    def __init__(self, out: Path, split: str, negatives: int):
        super().__init__(out / "tevatron" / f"{split}.jsonl")

    def write(self, kept: list[TrainingRow], texts: dict[str, str], levels: dict) -> None:
        for r in kept:
            self.json(
                {
                    "query_id": r.query_id,
                    "query_text": r.query_text,
                    "positive_document_ids": [r.positive],
                    "negative_document_ids": r.negatives,
                    "negative_sources": r.sources,
                    "qid": r.qid,
                }
            )


class RowWriter(Protocol):
    """One format's files of a split: rows written a batch at a time, then committed by `close`."""

    def write(self, kept: list[TrainingRow], texts: dict[str, str], levels: dict[tuple[str, str], int]) -> None: ...

    def close(self) -> None: ...


# what each format writes per split from the hard-negatives rows (BEIR needs none: its files are corpus and qrels)
ROW_WRITERS: dict[str, Callable[[Path, str, int], RowWriter]] = {
    "sentence-transformers": NTupleWriters,
    "flagembedding": FlagEmbeddingLines,
    "tevatron": TevatronRows,
}
FORMATS = ("sentence-transformers", "flagembedding", "beir", "tevatron")
