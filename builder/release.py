"""Judgment shards + question tables -> the release folder (Parquet by config and split, card, manifest).

Everything streams in record batches: memory grows with the number of questions and sub-questions
(for routing and statistics), not with the number of judgments.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.layout import LEVELS, PARTITIONS, SPLITS, config_of_partition, open_parquet_writer, partition_of
from builder.complexity import add_columns, complexity
from builder.configs import binary_threshold, write_derived_configs
from builder.complexity import summary as complexity_summary
from builder.stats import SplitStats
from generation.profiles import Complexity
from generation.errors import InputError
from generation.schema import arrow_schema, conform
from generation.shards import sha256_file, stage_files
from generation.topics import question_files

ROWS_PER_FILE = 5_000_000
BATCH_ROWS = 262_144


class RollingWriter:
    """`{folder}/{split}-XXXXX-of-YYYYY.parquet` files of at most `rows_per_file` rows; the names get
    their final count when the writer is closed."""

    def __init__(self, folder: Path, split: str, table: str, rows_per_file: int):
        self.folder, self.split, self.rows_per_file = folder, split, rows_per_file
        self.schema = arrow_schema(table)
        self.files: list[Path] = []
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._in_file = 0

    def write(self, table: pa.Table) -> None:
        start = 0
        while start < table.num_rows:
            if self._writer is None or self._in_file >= self.rows_per_file:
                self._open()
            take = min(self.rows_per_file - self._in_file, table.num_rows - start)
            self._writer.write_table(table.slice(start, take).cast(self.schema))
            self._in_file += take
            self.rows += take
            start += take

    def _open(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f".{self.split}-{len(self.files):05d}.parquet.tmp"
        self.files.append(path)
        self._writer = open_parquet_writer(path, self.schema)
        self._in_file = 0

    def close(self) -> list[Path]:
        """Renames the files to their final names; a split with no rows gets no file (and no config split)."""
        if self._writer is None:
            return []
        self._writer.close()
        final = []
        for i, tmp in enumerate(self.files):
            target = self.folder / f"{self.split}-{i:05d}-of-{len(self.files):05d}.parquet"
            os.replace(tmp, target)
            final.append(target)
        return final


@dataclass
class ReleaseSummary:
    rows: dict = field(default_factory=dict)  # config -> split -> rows
    stats: dict = field(default_factory=dict)  # split -> SplitStats.summary()
    files: list[Path] = field(default_factory=list)


def load_questions(folders: list[Path]) -> tuple[pa.Table, pa.Table]:
    questions, subquestions = [], []
    for folder in folders:
        q_path, s_path = question_files(folder)
        questions.append(conform(pq.read_table(q_path), "questions"))
        subquestions.append(conform(pq.read_table(s_path), "subquestions"))
    return pa.concat_tables(questions), pa.concat_tables(subquestions)


def split_of_rows(qids: pa.Array, qid_values: pa.Array, split_codes: pa.Array, where: str) -> pa.Array:
    index = pc.index_in(qids, value_set=qid_values)
    if index.null_count:
        missing = pc.filter(qids, pc.is_null(index)).unique().to_pylist()
        raise InputError(where, 0, f"{len(missing)} qids are not in the questions tables, e.g. {missing[:3]}",
                         field="qid")
    return pc.take(split_codes, index)


def write_topic_tables(questions: pa.Table, subquestions: pa.Table, out: Path, rows_per_file: int,
                       summary: ReleaseSummary, names: tuple[str, ...] = ("questions", "subquestions")) -> None:
    for name, table in (("questions", questions), ("subquestions", subquestions)):
        if name not in names:
            continue
        for split in present(questions):
            if name == "questions":
                part = table.filter(pc.equal(table["split"], split))
            else:
                split_qids = questions.filter(pc.equal(questions["split"], split))["qid"]
                part = table.filter(pc.is_in(table["qid"], value_set=split_qids))
            writer = RollingWriter(out / "data" / name, split, name, rows_per_file)
            writer.write(part)
            summary.files += writer.close()
            summary.rows.setdefault(name, {})[split] = part.num_rows


def present(questions: pa.Table) -> list[str]:
    splits = set(questions["split"].unique().to_pylist())
    unknown = splits - set(SPLITS)
    if unknown:
        raise InputError("questions", 0, f"unknown split(s) {sorted(unknown)}; a release has {SPLITS}", field="split")
    return [s for s in SPLITS if s in splits]


def iter_batches(files: list[Path]):
    """Record batches, one file after the other: no read-ahead, so memory stays at a few batches."""
    for path in files:
        yield from pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS)


def route_by_split(judgments: list[Path], questions: pa.Table, splits: list[str], progress=None):
    """Yields (split, rows) for every record batch of the judgment shards, in input order."""
    qid_values = questions["qid"]
    split_codes = pa.array([splits.index(s) for s in questions["split"].to_pylist()], pa.int8())
    for folder in judgments:
        for batch in iter_batches(stage_files(folder, "judgments")):
            table = pa.Table.from_batches([batch])
            codes = split_of_rows(table["qid"], qid_values, split_codes, str(folder))
            for code, split in enumerate(splits):
                rows = table.filter(pc.equal(codes, code))
                if rows.num_rows:
                    yield split, rows
            if progress is not None:
                progress(table.num_rows)


def split_by_level(rows: pa.Table):
    """Yields (partition, rows of that level), partitions in release order."""
    for level in (*LEVELS, None):
        mask = pc.is_null(rows["level"]) if level is None else pc.equal(rows["level"], level)
        part = rows.filter(mask)
        if part.num_rows:
            yield partition_of(level), part


def as_qrels(rows: pa.Table) -> pa.Table:
    graded = rows.filter(pc.is_valid(rows["level"]))
    return pa.table({"query-id": graded["subq_id"], "corpus-id": graded["docid"],
                     "score": pc.cast(graded["level"], pa.int32())})


def build_release(judgments: list[Path], questions: list[Path], out: Path, profile=None,
                  rows_per_file: int = ROWS_PER_FILE, progress=None) -> ReleaseSummary:
    """Writes data/ and returns the row counts and statistics; the card and manifest come after (card.py)."""
    out = Path(out)
    if (out / "data").exists():
        shutil.rmtree(out / "data")
    question_table, subquestion_table = load_questions(questions)
    splits = present(question_table)
    summary = ReleaseSummary()
    write_topic_tables(question_table, subquestion_table, out, rows_per_file, summary, ("subquestions",))

    stats = {s: SplitStats() for s in splits}
    for split in splits:
        in_split = question_table.filter(pc.equal(question_table["split"], split))
        stats[split].subquestions = summary.rows["subquestions"][split]
        stats[split].clicked_total = sum(len(c) for c in in_split["clicked"].to_pylist())
    pool = profile.pool if profile is not None else None
    writers = {(p, s): RollingWriter(out / "data" / "judgments" / p, s, "judgments", rows_per_file)
               for p in PARTITIONS for s in splits}
    qrels = {s: RollingWriter(out / "data" / "qrels", s, "qrels", rows_per_file) for s in splits}
    for split, rows in route_by_split(judgments, question_table, splits, progress):
        stats[split].add(rows, pool.bm25_top if pool else None, pool.rerank_top if pool else None)
        for partition, part in split_by_level(rows):
            writers[(partition, split)].write(part)
        qrels[split].write(as_qrels(rows))
    for (partition, split), writer in writers.items():
        summary.files += writer.close()
        for name in ("judgments", config_of_partition(partition)):
            summary.rows.setdefault(name, {}).setdefault(split, 0)
            summary.rows[name][split] += writer.rows
    for split, writer in qrels.items():
        summary.files += writer.close()
        summary.rows.setdefault("qrels", {})[split] = writer.rows
    write_derived_configs(out, question_table, subquestion_table, splits, rows_per_file, summary,
                          binary_threshold(profile))
    question_table = with_complexity(question_table, subquestion_table, out, splits, profile)
    write_topic_tables(question_table, subquestion_table, out, rows_per_file, summary, ("questions",))
    summary.stats = {s: stats[s].summary() for s in splits}
    for split in splits:
        summary.stats[split]["complexity"] = complexity_summary(
            question_table.filter(pc.equal(question_table["split"], split)))
    return summary


def with_complexity(questions: pa.Table, subquestions: pa.Table, out: Path, splits: list[str], profile) -> pa.Table:
    settings = profile.complexity if profile is not None else Complexity()
    values: dict = {}
    for split in splits:
        files = sorted((out / "data" / "judgments").glob(f"*/{split}-*.parquet"))
        values.update(complexity(files, subquestions, settings.answer_level, settings.completeness_threshold))
    return add_columns(questions, values)


def file_manifest(release: Path) -> dict:
    """Every data file with its size, row count and sha256."""
    entries = {}
    for path in sorted((release / "data").rglob("*.parquet")):
        entries[str(path.relative_to(release))] = {"bytes": path.stat().st_size, "sha256": sha256_file(path),
                                                   "rows": pq.ParquetFile(path).metadata.num_rows}
    return entries


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
