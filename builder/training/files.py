"""`researchy-subq training-files`: the files trainers read, under OUT, from a release and the texts `researchy-subq
texts` wrote. The hard-negatives rows are re-derived from the release's `graded-lists` (builder/release/
hard_negatives.py): its own rows by default, or another k, negative level or fill order, without a rebuild.

- `sentence-transformers/{split}.parquet`: (anchor, positive, negative_1..k), texts only, which
  `SentenceTransformerTrainer` takes as it is (sbert.net Training Overview > Dataset Format: columns by position, every
  column but a label/score one is an input); `sentence-transformers-ids/{split}.parquet`, row for row: query_id, qid,
  positive_id, negative_ids, negative_sources (schema table `training_ids`), for the kit's sampler.
- `flagembedding/{split}.jsonl`: {"query", "pos", "neg"} (FlagEmbedding examples/finetune/embedder/README.md, "Data
  format"), with "pos_scores"/"neg_scores" (the judged levels) where every negative was judged.
- `beir/corpus.jsonl` ({"_id", "title", "text"}), `beir/queries.jsonl` ({"_id", "text"}), `beir/qrels/{split}.tsv`
  (header query-id, corpus-id, score), as BEIR's GenericDataLoader reads them (beir/datasets/data_loader.py).
- `tevatron/corpus.jsonl` ({"docid", "text"}, looked up by `docid` in texttron/tevatron
  src/tevatron/retriever/dataset.py) and `tevatron/{split}.jsonl`: the rows whose documents all have a text.

Texts (by docid) and levels (from `qrels`) are looked up in SQLite files built once in OUT (`_lookup-*.sqlite`, named
by the state of their inputs, carried from one run to the next), so memory stays bounded. A row whose positive or a
negative the copy lacks is left out of every file and counted; BEIR qrels keep every judgment.

Every check and refusal comes before OUT changes: a run writes its files into a new folder beside OUT and swaps it in
whole once they are all written (generation/storage/atomic_files.py `staged_folder`); a refusal, an error or a kill
leaves an earlier run's files as they were. So OUT holds the files of one run, and nothing else: a file there that
`training-files` does not write is refused, never swept away.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from builder.release.assemble.hard_negatives import NegativeCounts, NegativeRule
from builder.release.layout import SPLITS, config
from builder.release.no_text import TEXTS_MARKER, refuse_release_target
from builder.training.formats import FORMATS, ROW_WRITERS, AtomicLines, TrainingRow
from builder.training.rows import release_rows, rule_of_release
from builder.training.texts import all_retrieved_command, missing_documents, release_context_words, text_files
from generation.errors import ArgumentError, InputError
from generation.storage.atomic_files import (
    OwnershipError,
    commit,
    files_under,
    is_temporary,
    staged_folder,
    tmp_path,
    write_text_atomic,
)

BATCH_ROWS = 2_000
SQL_VARIABLES = 500  # ids per `IN (...)` query, well under SQLite's limit on host parameters
# every file a run writes under OUT (the module docstring's list, the marker and the lookups)
OWN_FILES = re.compile(
    rf"{re.escape(TEXTS_MARKER)}|_lookup-[^/]+\.sqlite|sentence-transformers(-ids)?/[^/]+\.parquet"
    r"|(flagembedding|tevatron)/[^/]+\.jsonl|beir/(corpus|queries)\.jsonl|beir/qrels/[^/]+\.tsv"
)


@dataclass
class TrainingFilesSummary:
    out: Path
    negatives: int = 0
    rows: Counter = field(default_factory=Counter)  # per split, written
    left_out: Counter = field(default_factory=Counter)  # per split, a document without text
    # of those, a retrieved document `texts` never looked for (it ran without --all-retrieved), not one the copy lacks
    not_brought: Counter = field(default_factory=Counter)
    texts_command: str = ""  # the `texts --all-retrieved` run that brings them
    corpus: int = 0
    queries: int = 0
    formats: tuple[str, ...] = ()
    rule: NegativeRule | None = None
    counts: NegativeCounts = field(default_factory=NegativeCounts)

    def lines(self) -> list[str]:
        splits = ", ".join(f"{s}: {self.rows[s]:,} rows ({self.left_out_reasons(s)})" for s in self.rows)
        by_source = ", ".join(f"{s} {n:,}" for s, n in self.counts.negatives_by_source().items())
        rule = self.rule
        assert rule is not None  # write_training_files sets it
        corpus = (
            f"corpus {self.corpus:,} documents"
            if {"beir", "tevatron"} & set(self.formats)
            else "no corpus (only --format beir and tevatron write one)"
        )
        queries = (
            f"{self.queries:,} queries" if "beir" in self.formats else "no queries (only --format beir writes them)"
        )
        return [
            f"{splits}; {self.negatives} negatives a row; {corpus}, {queries} -> {self.out}",
            f"  rows: {self.counts.positives - self.counts.short_positives:,} of {self.counts.positives:,} positives "
            f"(negative level <= {rule.negative_level}, fill order {', '.join(rule.fill_order)}); "
            f"negatives by source: {by_source}",
            *(f"  {self.out / f}" for f in self.formats),
            *([f"  {self.out / 'sentence-transformers-ids'}"] if "sentence-transformers" in self.formats else []),
            *(
                [
                    f"  {sum(self.not_brought.values()):,} rows left out for want of texts a larger k reaches: "
                    f"`{self.texts_command}` writes them; pass that folder as --texts"
                ]
                if sum(self.not_brought.values())
                else []
            ),
        ]

    def left_out_reasons(self, split: str) -> str:
        lacks = self.left_out[split] - self.not_brought[split]
        if not self.not_brought[split]:
            return f"{lacks:,} left out: a document your copy lacks"
        return (
            f"{self.left_out[split]:,} left out: {lacks:,} for a document your copy lacks, "
            f"{self.not_brought[split]:,} for a retrieved document `texts` did not write without --all-retrieved"
        )


def texts_folder_for(release: Path, texts: Path) -> list[Path]:
    marker = Path(texts) / TEXTS_MARKER
    if not marker.is_file():
        raise ArgumentError(f"--texts {texts}: not a folder `researchy-subq texts` wrote (no {TEXTS_MARKER})")
    made_for = json.loads(marker.read_text(encoding="utf-8")).get("profile_hash")
    _, manifest = release_context_words(release)
    if made_for != manifest.profile_hash:
        raise ArgumentError(
            f"--texts {texts}: written for a release of profile {made_for}, {release} is of "
            f"{manifest.profile_hash}; run `researchy-subq texts` for this release"
        )
    return text_files(texts)


def files_key(files: list[Path], *extra) -> str:
    """A short name for the state of `files` (paths, sizes, modification times), so a lookup built from other
    inputs is never reused."""
    state = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    return hashlib.sha256(json.dumps([state, *extra]).encode()).hexdigest()[:12]


def refuse_foreign_files(out: Path) -> None:
    """Before a run replaces OUT: it holds nothing but what `training-files` writes (and a killed run's temporary
    files), and no link (`files_under`); else an OwnershipError naming the first other file."""
    if out.exists() and not out.is_dir():
        raise OwnershipError(f"--out {out}: is a file; --out takes a folder")
    foreign = [f for f in files_under(out) if not OWN_FILES.fullmatch(f) and not is_temporary(Path(f).name)]
    if foreign:
        raise OwnershipError(
            f"--out {out}: holds {foreign[0]}"
            + (f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else "")
            + ", not a file `training-files` writes; a run replaces the whole folder, so it is left untouched: move "
            "that file out, or choose a new or empty --out"
        )


def sqlite_lookup(
    path: Path, create: str, rows: Iterator[list[tuple]], earlier: Path | None = None
) -> sqlite3.Connection:
    """An SQLite table built once at `path` from batches of `rows` (complete only once renamed into place), or taken
    from the folder `earlier` (an earlier run's OUT) where it was built from the same inputs; opened read-only."""
    carried = earlier / path.name if earlier is not None else None
    if not path.exists() and carried is not None and carried.is_file():
        try:
            os.link(carried, path)  # the earlier folder keeps its file as it is
        except OSError:
            shutil.copyfile(carried, path)
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
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def build_lookup(shards: list[Path], out: Path, whole: bool, earlier: Path | None = None) -> sqlite3.Connection:
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
        earlier,
    )


