"""`researchy-subq training-files`: from a release's `hard-negatives` config, its `queries` and `qrels`, and the texts
`researchy-subq texts` wrote, the files trainers read, under OUT:

- `sentence-transformers/{split}.parquet`: (anchor, positive, negative_1..k), texts only, which
  `SentenceTransformerTrainer` takes as it is (sbert.net Training Overview > Dataset Format: columns by position, every
  column but a label/score one is an input); `sentence-transformers-ids/{split}.parquet`, row for row: query_id, qid,
  positive_id, negative_ids (schema table `training_ids`), for a sampler that keeps sibling sub-questions (one qid)
  out of one batch, or for `sentence_transformers.util.resolve_ids`.
- `flagembedding/{split}.jsonl`: {"query", "pos", "neg", "pos_scores", "neg_scores"} (FlagEmbedding
  examples/finetune/embedder/README.md, "Data format"); the scores are the judged levels.
- `beir/corpus.jsonl` ({"_id", "title", "text"}), `beir/queries.jsonl` ({"_id", "text"}), `beir/qrels/{split}.tsv`
  (header query-id, corpus-id, score), as BEIR's GenericDataLoader reads them (beir/datasets/data_loader.py).
- `tevatron/corpus.jsonl` ({"docid", "text"}, looked up by `docid` in texttron/tevatron
  src/tevatron/retriever/dataset.py) and `tevatron/{split}.jsonl`: the hard-negatives rows whose documents all
  have a text (a missing docid is a KeyError there).

Texts (by docid) and levels (by sub-question and docid, from `qrels`) are looked up in SQLite files built once in
OUT (`_lookup-*.sqlite`, named by the state of their inputs), so memory stays bounded by one batch of rows. A row
whose positive or a negative the copy lacks is left out of every file and counted; BEIR qrels keep every judgment.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from builder.release.layout import SPLITS, config
from builder.release.no_text import TEXTS_MARKER, refuse_release_target
from builder.training.texts import release_context_words, text_files
from generation.errors import ArgumentError, InputError
from generation.schema import arrow_schema, n_tuple_schema
from generation.storage import COMPRESSION, commit, prepare_output_folder, tmp_path, write_text_atomic

BATCH_ROWS = 2_000
SQL_VARIABLES = 500  # ids per `IN (...)` query, well under SQLite's limit on host parameters


@dataclass
class TrainingFilesSummary:
    out: Path
    negatives: int = 0
    rows: Counter = field(default_factory=Counter)  # per split, written
    left_out: Counter = field(default_factory=Counter)  # per split, a document without text
    corpus: int = 0
    queries: int = 0
    formats: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        splits = ", ".join(
            f"{s}: {self.rows[s]:,} rows ({self.left_out[s]:,} left out: a document your copy lacks)" for s in self.rows
        )
        return [
            f"{splits}; {self.negatives} negatives a row; corpus {self.corpus:,} documents, {self.queries:,} "
            f"queries -> {self.out}",
            *(f"  {self.out / f}" for f in self.formats),
            *([f"  {self.out / 'sentence-transformers-ids'}"] if "sentence-transformers" in self.formats else []),
        ]


def texts_folder_for(release: Path, texts: Path) -> list[Path]:
    marker = Path(texts) / TEXTS_MARKER
    if not marker.is_file():
        raise ArgumentError(f"--texts {texts}: not a folder `researchy-subq texts` wrote (no {TEXTS_MARKER})")
    made_for = json.loads(marker.read_text(encoding="utf-8")).get("profile_hash")
    _, manifest = release_context_words(release)
    if made_for != manifest.get("profile_hash"):
        raise ArgumentError(
            f"--texts {texts}: written for a release of profile {made_for}, {release} is of "
            f"{manifest.get('profile_hash')}; run `researchy-subq texts` for this release"
        )
    return text_files(texts)


def files_key(files: list[Path], *extra) -> str:
    """A short name for the state of `files` (paths, sizes, modification times), so a lookup built from other
    inputs is never reused."""
    state = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    return hashlib.sha256(json.dumps([state, *extra]).encode()).hexdigest()[:12]


def sqlite_lookup(path: Path, create: str, rows: Iterator[list[tuple]]) -> sqlite3.Connection:
    """An SQLite table built once at `path` from batches of `rows` (complete only once renamed into place)."""
    if not path.exists():
        tmp = tmp_path(path)
        db = sqlite3.connect(tmp)
        with db:
            db.execute(create)
            table = create.split()[2]
            for batch in filter(None, rows):
                db.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({','.join('?' * len(batch[0]))})", batch)
        db.close()
        commit(tmp, path)
    return sqlite3.connect(path)


def build_lookup(shards: list[Path], out: Path, whole: bool) -> sqlite3.Connection:
    """docid -> text (the judge's cut, or whole), read with `lookup` (the recipe uses both)."""
    column = "full_text" if whole else "text"
    rows = (
        list(zip(*(c.to_pylist() for c in batch.columns)))
        for shard in shards
        for batch in pq.ParquetFile(shard).iter_batches(batch_size=BATCH_ROWS, columns=["docid", column])
    )
    return sqlite_lookup(
        out / f"_lookup-{column}-{files_key(shards)}.sqlite",
        "CREATE TABLE texts (docid TEXT PRIMARY KEY, text TEXT NOT NULL) WITHOUT ROWID",
        rows,
    )


def level_lookup(release: Path, splits: list[str], out: Path) -> sqlite3.Connection:
    """(subq_id, docid) -> level, from the release's qrels config (the graded judgments)."""
    files = [p for split in splits for p in config("qrels").files(release, split)]
    rows = (
        list(zip(*(c.to_pylist() for c in batch.columns)))
        for path in files
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS * 50)
    )
    return sqlite_lookup(
        out / f"_lookup-levels-{files_key(files)}.sqlite",
        "CREATE TABLE levels (query_id TEXT, docid TEXT, level INTEGER NOT NULL, "
        "PRIMARY KEY (query_id, docid)) WITHOUT ROWID",
        rows,
    )


