"""Full-scale release benchmark: synthesize 24,316,320 judgments over 1,288,976 sub-questions with the
paper's Table 1 level mix, then time `build-release` and `validate` (each in its own process) and print
wall time and peak memory (max RSS) of each. Target on 2 cores: both together within 3 minutes, under 2 GB.

Usage: python scripts/bench_release.py [--scale 1.0] [--work DIR] [--keep]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from builder.synthetic import PAPER_JUDGMENTS, PAPER_SUBQUESTIONS, synthesize

STEP = """
import resource, sys, time
from pathlib import Path
start = time.perf_counter()
{body}
elapsed = time.perf_counter() - start
print(f"RESULT {{elapsed:.2f}} {{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}}")
"""
BUILD = """
from builder.package import package_release
package_release([Path({judgments!r})], [Path(p) for p in {questions!r}], Path({out!r}), "paper", repo="org/researchy-subq-judgments")
"""
VALIDATE = """
from builder.validate import validate
report = validate(Path({out!r}))
bad = [(c.name, c.examples) for c in report.checks if not c.ok]
if bad:
    raise SystemExit(f"checks failed: {{bad}}")
"""


def timed(body: str) -> tuple[float, float]:
    result = subprocess.run([sys.executable, "-c", STEP.format(body=body)], capture_output=True, text=True)
    line = next((l for l in result.stdout.splitlines() if l.startswith("RESULT")), None)
    if result.returncode != 0 or line is None:
        raise SystemExit(f"step failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    _, seconds, megabytes = line.split()
    return float(seconds), float(megabytes)


def parquet_write_cost(release: Path, scratch: Path) -> dict[str, tuple[float, int]]:
    """Rewrites the release's judgment files with plain zstd and with the release writer (content-defined
    chunking + page index): seconds and bytes of each, what the CDC option costs."""
    import pyarrow.parquet as pq

    from builder.layout import open_parquet_writer
    from generation.storage import COMPRESSION

    files = sorted((release / "data" / "judgments").rglob("*.parquet"))
    writers = {"plain zstd": lambda path, schema: pq.ParquetWriter(path, schema, compression=COMPRESSION),
               "CDC + page index": open_parquet_writer}
    scratch.mkdir(parents=True, exist_ok=True)
    cost = {}
    for name, open_writer in writers.items():
        seconds, size = 0.0, 0
        for i, path in enumerate(files):
            source = pq.ParquetFile(path)
            target = scratch / f"{i}.parquet"
            start = time.perf_counter()
            with open_writer(target, source.schema_arrow) as writer:
                for batch in source.iter_batches(batch_size=262_144):
                    writer.write_batch(batch)
            seconds += time.perf_counter() - start
            size += target.stat().st_size
            target.unlink()
        cost[name] = (seconds, size)
    return cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the paper's size")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-release-"))
    subqs, judgments = int(PAPER_SUBQUESTIONS * args.scale), int(PAPER_JUDGMENTS * args.scale)
    start = time.perf_counter()
    inputs = synthesize(work / "inputs", subquestions=subqs, judgments=judgments, shards=8, seed=0)
    made = time.perf_counter() - start
    out = work / "release"
    questions = [str(p) for p in inputs["questions"].values()]
    build = timed(BUILD.format(judgments=str(inputs["judgments"]), questions=questions, out=str(out)))
    check = timed(VALIDATE.format(out=str(out)))
    table = Table(title=f"{inputs['judgments_total']:,} judgments over {inputs['subquestions']:,} sub-questions "
                        f"(inputs synthesized in {made:.0f} s)")
    for column in ("step", "wall time", "peak memory"):
        table.add_column(column, justify="right")
    table.add_row("build-release", f"{build[0]:.1f} s", f"{build[1]:,.0f} MB")
    table.add_row("validate", f"{check[0]:.1f} s", f"{check[1]:,.0f} MB")
    table.add_row("together", f"{build[0] + check[0]:.1f} s", f"{max(build[1], check[1]):,.0f} MB (max)")
    Console().print(table)
    files = Table(title="writing the judgment files again (read time included)")
    for column in ("writer", "wall time", "bytes"):
        files.add_column(column, justify="right")
    for name, (seconds, size) in parquet_write_cost(out, work / "rewrite").items():
        files.add_row(name, f"{seconds:.1f} s", f"{size:,}")
    Console().print(files)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
