"""Sorted runs on disk, merged at the end (an external merge sort), so that what `build-release` and `validate`
must see whole (the distinct judged documents of `corpus-ids`, the (subq_id, docid) keys of the uniqueness check)
costs a fixed amount of memory however many judgments there are.

Values are buffered in memory; past `memory` items the buffer is sorted and written to a temporary folder as
one run. The merge reads every run a block at a time (blocks shrink as runs multiply, so the blocks in hand
together stay within the same budget): all items up to the smallest last item of the blocks in hand are taken
from every run, sorted together and handed on, so an item never spans two merged chunks. Nothing is written to disk while everything fits in the buffer. The
temporary folder (under TMPDIR) is removed when the runs are closed or garbage-collected.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SPILL_BYTES = 16 * 2**20  # items held in memory (16 MB: 2M uint64 keys) before a run goes to disk
SPILL_ROWS = 250_000  # rows of a table buffered before a run goes to disk (corpus-ids: ~15 MB)
BLOCK = 262_144  # items read from each run at a time while merging, at most (the budget shared by the runs)
RUN_BATCH_ROWS = 32_768  # rows of a table run read at a time while merging


class _Folder:
    """A temporary folder made on first use, removed on close or when its owner is collected."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.path: Path | None = None
        self._finalizer: weakref.finalize | None = None

    def file(self, name: str) -> Path:
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix=self.prefix))
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)
        return self.path / name

    def remove(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


class KeyRuns:
    """64-bit keys added in any order; `chunks()` gives them back sorted, in chunks. With `key`, the items are
    records of a structured `dtype` sorted by their `key` field (equal keys in the order they were added)."""

    def __init__(self, memory: int | None = None, dtype=np.uint64, key: str | None = None):
        self.dtype, self.key, self.total = np.dtype(dtype), key, 0
        self.memory = memory or SPILL_BYTES // self.dtype.itemsize  # items
        self._buffer: list[np.ndarray] = []
        self._buffered = 0
        self._runs: list[tuple[Path, int]] = []
        self._folder = _Folder("researchy-subq-keys-")

    @property
    def spilled(self) -> int:
        return len(self._runs)

    def add(self, keys: np.ndarray) -> None:
        keys = np.asarray(keys, self.dtype)
        self._buffer.append(keys)
        self._buffered += len(keys)
        self.total += len(keys)
        if self._buffered >= self.memory:
            self._spill()

    def _sort(self, items: np.ndarray) -> np.ndarray:
        return np.sort(items) if self.key is None else items[np.argsort(items[self.key], kind="stable")]

    def _keys(self, items: np.ndarray) -> np.ndarray:
        return items if self.key is None else items[self.key]

    def _sorted_buffer(self) -> np.ndarray:
        keys = self._sort(np.concatenate(self._buffer)) if self._buffer else np.zeros(0, self.dtype)
        self._buffer, self._buffered = [], 0
        return keys

    def _spill(self) -> None:
        keys = self._sorted_buffer()
        path = self._folder.file(f"run-{len(self._runs):05d}.u64")
        keys.tofile(path)
        self._runs.append((path, len(keys)))

    def chunks(self) -> Iterator[np.ndarray]:
        if not self._runs:
            yield self._sorted_buffer()
            return
        if self._buffered:
            self._spill()
        block = min(BLOCK, max(4_096, self.memory // len(self._runs)))
        readers = [_KeyReader(path, n, self.dtype, block) for path, n in self._runs]
        try:
            while True:
                blocks = [(r, r.block()) for r in readers]
                blocks = [(r, b) for r, b in blocks if len(b)]
                if not blocks:
                    return
                bound = min(self._keys(b)[-1] for _, b in blocks)
                taken = []
                for reader, _ in blocks:  # every item up to the bound, from the next blocks too
                    while len(block := reader.block()):
                        n = int(np.searchsorted(self._keys(block), bound, "right"))
                        taken.append(reader.take(n))
                        if n < len(block):
                            break
                # runs in the order they were written: the stable sort keeps equal keys in the order added
                yield self._sort(np.concatenate(taken))
        finally:
            self.close()

    def repeated(self) -> np.ndarray:
        """The keys added more than once (each once, sorted)."""
        found, last = [], None
        for chunk in self.chunks():
            if not len(chunk):
                continue
            same = chunk[1:] == chunk[:-1]
            found.append(chunk[1:][same])
            if last is not None and chunk[0] == last:
                found.append(chunk[:1])
            last = chunk[-1]
        return np.unique(np.concatenate(found)) if found else np.zeros(0, np.uint64)

    def close(self) -> None:
        self._buffer, self._buffered, self._runs = [], 0, []
        self._folder.remove()


class _KeyReader:
    def __init__(self, path: Path, count: int, dtype: np.dtype, size: int):
        self.path, self.left, self.offset, self.dtype, self.size = path, count, 0, dtype, size
        self._block = np.zeros(0, dtype)

    def block(self) -> np.ndarray:
        if not len(self._block) and self.left:
            n = min(self.size, self.left)
            self._block = np.fromfile(self.path, self.dtype, count=n, offset=self.offset * self.dtype.itemsize)
            self.offset += n
            self.left -= n
        return self._block

    def take(self, n: int) -> np.ndarray:
        taken, self._block = self._block[:n], self._block[n:]
        return taken


def first_of_each(table: pa.Table, key: str) -> pa.Table:
    """The table's rows sorted by `key` (a stable sort), the first row of each key value only."""
    if table.num_rows == 0:
        return table
    table = table.take(pc.sort_indices(table, [(key, "ascending")]))
    column = table[key].combine_chunks()
    keep = np.r_[True, pc.not_equal(column[1:], column[:-1]).to_numpy(zero_copy_only=False)]
    return table if keep.all() else table.filter(pa.array(keep))


class TableRuns:
    """Rows added in any order; `merged()` gives back the first row of each `key` value (first in the order
    the rows were added), sorted by `key`, in chunks."""

    def __init__(self, key: str, memory: int = SPILL_ROWS):
        self.key, self.memory = key, memory
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._runs: list[Path] = []
        self._folder = _Folder("researchy-subq-runs-")

    @property
    def spilled(self) -> int:
        return len(self._runs)

    def add(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self._buffer.append(table)
        self._buffered += table.num_rows
        if self._buffered >= self.memory:
            self._spill()

    def _sorted_buffer(self) -> pa.Table:
        table = first_of_each(pa.concat_tables(self._buffer).combine_chunks(), self.key)
        self._buffer, self._buffered = [], 0
        return table

    def _spill(self) -> None:
        table = self._sorted_buffer()
        path = self._folder.file(f"run-{len(self._runs):05d}.arrow")
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=RUN_BATCH_ROWS):
                writer.write_batch(batch)
        self._runs.append(path)

    def merged(self) -> Iterator[pa.Table]:
        if not self._runs:
            if self._buffer:
                yield self._sorted_buffer()
            return
        if self._buffered:
            self._spill()
        readers = [_TableReader(path) for path in self._runs]
        try:
            while True:
                blocks = [(r, r.block()) for r in readers]
                blocks = [(r, b) for r, b in blocks if b.num_rows]
                if not blocks:
                    return
                if len(blocks) == 1:  # one run left: its rows are sorted and above every key handed on
                    reader, block = blocks[0]
                    yield reader.take(block.num_rows)
                    continue
                bound = min(b[self.key][-1].as_py() for _, b in blocks)
                taken = []
                for reader, _ in blocks:  # every row up to the bound, from the next blocks too
                    while (block := reader.block()).num_rows:
                        n = pc.sum(pc.less_equal(block[self.key], bound)).as_py() or 0
                        taken.append(reader.take(n))
                        if n < block.num_rows:
                            break
                # runs in the order they were written, so the stable sort keeps the row added first
                yield first_of_each(pa.concat_tables(taken), self.key)
        finally:
            for reader in readers:
                reader.close()
            self.close()

    def close(self) -> None:
        self._buffer, self._buffered, self._runs = [], 0, []
        self._folder.remove()


class _TableReader:
    def __init__(self, path: Path):
        # read, not memory-mapped: mapped pages would count in the process's resident memory until the end
        self._source = pa.OSFile(str(path), "rb")
        self._file = pa.ipc.open_file(self._source)
        self._next = 0
        self._block: pa.Table = self._file.schema.empty_table()  # no rows: the next block() reads a batch

    def block(self) -> pa.Table:
        """The rows of the current batch not yet taken; none once every batch is taken."""
        if self._block.num_rows == 0 and self._next < self._file.num_record_batches:
            self._block = pa.Table.from_batches([self._file.get_batch(self._next)])
            self._next += 1
        return self._block

    def take(self, n: int) -> pa.Table:
        taken, self._block = self._block.slice(0, n), self._block.slice(n)
        return taken

    def close(self) -> None:
        self._source.close()
