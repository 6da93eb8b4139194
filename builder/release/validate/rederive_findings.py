"""What the re-derivation (rederive.py) finds, per file: the first offending row of each kind of failure (its
position in the file, subq_id and docid) and how many rows share it, reported as one line each when the file ends; and `as_numpy`, a column as numpy with its nulls filled."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass
class Finding:
    """One kind of failure in one file: its first offending row, described, and how many rows have it."""

    first: str
    count: int = 0


class FileFindings:
    """Per file: the first offending row and the count of each kind of failure, reported as one line each."""

    def __init__(self, checks: dict):
        self.checks = checks
        self.found: dict[tuple[str, str], Finding] = {}  # (check, kind) -> its finding in the file

    def add(
        self,
        check: str,
        kind: str,
        bad: np.ndarray,
        table: pa.Table,
        offset: int,
        describe: Callable[[int], str] | None = None,
    ) -> None:
        count = int(np.count_nonzero(bad))
        if not count:
            return
        if (check, kind) not in self.found:
            row = int(np.flatnonzero(bad)[0])
            detail = f": {describe(row)}" if describe else ""
            self.found[(check, kind)] = Finding(
                f"row {offset + row} (subq_id {table['subq_id'][row]}, docid {table['docid'][row]}){detail}"
            )
        self.found[(check, kind)].count += count

    def flush(self, name: str) -> None:
        for (check, kind), finding in self.found.items():
            self.checks[check].fail(f"{name}: {kind}, first at {finding.first} ({finding.count:,} rows)", finding.count)
        self.found = {}


def as_numpy(column, fill) -> np.ndarray:
    return column.fill_null(fill).to_numpy(zero_copy_only=False)
