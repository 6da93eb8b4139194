"""Rows keyed by a unique uint64 `key`, added in any order, handed back sorted by key in bounded memory: a natural
merge sort. Each batch is sorted by key (a no-op when it comes sorted) and appended to the run on disk while its
keys go on rising; a batch that starts below the run's last key starts a new run. Judgment shards arrive question by
question, so a shard or a whole input becomes one run, and the merge has as few runs as the input has
out-of-order places (generation/spill.py's `TableRuns` sorts fixed-size buffers instead, and so sorts everything).
The merge reads every run a block at a time and hands on, each time, all rows up to the smallest last key of the
blocks in hand, sorted together.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from generation.spill import _Folder, _TableReader

BLOCK_ROWS = 8_192  # rows of a run read at a time while merging (a hundred runs hold ~800k rows)


class NaturalRuns:
    def __init__(self, key: str = "key", block_rows: int = BLOCK_ROWS):
        self.key, self.block_rows = key, block_rows
        self._folder = _Folder("researchy-subq-natural-")
        self._runs: list = []
        self._writer = None
        self._sink = None
        self._last: int | None = None
        self._schema: pa.Schema | None = None

    @property
    def runs(self) -> int:
        return len(self._runs)

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
        self._schema = schema

    def _finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

    def merged(self) -> Iterator[pa.Table]:
        self._finish()
        readers = [_TableReader(path) for path in self._runs]
        try:
            while True:
                blocks = [(r, r.block()) for r in readers]
                blocks = [(r, b) for r, b in blocks if b is not None and b.num_rows]
                if not blocks:
                    return
                if len(blocks) == 1:  # one run left: its blocks are in order already
                    reader, block = blocks[0]
                    yield reader.take(block.num_rows)
                    continue
                bound = min(int(b[self.key][-1].as_py()) for _, b in blocks)
                taken = []
                for reader, _ in blocks:  # every row up to the bound, from the next blocks too
                    while (block := reader.block()) is not None and block.num_rows:
                        n = int(np.searchsorted(block[self.key].to_numpy(), bound, "right"))
                        taken.append(reader.take(n))
                        if n < block.num_rows:
                            break
                table = pa.concat_tables(taken)
                yield table.take(pa.array(np.argsort(table[self.key].to_numpy(), kind="stable")))
        finally:
            for reader in readers:
                reader.close()
            self.close()

    def close(self) -> None:
        self._finish()
        self._runs = []
        self._folder.remove()
