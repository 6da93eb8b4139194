"""What the re-derivation (rederive.py) finds, per file: the first offending row of each kind of failure (its
position in the file, subq_id and docid) and how many rows share it, reported as one line each when the file ends; and `as_numpy`, a column as numpy with its nulls filled."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


class FileFindings:
    """Per file: the first offending row and the count of each kind of failure, reported as one line each."""

    def __init__(self, checks: dict):
        self.checks, self.found = checks, {}

    def add(self, check: str, kind: str, bad: np.ndarray, table: pa.Table, offset: int, describe=None) -> None:
        count = int(np.count_nonzero(bad))
        if not count:
            return
        if (check, kind) not in self.found:
            row = int(np.flatnonzero(bad)[0])
            detail = f": {describe(row)}" if describe else ""
            self.found[(check, kind)] = [
                f"row {offset + row} (subq_id {table['subq_id'][row]}, docid {table['docid'][row]}){detail}",
                0,
            ]
        self.found[(check, kind)][1] += count

    def flush(self, name: str) -> None:
        for (check, kind), (first, count) in self.found.items():
            self.checks[check].fail(f"{name}: {kind}, first at {first} ({count:,} rows)", count)
        self.found = {}


def as_numpy(column, fill) -> np.ndarray:
    return column.fill_null(fill).to_numpy(zero_copy_only=False)
