"""`validate`'s reading of the data files: every file of every config opened once, safely (a symlink, an
unreadable file or another schema is a report line, never a traceback, and its rows are left out), then read in
record batches; with the helpers every pass over the rows uses: NaN counts of float columns, the order-free
fingerprint of a multiset of rows, and the row counts of each config and split. The passes themselves are in
rows.py, derived.py and training_configs.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.layout import CONFIGS
from builder.release.topic_index import mix
from generation.storage.schema import arrow_schema

BATCH_ROWS = 262_144
FLOAT_COLUMNS = {
    "judgments": ("expected", "probs"),
    "questions": ("answerable_share", "completeness", "clicked"),
    "subquestions": (),
    "qrels": (),
}


def float_values(column: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """The float values of a float, list-of-float or list-of-struct column, flattened."""
    kind = column.type
    if pa.types.is_floating(kind):
        return column
    if pa.types.is_list(kind):
        values = pc.list_flatten(column)
        if pa.types.is_floating(values.type):
            return values
        if pa.types.is_struct(values.type):
            floats = [pc.struct_field(values, f.name) for f in values.type if pa.types.is_floating(f.type)]
            return pa.chunked_array(floats) if floats else None
    return None


def nan_count(table: pa.Table, name: str) -> dict[str, int]:
    found = {}
    for column in FLOAT_COLUMNS[name]:
        values = float_values(table[column]) if column in table.column_names else None
        if values is not None and len(values):
            n = pc.sum(pc.is_nan(values)).as_py() or 0
            if n:
                found[column] = n
    return found


@dataclass
class Readable:
    """Files whose table schema is right and that open as Parquet; the rest were reported once."""

    files: dict = field(default_factory=dict)  # config name -> split -> [Path]

    def of(self, name: str, split: str) -> list[Path]:
        return self.files.get(name, {}).get(split, [])


def open_files(release: Path, splits: list[str], readable_check, schema_check) -> Readable:
    """Opens every data file of every config once; a symlink, an unreadable or truncated file, or a file
    with another schema gets a report line and is left out of the row pass."""
    out = Readable()
    for c in CONFIGS:
        expected = arrow_schema(c.table).remove_metadata()
        for split in splits:
            for path in c.files(release, split):
                name = path.relative_to(release)
                if path.is_symlink() or not path.is_file():
                    readable_check.fail(f"{name}: a symlink or not a regular file")
                    continue
                try:
                    found = pq.ParquetFile(path).schema_arrow.remove_metadata()
                except Exception as e:  # noqa: BLE001 - any reader failure is the finding
                    readable_check.fail(f"{name}: not readable as Parquet ({type(e).__name__}: {str(e)[:120]})")
                    continue
                if not found.equals(expected):
                    types = [
                        f"{f.name}: {f.type}"
                        for f in found
                        if f.name not in expected.names or expected.field(f.name).type != f.type
                    ]
                    missing = [n for n in expected.names if n not in found.names]
                    nullable = [
                        f.name
                        for f in found
                        if f.name in expected.names and not types and expected.field(f.name).nullable != f.nullable
                    ]
                    schema_check.fail(
                        f"{name}: "
                        + "; ".join(
                            filter(
                                None,
                                [
                                    f"types {types}" if types else "",
                                    f"missing {missing}" if missing else "",
                                    f"nullability of {nullable}" if nullable else "",
                                    "" if types or missing or nullable else f"column order {found.names}",
                                ],
                            )
                        )
                    )
                    if types or missing:
                        continue  # rows of another layout are not scanned; the line above is the finding
                out.files.setdefault(c.name, {}).setdefault(split, []).append(path)
    return out


def batches(path: Path, columns: list[str] | None, check, release: Path, batch_rows: int = BATCH_ROWS):
    """Record batches of a file as tables; a read error mid-file is reported, not raised."""
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=columns):
            yield pa.Table.from_batches([batch])
    except Exception as e:  # noqa: BLE001
        check.fail(f"{path.relative_to(release)}: read failed ({type(e).__name__}: {str(e)[:120]})")


def read_all(paths: list[Path], columns: list[str] | None, check, release: Path, table: str) -> pa.Table:
    parts = [t for p in paths for t in batches(p, columns, check, release)]
    schema = arrow_schema(table)
    if columns:
        schema = pa.schema([schema.field(c) for c in columns])
    return pa.concat_tables(parts) if parts else schema.empty_table()


def fingerprint(*columns: np.ndarray) -> int:
    """Order-free fingerprint of a multiset of rows of integer columns, e.g. (sub-question, document, score): the
    sum of their 64-bit row hashes, mod 2^64."""
    return int(np.sum(mix(*(c.astype(np.int64) if c.dtype != np.uint64 else c for c in columns)), dtype=np.uint64))


def data_rows(files: Readable, splits: list[str]) -> dict:
    return {
        c.name: {
            s: sum(
                pq.ParquetFile(p).metadata.num_rows
                for p in files.of("judgments", s)
                if p.parent.name in {f.split("/")[-1] for f in c.folders}
            )
            if c.table == "judgments"
            else sum(pq.ParquetFile(p).metadata.num_rows for p in files.of(c.name, s))
            for s in splits
        }
        for c in CONFIGS
    }
