"""Rows keyed by a unique uint64 `key`, added in any order, handed back sorted by key in bounded memory: a natural
merge sort. Each batch is sorted by key (a no-op when it comes sorted) and appended to the run on disk while its
keys go on rising; a batch that starts below the run's last key starts a new run. Judgment shards arrive question by
question, so a shard or a whole input becomes one run, and the merge (generation/storage/spill.py `TableRuns.merged`) has as
few runs as the input has places out of order; `TableRuns` itself sorts fixed-size buffers, and so sorts everything.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from generation.storage.spill import TableRuns

BLOCK_ROWS = 8_192  # rows of a run read at a time while merging (a hundred runs hold ~800k rows)


class NaturalRuns(TableRuns):
    def __init__(self, key: str = "key", block_rows: int = BLOCK_ROWS):
        super().__init__(key)
        self.block_rows = block_rows
        self._writer = None
        self._sink = None
        self._last: int | None = None

    def add(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        keys = table[self.key].to_numpy()
        if len(keys) > 1 and (keys[1:] < keys[:-1]).any():
            order = np.argsort(keys, kind="stable")
            table, keys = table.take(pa.array(order)), keys[order]
        if self._writer is None or int(keys[0]) < self._last:
            self._start(table.schema)
        for batch in table.to_batches(max_chunksize=self.block_rows):
            self._writer.write_batch(batch)
        self._last = int(keys[-1])

    def _start(self, schema: pa.Schema) -> None:
        self._finish()
        path = self._folder.file(f"run-{len(self._runs):05d}.arrow")
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_file(self._sink, schema)
        self._runs.append(path)

    def _finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

    def merged(self):
        self._finish()
        yield from super().merged()

    def close(self) -> None:
        self._finish()
        super().close()
