"""docid -> (corpus file, row group, row): where the Parquet corpus holds each document's text, so the stages that
need texts (rerank, pool, judge) read them from the corpus and the Lucene index holds postings only.

The map is one Parquet file sorted by docid, written in row groups of `ROW_GROUP_ROWS` from spilled sorted runs
(generation/storage/spill.py), so building it takes bounded memory at 86M documents. A reader keeps only each row
group's first docid (from the Parquet statistics) and the few row groups it read last; a lookup is a bisection over
those first docids and one row group read.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from generation.storage.atomic_files import COMPRESSION, commit, tmp_path

NAME = "docid_map.parquet"
ROW_GROUP_ROWS = 16_384  # ~0.5 MB a group: one group read per lookup that misses the cache
SCHEMA = pa.schema(
    [
        pa.field("docid", pa.string(), False),
        pa.field("file", pa.string(), False),
        pa.field("row_group", pa.int32(), False),
        pa.field("row", pa.int32(), False),
    ]
)


def write_docid_map(corpus_files: list[Path], path: Path, memory: int | None = None) -> int:
    """The map of `corpus_files` (read a row group's docid column at a time) written atomically to `path`."""
    from generation.storage.spill import SPILL_ROWS, TableRuns

    runs = TableRuns("docid", memory or SPILL_ROWS)
    for corpus_file in corpus_files:
        parquet = pq.ParquetFile(corpus_file)
        for group in range(parquet.num_row_groups):
            docids = parquet.read_row_group(group, columns=["docid"])["docid"]
            n = len(docids)
            runs.add(
                pa.table(
                    {
                        "docid": docids,
                        "file": pa.array([Path(corpus_file).name] * n, pa.string()),
                        "row_group": pa.array(np.full(n, group, np.int32)),
                        "row": pa.array(np.arange(n, dtype=np.int32)),
                    }
                )
            )
    tmp, rows = tmp_path(path), 0
    with pq.ParquetWriter(tmp, SCHEMA, compression=COMPRESSION, use_dictionary=["file"]) as writer:
        pending: list[pa.Table] = []
        for chunk in runs.merged():  # written in full row groups, so every group's first docid bounds it
            pending.append(chunk.cast(SCHEMA))
            if sum(t.num_rows for t in pending) >= ROW_GROUP_ROWS:
                table = pa.concat_tables(pending)
                cut = table.num_rows - table.num_rows % ROW_GROUP_ROWS
                writer.write_table(table.slice(0, cut), row_group_size=ROW_GROUP_ROWS)
                pending, rows = [table.slice(cut)], rows + cut
        if pending and (table := pa.concat_tables(pending)).num_rows:
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
            rows += table.num_rows
    commit(tmp, path)
    return rows


class DocidMap:
    """Lookups in a map written by `write_docid_map`."""

    def __init__(self, path: Path, cached_groups: int = 8):
        self.path = Path(path)
        self._file = pq.ParquetFile(self.path)
        metadata = self._file.metadata
        self.rows = metadata.num_rows
        column = SCHEMA.get_field_index("docid")
        self._firsts = [metadata.row_group(g).column(column).statistics.min for g in range(metadata.num_row_groups)]
        self._groups: OrderedDict[int, dict[str, tuple[str, int, int]]] = OrderedDict()
        self._cached = cached_groups

    def _group(self, g: int) -> dict[str, tuple[str, int, int]]:
        if g in self._groups:
            self._groups.move_to_end(g)
            return self._groups[g]
        table = self._file.read_row_group(g)
        group = dict(
            zip(
                table["docid"].to_pylist(),
                zip(table["file"].to_pylist(), table["row_group"].to_pylist(), table["row"].to_pylist()),
            )
        )
        self._groups[g] = group
        if len(self._groups) > self._cached:
            self._groups.popitem(last=False)
        return group

    def get(self, docid: str) -> tuple[str, int, int] | None:
        """(corpus file name, row group, row) of `docid`, None when the corpus does not hold it."""
        g = bisect.bisect_right(self._firsts, docid) - 1
        return self._group(g).get(docid) if g >= 0 else None
