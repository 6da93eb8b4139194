"""Judgment shards + question tables -> the release folder (Parquet by config and split, card, manifest).

One streaming pass over the judgment shards in 262k-row record batches: each batch is looked up by
integer position (`topic_index`) and its rows of each (split, level partition) appended to one writer
per partition and split; statistics and retrieval complexity are accumulated from the same
batch, so nothing re-reads the release. Memory follows the number of questions and sub-questions.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.assemble.complexity import ComplexityAccumulator, add_columns
from builder.release.assemble.complexity import summary as complexity_summary
from builder.release.assemble.configs import (
    CorpusIds,
    Subtopics,
    binary_qrels,
    diversity_qrels,
    queries,
)
from builder.release.assemble.stats import Batch, SplitStatsAccumulator
from builder.release.assemble.training_configs import TrainingCounts, TrainingWriters, with_dev_split
from builder.release.assemble.trec import QrelsWriter
from builder.release.assemble.writer import RollingWriter
from builder.release.contract import SplitStats
from builder.release.layout import PARTITIONS, SPLITS, binary_threshold, config_of_partition, data_files, file_rows
from builder.release.topic_index import MISSING, TopicIndex, string_hashes
from generation.corpus.topics import question_files
from generation.errors import InputError
from generation.profiles.profile import Complexity, TrainingConfigsSettings
from generation.storage.atomic_files import read_batches, refuse_links, write_text_atomic
from generation.storage.schema import SOURCE_SPLITS, conform
from generation.storage.shards import sha256_file, stage_files

ROWS_PER_FILE = 5_000_000
BATCH_ROWS = 262_144
UNPARSED = len(PARTITIONS) - 1  # partition code of a null level; levels 0-5 are their own codes


@dataclass
class ReleaseSummary:
    rows: dict = field(default_factory=dict)  # config -> split -> rows
    stats: dict[str, SplitStats] = field(default_factory=dict)  # split -> its statistics
    training: TrainingCounts = field(default_factory=TrainingCounts)
    files: list[Path] = field(default_factory=list)
    left_out: dict = field(default_factory=dict)  # status -> judgments left out (build-release --leave-out-other-text)


def load_questions(folders: list[Path]) -> tuple[pa.Table, pa.Table]:
    """Every question folder, refusing the same folder twice and a question in two folders."""
    resolved = [Path(f).resolve() for f in folders]
    for i, folder in enumerate(resolved):
        if folder in resolved[:i]:
            raise InputError(folder, 0, "the same questions folder is given twice")
    questions: list[pa.Table] = []
    subquestions: list[pa.Table] = []
    for folder in folders:
        for path, name, tables in zip(question_files(folder), ("questions", "subquestions"), (questions, subquestions)):
            try:
                tables.append(conform(pq.read_table(path), name))
            except KeyError as e:  # a column the schema requires
                raise InputError(path, 0, f"{e.args[0]}: not a table from `researchy-subq questions`") from None
    question_table, subquestion_table = pa.concat_tables(questions), pa.concat_tables(subquestions)
    for table, key, name in ((question_table, "qid", "questions"), (subquestion_table, "subq_id", "subquestions")):
        counts = pc.value_counts(table[key])
        repeated = counts.filter(pc.greater(counts.field("counts"), 1)).field("values")
        if len(repeated):
            raise InputError(
                ", ".join(str(f) for f in folders),
                0,
                f"{len(repeated)} {key}s appear more than once "
                f"in the {name} tables (overlapping folders, or a question in two splits), "
                f"e.g. {repeated[:3].to_pylist()}",
                field=key,
            )
    return question_table, subquestion_table


def topic_index(
    questions: pa.Table, subquestions: pa.Table, splits: list[str], where: str = "subquestions"
) -> TopicIndex:
    index = TopicIndex(questions["qid"], splits, questions["split"], subquestions["subq_id"], subquestions["qid"])
    orphans = np.flatnonzero(index.subq_question == MISSING)
    if len(orphans):
        raise InputError(
            where,
            0,
            f"{len(orphans)} sub-questions of no known question, e.g. {subquestions['subq_id'][int(orphans[0])]}",
            field="qid",
        )
    return index


def present(questions: pa.Table, allowed: tuple[str, ...] = SPLITS) -> list[str]:
    splits = set(questions["split"].unique().to_pylist())
    unknown = splits - set(allowed)
    if unknown:
        raise InputError("questions", 0, f"unknown split(s) {sorted(unknown)}; expected {allowed}", field="split")
    return [s for s in SPLITS if s in splits]


def judgment_inputs(folders: list[Path]) -> list[Path]:
    """The completed shards of every folder; `stage_files` checks each against its completion record (rows,
    size, sha256) and refuses one that changed after it was recorded done."""
    resolved = [Path(f).resolve() for f in folders]
    files = []
    for i, folder in enumerate(folders):
        if resolved[i] in resolved[:i]:
            raise InputError(folder, 0, "the same judgments folder is given twice")
        files += stage_files(folder, "judgments")
    return files


@dataclass
class Routed:
    """One input batch, in input order, with each row's positions, split and level partition."""

    batch: Batch
    split: np.ndarray  # split code per row
    partition: np.ndarray  # level partition code per row (UNPARSED for a null level)

    def _mask(self, keep: np.ndarray) -> Batch:
        if keep.all():
            return self.batch
        b, mask = self.batch, pa.array(keep)
        return Batch(
            b.table.filter(mask), b.question[keep], b.subquestion[keep], b.document[keep], b.bm25_top, b.rerank_top
        )

    def rows(self, split: int, partition: int | None = None) -> Batch:
        keep = self.split == split
        return self._mask(keep if partition is None else keep & (self.partition == partition))

    def parts(self, split: int):
        """(partition code, rows) of the split's rows, one filter per partition present."""
        in_split = self.split == split
        for code in np.unique(self.partition[in_split]):
            keep = in_split & (self.partition == code)
            yield int(code), self.batch.table if keep.all() else self.batch.table.filter(pa.array(keep))

    def graded(self, split: int) -> pa.Table:
        """The split's rows that have a level, as the three columns qrels are made of."""
        keep = (self.split == split) & (self.partition != UNPARSED)
        columns = self.batch.table.select(["subq_id", "docid", "level"])
        return columns if keep.all() else columns.filter(pa.array(keep))