def level_lookup(release: Path, splits: list[str], out: Path, earlier: Path | None = None) -> sqlite3.Connection:
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
        earlier,
    )


def select_in(db: sqlite3.Connection, query: str, keys: list[str]) -> list[tuple]:
    """The rows of `query` (ending in `IN`) for every key, `SQL_VARIABLES` keys a statement."""
    unique = sorted(set(keys))
    found: list[tuple] = []
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


def write_split(
    release: Path,
    split: str,
    lookups: tuple[sqlite3.Connection, sqlite3.Connection],
    out: Path,
    rule: NegativeRule,
    formats: tuple[str, ...],
    summary: TrainingFilesSummary,
    progress=None,
    copy_lacks: frozenset[str] | set[str] = frozenset(),
) -> None:
    """The split's hard-negatives rows, re-derived from the release's graded lists under `rule`, with texts; a row
    left out is counted, and apart when a document it lacks is none `copy_lacks` (the texts' missing lists) names."""
    texts_db, levels_db = lookups
    writers = [ROW_WRITERS[f](out, split, rule.negatives) for f in formats if f in ROW_WRITERS]
    for table in release_rows(release, split, rule, summary.counts):
        for start in range(0, table.num_rows, BATCH_ROWS):
            rows = [
                TrainingRow(r["query_id"], r["query_text"], r["qid"], r["positive_document_ids"][0],
                            r["negative_document_ids"], r["negative_sources"])
                for r in table.slice(start, BATCH_ROWS).to_pylist()
            ]  # fmt: skip
            texts = lookup(texts_db, [d for r in rows for d in (r.positive, *r.negatives)])
            levels = levels_of(levels_db, [r.query_id for r in rows])
            kept = [r for r in rows if r.positive in texts and all(d in texts for d in r.negatives)]
            for writer in writers:
                writer.write(kept, texts, levels)
            summary.rows[split] += len(kept)
            summary.left_out[split] += len(rows) - len(kept)
            summary.not_brought[split] += sum(
                any(d not in texts and d not in copy_lacks for d in (r.positive, *r.negatives)) for r in rows
            )
            if progress is not None:
                progress(len(rows))
    for writer in writers:
        writer.close()


