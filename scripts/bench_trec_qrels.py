"""What the TREC qrels file costs beside the `qrels` Parquet files: the same qrels rows (ids shaped as the paper's:
`{qid}-{k}` sub-question ids, ClueWeb22-IDs, levels 0-5) written in 262k-row batches by the release's Parquet
writer and by `TrecQrelsWriter`, then read back (Parquet: the three columns; TREC: `read_trec_qrels` of
generation/labels/trec_qrels.py, as `validate` reads it). Prints seconds, MB/s and file size for each, and the TREC
file's size over the Parquet's.

Usage: python scripts/bench_trec_qrels.py [--rows 24316320] [--work DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from builder.release.assemble.trec import TrecQrelsWriter
from builder.release.assemble.writer import RollingWriter
from generation.labels.trec_qrels import BadLine, read_trec_qrels

BATCH = 262_144


def batches(rows: int, seed: int = 0):
    """Question after question: its 19 candidates (random ClueWeb22-B ids) judged for each of its 19 sub-questions,
    in that order, as the judge stage writes them (the paper: 18.9 judgments per sub-question)."""
    rng = np.random.default_rng(seed)
    for start in range(0, rows, BATCH):
        n = min(BATCH, rows - start)
        index = np.arange(start, start + n)
        question = index // 361
        subq = pc.binary_join_element_wise(
            pa.array((1_000_000 + question).astype(str)), pa.array(((index // 19) % 19).astype(str)), "-"
        )
        doc = (question * 2_654_435_761 + (index % 19) * 40_503_301) % 87_000_000  # the same 19 per question
        docid = pa.array([f"clueweb22-en{d // 1_000_000:04d}-{(d // 10_000) % 100:02d}-{d % 10_000:05d}" for d in doc])
        yield pa.table({"query-id": subq, "corpus-id": docid, "score": pa.array(rng.integers(0, 6, n), pa.int32())})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=24_316_320)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-trec-"))
    work.mkdir(parents=True, exist_ok=True)
    console = Console()
    try:
        parquet = RollingWriter(work / "parquet", "test", "qrels", 50_000_000)
        trec = TrecQrelsWriter(work / "test.qrels.txt")
        seconds = {"parquet": 0.0, "trec": 0.0}
        for table in batches(args.rows):
            for name, writer in (("parquet", parquet), ("trec", trec)):
                start = time.perf_counter()
                writer.write(table)
                seconds[name] += time.perf_counter() - start
        for name, writer in (("parquet", parquet), ("trec", trec)):
            start = time.perf_counter()
            files = writer.close()
            seconds[name] += time.perf_counter() - start
            if name == "parquet":
                parquet_files = files
        read = {}
        start = time.perf_counter()
        rows = sum(pq.ParquetFile(p).read(columns=["query-id", "corpus-id", "score"]).num_rows for p in parquet_files)
        read["parquet"] = (time.perf_counter() - start, rows)
        start = time.perf_counter()
        failures: list[BadLine] = []
        rows = sum(t.num_rows for t in read_trec_qrels(work / "test.qrels.txt", failures.append))
        read["trec"] = (time.perf_counter() - start, rows)
        assert not failures and read["trec"][1] == read["parquet"][1] == args.rows, (failures, read)

        sizes = {
            "parquet": sum(p.stat().st_size for p in parquet_files),
            "trec": (work / "test.qrels.txt").stat().st_size,
        }
        table = Table(title=f"{args.rows:,} qrels rows")
        for column in ("file", "write s", "read s", "MB", "rows/s written", "rows/s read"):
            table.add_column(column, justify="left" if column == "file" else "right")
        for name in ("parquet", "trec"):
            table.add_row(
                name,
                f"{seconds[name]:.1f}",
                f"{read[name][0]:.1f}",
                f"{sizes[name] / 1e6:,.0f}",
                f"{args.rows / seconds[name]:,.0f}",
                f"{args.rows / read[name][0]:,.0f}",
            )
        console.print(table)
        console.print(f"TREC / Parquet size: {sizes['trec'] / sizes['parquet']:.1f}x")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