def route(
    files: list[Path],
    index: TopicIndex,
    pool=None,
    leave_out: tuple[str, ...] = (),
    left_out: Counter[str] | None = None,
):
    """Yields a `Routed` batch per 262k input rows, in input order; a row whose question or sub-question
    is unknown, or whose sub-question belongs to another question, stops the build naming its file. Rows whose
    status is one of `leave_out` are left out, counted by status in `left_out`."""
    for path, table in read_batches(files, "judgments", BATCH_ROWS):
        if leave_out:
            dropped = pc.is_in(table["status"], value_set=pa.array(leave_out, pa.string()))
            if left_out is not None:
                left_out.update(table.filter(dropped)["status"].to_pylist())
            table = table.filter(pc.invert(dropped))
        subquestion = index.subquestion_positions(table["subq_id"])
        if (subquestion == MISSING).any():
            bad = table["subq_id"][int(np.flatnonzero(subquestion == MISSING)[0])]
            raise InputError(path, 0, f"subq_id {bad} is not in the subquestions tables", field="subq_id")
        # a row's question is its sub-question's: one string comparison checks the row's qid against it
        question = index.subq_question[subquestion]
        same = pc.equal(table["qid"], index.questions.ids.take(pa.array(question))).to_numpy(zero_copy_only=False)
        if not same.all():
            row = int(np.flatnonzero(~same)[0])
            raise InputError(
                path,
                row,
                f"subq_id {table['subq_id'][row]} belongs to another question than qid {table['qid'][row]}",
                field="qid",
            )
        partition = table["level"].fill_null(UNPARSED).to_numpy(zero_copy_only=False).astype(np.int64)
        yield (
            path,
            Routed(
                Batch(
                    table,
                    question,
                    subquestion,
                    string_hashes(table["docid"]),
                    pool.bm25_top if pool else None,
                    pool.rerank_top if pool else None,
                ),
                index.question_split[question],
                partition,
            ),
        )