def write_training_files(
    release: Path,
    texts: Path,
    out: Path,
    whole: bool = False,
    negatives: int | None = None,
    formats: tuple[str, ...] = FORMATS,
    progress=None,
    negative_level: int | None = None,
    fill_order: tuple[str, ...] | None = None,
) -> TrainingFilesSummary:
    """The trainers' files, with the hard-negatives rows re-derived from the release's graded lists: the release's
    own rows by default, or another k (`negatives`), `negative_level` or `fill_order`, without rebuilding it."""
    release, out = Path(release), Path(out)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise ArgumentError(f"--format {', '.join(unknown) or '(none)'}: choose from {', '.join(FORMATS)}")
    refuse_release_target(out, release)
    refuse_foreign_files(out)
    shards = texts_folder_for(release, texts)
    _, manifest = release_context_words(release)
    if not manifest.training.fill_order:
        raise InputError(
            release,
            0,
            "no training settings with a fill order in manifest.json: a release built before every positive had a "
            "row; rebuild it with `researchy-subq build-release`",
        )
    try:
        rule = rule_of_release(manifest, negatives, negative_level, fill_order)
    except ValueError as e:
        raise ArgumentError(str(e)) from None
    splits = [s for s in SPLITS if config("graded-lists").files(release, s)]
    if not splits:
        raise InputError(
            release,
            0,
            "no hard-negatives rows to write: the release holds no graded-lists files, the training configs' source; "
            "rebuild it with `researchy-subq build-release`",
        )
    summary = TrainingFilesSummary(out, rule.negatives, rule=rule)
    with staged_folder(out) as stage:  # OUT itself changes only once every file below is written
        write_text_atomic(
            stage / TEXTS_MARKER,
            json.dumps(
                {
                    "what": "training files holding document texts from a licensed copy: never publish",
                    "texts": str(texts),
                    "whole": whole,
                }
            )
            + "\n",
        )
        lookups = (build_lookup(shards, stage, whole, earlier=out), level_lookup(release, splits, stage, earlier=out))
        copy_lacks = missing_documents(texts)
        try:
            for split in splits:
                write_split(release, split, lookups, stage, rule, formats, summary, progress, copy_lacks)
        finally:
            for db in lookups:
                db.close()
        if summary.counts.positives and summary.counts.short_positives == summary.counts.positives:
            raise ArgumentError(
                f"--negatives {rule.negatives}: every one of the {summary.counts.positives:,} positives is short of "
                f"{rule.negatives} negatives from {', '.join(rule.fill_order)} (level <= {rule.negative_level}): no "
                f"row was written, and {out} is as it was; choose a smaller k"
            )
        summary.corpus = write_corpora(shards, stage, whole, [f for f in ("beir", "tevatron") if f in formats])
        if "beir" in formats:
            summary.queries = write_queries_and_qrels(release, stage, splits)
    summary.formats = formats
    if sum(summary.not_brought.values()):
        summary.texts_command = all_retrieved_command(release, texts)
    return summary
