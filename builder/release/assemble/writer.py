"""Release Parquet files that roll over at a row count, each opened by `layout.open_parquet_writer` (the
one place that decides how release files are encoded)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from builder.release.layout import open_parquet_writer
from generation.storage.schema import arrow_schema

ROW_GROUP_ROWS = 65_536  # rows buffered per writer before a row group is written


class RollingWriter:
    """`{folder}/{split}-XXXXX-of-YYYYY.parquet` files of at most `rows_per_file` rows; the names get
    their final count when the writer is closed. Small slices are buffered into row groups of
    `ROW_GROUP_ROWS` rows, so routing a batch to many writers does not make tiny row groups."""

    def __init__(self, folder: Path, split: str, table: str, rows_per_file: int):
        self.folder, self.split, self.rows_per_file = folder, split, rows_per_file
        self.schema = arrow_schema(table)
        self.files: list[Path] = []
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._in_file = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self.rows += table.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending).cast(self.schema)
        self._pending, self._pending_rows = [], 0
        start = 0
        while start < table.num_rows:
            writer = self._writer
            if writer is None or self._in_file >= self.rows_per_file:
                writer = self._open()
            take = min(self.rows_per_file - self._in_file, table.num_rows - start)
            writer.write_table(table.slice(start, take), row_group_size=ROW_GROUP_ROWS)
            self._in_file += take
            start += take

    def _open(self) -> pq.ParquetWriter:
        if self._writer is not None:
            self._writer.close()
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f".{self.split}-{len(self.files):05d}.parquet.tmp-{os.getpid()}"
        self.files.append(path)
        self._writer = open_parquet_writer(path, self.schema)
        self._in_file = 0
        return self._writer

    def close(self) -> list[Path]:
        """Renames the files to their final names; a split with no rows gets no file (and no config split)."""
        self._flush()
        if self._writer is None:
            return []
        self._writer.close()
        final = []
        for i, tmp in enumerate(self.files):
            target = self.folder / f"{self.split}-{i:05d}-of-{len(self.files):05d}.parquet"
            os.replace(tmp, target)
            final.append(target)
        return final
