"""The `qrels` config of each split again as a TREC qrels file beside its Parquet files
(`data/qrels/{split}.qrels.txt`), for trec_eval and the other tools that read TREC files.

The format, as trec_eval reads it (usnistgov/trec_eval, get_qrels.c): one judgment a line, `qid iter docno rel`,
"Fields are separated by whitespace, string fields can contain no whitespace", `iter` is ignored (written 0) and
`rel` is an integer. Here: query-id (subq_id), 0, corpus-id (docid), score (level), one space apart, the lines in
the order of the Parquet rows. `validate` reads a file back (builder/release/validate/trec.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv

from builder.release.assemble.writer import RollingWriter
from builder.release.layout import config, trec_qrels_path
from generation.errors import InputError
from generation.labels.trec_qrels import COLUMNS
from generation.storage.atomic_files import fsync_dir

WRITE_OPTIONS = csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")


def trec_lines(qrels: pa.Table) -> pa.Table:
    """The four TREC columns of qrels rows; an id with white space in it (which would split the line
    differently) is refused, naming it."""
    for column in ("query-id", "corpus-id"):
        spaced = pc.match_substring_regex(qrels[column], r"\s")
        if pc.any(spaced).as_py():
            value = pc.filter(qrels[column], spaced)[0].as_py()
            raise InputError(
                "judgments",
                0,
                f"{column} {value!r} holds white space, which a TREC qrels line "
                "cannot carry (trec_eval splits fields on it)",
                field=column,
            )
    iteration = pa.array(["0"] * qrels.num_rows, pa.string())
    return pa.table([qrels["query-id"], iteration, qrels["corpus-id"], qrels["score"]], names=list(COLUMNS))


class TrecQrelsWriter:
    """One split's TREC qrels file, written under a temporary name and renamed when closed; a split with no
    rows gets no file, as its Parquet."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self.rows = 0
        self._file: tuple[pa.NativeFile, csv.CSVWriter] | None = None  # the temporary file and its writer, once written

    def write(self, qrels: pa.Table) -> None:
        if qrels.num_rows == 0:
            return
        lines = trec_lines(qrels)
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            sink = pa.OSFile(str(self.tmp), "wb")
            self._file = (sink, csv.CSVWriter(sink, lines.schema, write_options=WRITE_OPTIONS))
        self._file[1].write_table(lines)
        self.rows += qrels.num_rows

    def close(self) -> list[Path]:
        if self._file is None:
            return []
        sink, writer = self._file
        writer.close()
        sink.close()
        with open(self.tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(self.tmp, self.path)
        fsync_dir(self.path.parent)
        return [self.path]


class QrelsWriter:
    """The `qrels` config of one split: its Parquet files and the same rows as a TREC qrels file."""

    def __init__(self, release: Path, split: str, rows_per_file: int):
        self.parquet = RollingWriter(Path(release) / "data" / config("qrels").folders[0], split, "qrels", rows_per_file)
        self.trec = TrecQrelsWriter(trec_qrels_path(release, split))

    @property
    def rows(self) -> int:
        return self.parquet.rows

    def write(self, qrels: pa.Table) -> None:
        self.parquet.write(qrels)
        self.trec.write(qrels)

    def close(self) -> list[Path]:
        return self.parquet.close() + self.trec.close()