def select_in(db: sqlite3.Connection, query: str, keys: list[str]) -> list[tuple]:
    """The rows of `query` (ending in `IN`) for every key, `SQL_VARIABLES` keys a statement."""
    unique, found = sorted(set(keys)), []
    for start in range(0, len(unique), SQL_VARIABLES):
        part = unique[start : start + SQL_VARIABLES]
        found.extend(db.execute(f"{query} ({','.join('?' * len(part))})", part))
    return found


def lookup(db: sqlite3.Connection, docids: list[str]) -> dict[str, str]:
    """The texts of `docids` that `build_lookup`'s table holds."""
    return dict(select_in(db, "SELECT docid, text FROM texts WHERE docid IN", docids))


def levels_of(db: sqlite3.Connection, query_ids: list[str]) -> dict[tuple[str, str], int]:
    return {
        (q, d): level
        for q, d, level in select_in(db, "SELECT query_id, docid, level FROM levels WHERE query_id IN", query_ids)
    }


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


def write_corpora(shards: list[Path], out: Path, whole: bool, formats: list[str]) -> int:
    """BEIR's corpus.jsonl ({"_id", "title", "text"}) and Tevatron's ({"docid", "text"}), those asked for."""
    beir = AtomicLines(out / "beir" / "corpus.jsonl") if "beir" in formats else None
    tevatron = AtomicLines(out / "tevatron" / "corpus.jsonl") if "tevatron" in formats else None
    count = 0
    for shard in shards:
        for batch in pq.ParquetFile(shard).iter_batches(
            batch_size=BATCH_ROWS, columns=["docid", "full_text" if whole else "text"]
        ):
            for docid, text in zip(*(c.to_pylist() for c in batch.columns)):
                if beir:
                    beir.json({"_id": docid, "title": "", "text": text})
                if tevatron:
                    tevatron.json({"docid": docid, "text": text})
                count += 1
    for lines in (beir, tevatron):
        if lines:
            lines.close()
    return count


