"""Atomic, streaming Parquet output: a file appears under its name only once it is complete."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from generation.schema import arrow_schema

COMPRESSION = "zstd"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(tmp: Path, final: Path) -> None:
    """fsync `tmp`, rename it onto `final` and fsync the folder, so a crash leaves old or new, never half."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(final.parent)


class ParquetSink:
    """Writes rows of one schema-module table to `path` in row groups, then renames it into place."""

    def __init__(self, path: str | Path, table: str, rows_per_batch: int = 50_000):
        self.path = Path(path)
        self.schema = arrow_schema(table)
        self.rows_per_batch = rows_per_batch
        self.rows = 0
        self._pending: list[dict] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._writer = pq.ParquetWriter(self._tmp, self.schema, compression=COMPRESSION)

    def write_rows(self, rows: Iterable[dict]) -> None:
        self._pending.extend(rows)
        if len(self._pending) >= self.rows_per_batch:
            self._flush()

    def write_table(self, table: pa.Table) -> None:
        self._flush()
        self._writer.write_table(table.select(self.schema.names).cast(self.schema))
        self.rows += table.num_rows

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.Table.from_pylist(self._pending, schema=self.schema))
            self.rows += len(self._pending)
            self._pending = []

    def close(self) -> Path:
        self._flush()
        self._writer.close()
        commit(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        self._writer.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> "ParquetSink":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
