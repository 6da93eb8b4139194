"""Rows keyed by a unique uint64 `key`, added in any order, handed back sorted by key in bounded memory: a natural
merge sort. Each batch is sorted by key (a no-op when it comes sorted) and appended to the run on disk while its
keys go on rising; a batch that starts below the run's last key starts a new run. Judgment shards arrive question by
question, so a shard or a whole input becomes one run, and the merge (generation/storage/spill.py `TableRuns.merged`)
has as few runs as the input has places out of order; `TableRuns` itself sorts fixed-size buffers, and so sorts
everything.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from generation.storage.spill import TableRuns

BLOCK_ROWS = 8_192  # rows of a run read at a time while merging (a hundred runs hold ~800k rows)


class NaturalRuns(TableRuns):
    def __init__(self, key: str = "key", block_rows: int = BLOCK_ROWS):
        super().__init__(key)
        self.block_rows = block_rows
        self._run: tuple[pa.NativeFile, pa.ipc.RecordBatchFileWriter] | None = None  # the open run's file, its writer
        self._last = 0  # the open run's last key

    def add(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        keys = table[self.key].to_numpy()
        if len(keys) > 1 and (keys[1:] < keys[:-1]).any():
            order = np.argsort(keys, kind="stable")
            table, keys = table.take(pa.array(order)), keys[order]
        writer = self._start(table.schema) if self._run is None or int(keys[0]) < self._last else self._run[1]
        for batch in table.to_batches(max_chunksize=self.block_rows):
            writer.write_batch(batch)
        self._last = int(keys[-1])

    def _start(self, schema: pa.Schema) -> pa.ipc.RecordBatchFileWriter:
        self._finish()
        path = self._folder.file(f"run-{len(self._runs):05d}.arrow")
        sink = pa.OSFile(str(path), "wb")
        self._run = (sink, pa.ipc.new_file(sink, schema))
        self._runs.append(path)
        return self._run[1]

    def _finish(self) -> None:
        if self._run is not None:
            sink, writer = self._run
            writer.close()
            sink.close()
            self._run = None

    def merged(self) -> Iterator[pa.Table]:
        self._finish()
        yield from super().merged()

    def close(self) -> None:
        self._finish()
        super().close()