def with_complexity(question_table: pa.Table, index: TopicIndex, files: list[Path], settings: Complexity) -> pa.Table:
    """The questions table with its complexity columns, from one pass over the judgment shards."""
    complexity = ComplexityAccumulator(
        index.subquestions_of, index.subq_question, settings.answer_level, settings.completeness_threshold
    )
    for _, routed in route(files, index):
        b = routed.batch
        complexity.add(b.question, b.subquestion, b.document, b.table["level"])
    return add_columns(question_table, np.arange(question_table.num_rows), complexity.result(), complexity.judged)


def qrels_of(graded: pa.Table) -> pa.Table:
    """BEIR/MTEB qrels of judgments that all have a level."""
    return pa.table(
        {"query-id": graded["subq_id"], "corpus-id": graded["docid"], "score": pc.cast(graded["level"], pa.int32())}
    )


class DerivedConfigs:
    """`queries`, `qrels-binary`, `diversity-qrels` and `corpus-ids` (builder/release/assemble/configs.py), written from the
    same batches as the judgments, so the build never reads the release back."""

    NAMES = ("queries", "qrels-binary", "diversity-qrels", "corpus-ids")

    def __init__(
        self,
        out: Path,
        questions: pa.Table,
        subquestions: pa.Table,
        splits: list[str],
        rows_per_file: int,
        threshold: int,
    ):
        from builder.release.layout import config

        self.threshold, self.splits = threshold, splits
        self.writers, self.numbers, self.docs = [], [], []
        for split in splits:
            in_split = questions.filter(pc.equal(questions["split"], split))
            split_subqs = subquestions.filter(pc.is_in(subquestions["qid"], value_set=in_split["qid"]))
            writers = {
                name: RollingWriter(
                    Path(out) / "data" / config(name).folders[0], split, config(name).table, rows_per_file
                )
                for name in self.NAMES
            }
            writers["queries"].write(queries(split_subqs))
            self.writers.append(writers)
            self.numbers.append(Subtopics(split_subqs))
            self.docs.append(CorpusIds(in_split))

    def add(self, split: int, rows: pa.Table) -> None:
        self.docs[split].add(rows)
        self.writers[split]["qrels-binary"].write(binary_qrels(rows, self.threshold))
        self.writers[split]["diversity-qrels"].write(diversity_qrels(rows, self.numbers[split]))

    def close(self, summary: ReleaseSummary) -> None:
        for split, writers, docs in zip(self.splits, self.writers, self.docs):
            for table in docs.tables():
                writers["corpus-ids"].write(table)
            for name, writer in writers.items():
                summary.files += writer.close()
                summary.rows.setdefault(name, {})[split] = writer.rows


def write_table(
    table: pa.Table, folder: Path, split: str, name: str, rows_per_file: int, summary: ReleaseSummary
) -> None:
    writer = RollingWriter(folder, split, name, rows_per_file)
    writer.write(table)
    summary.files += writer.close()
    summary.rows.setdefault(name, {})[split] = table.num_rows