def write_queries_and_qrels(release: Path, out: Path, splits: list[str]) -> int:
    queries, count = AtomicLines(out / "beir" / "queries.jsonl"), 0
    for split in splits:
        for path in config("queries").files(release, split):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS * 10):
                for qid, text in zip(batch["_id"].to_pylist(), batch["text"].to_pylist()):
                    queries.json({"_id": qid, "text": text})
                    count += 1
        qrels = AtomicLines(out / "beir" / "qrels" / f"{split}.tsv")
        qrels.file.write("query-id\tcorpus-id\tscore\n")  # GenericDataLoader skips the header line
        for path in config("qrels").files(release, split):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS * 10):
                qrels.file.writelines(
                    f"{q}\t{d}\t{s}\n"
                    for q, d, s in zip(
                        batch["query-id"].to_pylist(), batch["corpus-id"].to_pylist(), batch["score"].to_pylist()
                    )
                )
        qrels.close()
    queries.close()
    return count


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

    def write(self, kept: list[tuple[dict, str, list[str]]], texts: dict[str, str], levels: dict) -> None:
        texts_table = pa.table(
            [
                [row["query_text"] for row, _, _ in kept],
                [texts[p] for _, p, _ in kept],
                *([texts[negs[i]] for _, _, negs in kept] for i in range(self.negatives)),
            ],
            schema=self.schemas[0],
        )
        ids_table = pa.table(
            [
                [row["query_id"] for row, _, _ in kept],
                [row["qid"] for row, _, _ in kept],
                [p for _, p, _ in kept],
                [negs for _, _, negs in kept],
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
    def __init__(self, out: Path, split: str, negatives: int):
        super().__init__(out / "flagembedding" / f"{split}.jsonl")

    def write(self, kept: list[tuple[dict, str, list[str]]], texts: dict[str, str], levels: dict) -> None:
        for row, positive, negs in kept:
            self.json(
                {
                    "query": row["query_text"],
                    "pos": [texts[positive]],
                    "neg": [texts[d] for d in negs],
                    "pos_scores": [levels[(row["query_id"], positive)]],
                    "neg_scores": [levels[(row["query_id"], d)] for d in negs],
                }
            )


class TevatronRows(AtomicLines):
    def __init__(self, out: Path, split: str, negatives: int):
        super().__init__(out / "tevatron" / f"{split}.jsonl")

    def write(self, kept: list[tuple[dict, str, list[str]]], texts: dict[str, str], levels: dict) -> None:
        for row, positive, negs in kept:
            self.json(
                {
                    "query_id": row["query_id"],
                    "query_text": row["query_text"],
                    "positive_document_ids": [positive],
                    "negative_document_ids": negs,
                    "qid": row["qid"],
                }
            )


# what each format writes per split from the hard-negatives rows (BEIR needs none: its files are corpus and qrels)
ROW_WRITERS = {"sentence-transformers": NTupleWriters, "flagembedding": FlagEmbeddingLines, "tevatron": TevatronRows}
FORMATS = ("sentence-transformers", "flagembedding", "beir", "tevatron")


def write_split(
    release: Path,
    split: str,
    lookups: tuple[sqlite3.Connection, sqlite3.Connection],
    out: Path,
    negatives: int,
    formats: tuple[str, ...],
    summary: TrainingFilesSummary,
    progress=None,
) -> None:
    texts_db, levels_db = lookups
    writers = [ROW_WRITERS[f](out, split, negatives) for f in formats if f in ROW_WRITERS]
    for path in config("hard-negatives").files(release, split):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
            rows = batch.to_pylist()
            texts = lookup(texts_db, [d for r in rows for d in r["positive_document_ids"] + r["negative_document_ids"]])
            levels = levels_of(levels_db, [r["query_id"] for r in rows])
            kept = []
            for row in rows:
                positive, negs = row["positive_document_ids"][0], row["negative_document_ids"][:negatives]
                if len(negs) < negatives:
                    raise InputError(
                        path,
                        0,
                        f"a row has {len(negs)} negatives, fewer than the {negatives} asked",
                        record_id=row["query_id"],
                    )
                if all(d in texts for d in [positive, *negs]):
                    kept.append((row, positive, negs))
            for writer in writers:
                writer.write(kept, texts, levels)
            summary.rows[split] += len(kept)
            summary.left_out[split] += len(rows) - len(kept)
            if progress is not None:
                progress(len(rows))
    for writer in writers:
        writer.close()


def release_negatives(release: Path, splits: list[str]) -> int:
    for split in splits:
        for path in config("hard-negatives").files(release, split):
            first = (
                pq.ParquetFile(path).read_row_group(0, columns=["negative_document_ids"])
                if pq.ParquetFile(path).metadata.num_row_groups
                else None
            )
            if first is not None and first.num_rows:
                return len(first["negative_document_ids"][0].as_py())
    raise InputError(
        release,
        0,
        "no hard-negatives rows: a release built before the training configs, "
        "or one without positives; rebuild it with `researchy-subq build-release`",
    )


def write_training_files(
    release: Path,
    texts: Path,
    out: Path,
    whole: bool = False,
    negatives: int | None = None,
    formats: tuple[str, ...] = FORMATS,
    progress=None,
) -> TrainingFilesSummary:
    release, out = Path(release), Path(out)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise ArgumentError(f"--format {', '.join(unknown) or '(none)'}: choose from {', '.join(FORMATS)}")
    refuse_release_target(out, release)
    prepare_output_folder(out)
    shards = texts_folder_for(release, texts)
    splits = [s for s in SPLITS if config("hard-negatives").files(release, s)]
    k = release_negatives(release, splits)
    if negatives is not None and negatives > k:
        raise ArgumentError(f"--negatives {negatives}: the release's hard-negatives rows have {k}")
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(
        out / TEXTS_MARKER,
        json.dumps(
            {
                "what": "training files holding document texts from a licensed copy: never publish",
                "texts": str(texts),
                "whole": whole,
            }
        )
        + "\n",
    )
    summary = TrainingFilesSummary(out, negatives or k)
    lookups = (build_lookup(shards, out, whole), level_lookup(release, splits, out))
    try:
        for split in splits:
            write_split(release, split, lookups, out, summary.negatives, formats, summary, progress)
    finally:
        for db in lookups:
            db.close()
    summary.corpus = write_corpora(shards, out, whole, [f for f in ("beir", "tevatron") if f in formats])
    if "beir" in formats:
        summary.queries = write_queries_and_qrels(release, out, splits)
    summary.formats = formats
    return summary
