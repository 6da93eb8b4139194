"""What a user of the release waits for: `load_dataset(RELEASE, "judgments")` against
`load_dataset("parquet", data_files=...)` on the very same files, each in a fresh process with an empty
cache (cold: Arrow conversion included; twice each, interleaved, so the OS page cache favours neither) and
again with that cache filled (warm), plus the first row of a streaming load. Prints wall time and peak memory (VmHWM) of each.

Usage: python scripts/bench_load.py RELEASE [--split train]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_common import load_line, timed
from rich.console import Console
from rich.table import Table

RELEASE = """
from datasets import load_dataset
data = load_dataset({release!r}, "judgments", split={split!r}, cache_dir={cache!r})
assert len(data) == {rows}
"""
PARQUET = """
from datasets import load_dataset
data = load_dataset("parquet", data_files={files!r}, split="train", cache_dir={cache!r})
assert len(data) == {rows}
"""
STREAM = """
from datasets import load_dataset
next(iter(load_dataset({release!r}, "judgments", split={split!r}, streaming=True)))
"""


def snippet(what: str, args, files: list[str], rows: int, cache: str) -> str:
    if what == "release":
        return RELEASE.format(release=str(args.release), split=args.split, cache=cache, rows=rows)
    return PARQUET.format(files=files, cache=cache, rows=rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", type=Path)
    parser.add_argument("--split", default="train")
    args = parser.parse_args()
    import pyarrow.parquet as pq

    files = sorted(str(p) for p in (args.release / "data" / "judgments").glob(f"*/{args.split}-*.parquet"))
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in files)
    before = load_line()
    results = {}
    # Cold loads in the order release, parquet, parquet, release (each into an empty cache), so neither side
    # always finds the files in the OS page cache; each cold figure is the mean of its two runs; then warm.
    with tempfile.TemporaryDirectory() as root:
        caches = {(what, i): str(Path(root) / f"{what}-{i}") for what in ("release", "parquet") for i in (0, 1)}
        runs: dict = {}
        for what, i in (("release", 0), ("parquet", 0), ("parquet", 1), ("release", 1)):
            runs[(what, i)] = timed(snippet(what, args, files, rows, caches[(what, i)]))
        for what in ("release", "parquet"):
            results[(what, "cold")] = tuple((a + b) / 2 for a, b in zip(runs[(what, 0)], runs[(what, 1)]))
        for what in ("release", "parquet"):
            results[(what, "warm")] = timed(snippet(what, args, files, rows, caches[(what, 1)]))
    results[("release", "streaming, first row")] = timed(STREAM.format(release=str(args.release), split=args.split))
    table = Table(
        title=f"load_dataset of {rows:,} judgments ({len(files)} files); load average "
        f"{before} before, {load_line()} after"
    )
    for column in ("load", "cache", "wall s", "peak MB", "release / parquet wall"):
        table.add_column(column, justify="right")
    for (what, state), (wall, _, peak) in results.items():
        ratio = (
            f"{wall / results[('parquet', state)][0]:.2f}"
            if what == "release" and ("parquet", state) in results
            else ""
        )
        name = 'load_dataset(RELEASE, "judgments")' if what == "release" else 'load_dataset("parquet", data_files=...)'
        table.add_row(name, state, f"{wall:.1f}", f"{peak:,.0f}", ratio)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