def build_release_data(
    judgments: list[Path],
    questions: list[Path],
    out: Path,
    profile=None,
    rows_per_file: int = ROWS_PER_FILE,
    progress=None,
    leave_out: tuple[str, ...] = (),
    runs: list[Path] | None = None,
) -> ReleaseSummary:
    """Writes data/ and returns the row counts and statistics; the card and manifest come after (card.py). Judgments
    whose status is in `leave_out` are not written (counted in the summary's `left_out`)."""
    out = Path(out)
    question_table, subquestion_table = load_questions(questions)
    present(question_table, SOURCE_SPLITS)  # Researchy's own splits, before dev is carved from train
    question_table = with_dev_split(
        question_table, profile.training if profile is not None else TrainingConfigsSettings()
    )
    splits = present(question_table)
    index = topic_index(question_table, subquestion_table, splits)
    files = judgment_inputs(judgments)
    refuse_links(out, "data")
    if (out / "data").exists():
        shutil.rmtree(out / "data")
    summary = ReleaseSummary()
    subq_split = index.split_of_subquestions()
    stats: dict[str, SplitStatsAccumulator] = {}
    for code, split in enumerate(splits):
        write_table(
            subquestion_table.filter(pa.array(subq_split == code)),
            out / "data" / "subquestions",
            split,
            "subquestions",
            rows_per_file,
            summary,
        )
        stats[split] = SplitStatsAccumulator(
            len(subq_split),
            subquestions=int((subq_split == code).sum()),
            clicked_total=int(
                pc.sum(
                    pc.list_value_length(question_table.filter(pc.equal(question_table["split"], split))["clicked"])
                ).as_py()
                or 0
            ),
        )
    settings = profile.complexity if profile is not None else Complexity()
    complexity = ComplexityAccumulator(
        index.subquestions_of, index.subq_question, settings.answer_level, settings.completeness_threshold
    )
    writers = {
        (p, s): RollingWriter(out / "data" / "judgments" / PARTITIONS[p], split, "judgments", rows_per_file)
        for p in range(len(PARTITIONS))
        for s, split in enumerate(splits)
    }
    qrels = {s: QrelsWriter(out, split, rows_per_file) for s, split in enumerate(splits)}  # Parquet and TREC
    derived = DerivedConfigs(out, question_table, subquestion_table, splits, rows_per_file, binary_threshold(profile))
    training = TrainingWriters(out, subquestion_table, subq_split, splits, profile, rows_per_file, runs=runs)
    left_out: Counter[str] = Counter()
    for _, routed in route(files, index, profile.pool if profile is not None else None, leave_out, left_out):
        b = routed.batch
        complexity.add(b.question, b.subquestion, b.document, b.table["level"])
        training.add(b.table, b.subquestion)
        for s, split in enumerate(splits):
            rows = routed.rows(s)
            if rows.table.num_rows:
                stats[split].add(rows)
                for p, part in routed.parts(s):
                    writers[(p, s)].write(part)
                qrels[s].write(qrels_of(routed.graded(s)))
                derived.add(s, rows.table)
        if progress is not None:
            progress(b.table.num_rows)
    for (p, s), writer in writers.items():
        summary.files += writer.close()
        for name in ("judgments", config_of_partition(PARTITIONS[p])):
            summary.rows.setdefault(name, {}).setdefault(splits[s], 0)
            summary.rows[name][splits[s]] += writer.rows
    for s, qrels_writer in qrels.items():
        summary.files += qrels_writer.close()
        summary.rows.setdefault("qrels", {})[splits[s]] = qrels_writer.rows
    derived.close(summary)
    summary.training = training.close(summary)
    retrieved = training.retrieved_column(question_table)
    if retrieved is not None:
        column = question_table.schema.get_field_index("retrieved_unjudged")
        question_table = question_table.set_column(column, question_table.schema.field(column), retrieved)
    question_table = add_columns(
        question_table, np.arange(question_table.num_rows), complexity.result(), complexity.judged
    )
    summary.left_out = {status: left_out.get(status, 0) for status in leave_out}
    for split in splits:
        part = question_table.filter(pc.equal(question_table["split"], split))
        write_table(part, out / "data" / "questions", split, "questions", rows_per_file, summary)
        summary.stats[split] = stats[split].summary(complexity_summary(part))
    return summary


def file_manifest(release: Path) -> dict:
    """Every data file (Parquet and TREC qrels) with its size, row count and sha256."""
    entries = {}
    for path in data_files(release):
        entries[str(path.relative_to(release))] = {
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
            "rows": file_rows(path),
        }
    return entries


def write_json(path: Path, data: dict) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
