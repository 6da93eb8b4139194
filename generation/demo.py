"""Every stage on the bundled sample, in order; each call is what the matching CLI command runs."""
from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq

from generation.progress import console
from generation.researchy import read_researchy
from generation.sample import RESEARCHY


def rows(path: Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows


def run_demo(out: Path) -> list[tuple[str, Path, int | None]]:
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    written: list[tuple[str, Path, int | None]] = []
    for split, source in RESEARCHY.items():
        console.rule(f"questions ({split}): researchy-subq questions --input {source} --split {split} "
                     f"--out {out / 'questions' / split}")
        summary = read_researchy([source], out / "questions" / split, split=split)
        written += [(f"questions/{split}", p, rows(p)) for p in summary.outputs]
    return written
