"""The local executor: a shard's pending chunks, one after another, in this process."""

from __future__ import annotations

from collections.abc import Sequence


class LocalExecutor:
    description = "local"

    def run_chunks(self, work, pending: Sequence[int], progress=None) -> int:
        worker = work.make_worker()
        done = 0
        for k in pending:
            rows = work.run_chunk(k, worker)
            done += rows
            if progress is not None:
                progress(rows)
        return done
