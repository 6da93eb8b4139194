"""The training sampler (builder/training/sampler.py), one epoch at each batch size: rows a batch, share of rows used,
in-batch negatives judged >= the answer level ("false") or between the levels ("between"), pairs of rows of one
question in a batch, and the sampler's CPU time.

- on a release's train rows (`--release` and the `--training-files` folder `training-files` wrote from it): every
  batching `researchy-subq train` compares (file order, sentence-transformers' random and NO_DUPLICATES samplers,
  the kit's with drop_last False and True);
- else on rows shaped as the paper's (builder/standins/paper_shaped.py: `--questions` questions of 14 sub-questions and
  19 judged documents, Table 1's level mix, one row per positive): the kit's sampler.

Usage: python scripts/bench_sampler.py [--questions 10000] [--batch-sizes 32,64,128] [--seed 0]
       python scripts/bench_sampler.py --release R --training-files F [--profile demo] [--batch-sizes 4,8,16,32,64]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from builder.training.sampler import count_in_batch

COLUMNS = ("batch size", "batching", "batches", "rows a batch", "rows used", "false", "between", "pairs", "CPU s")


def release_batchings(args, batch_size: int) -> tuple[int, dict]:
    from builder.training.recipe import batchings, training_rows
    from generation.profiles.profile import load_profile

    if not hasattr(args, "rows"):
        args.rows = training_rows(args.release, args.training_files, load_profile(args.profile))
    start = time.process_time()
    found = batchings(args.rows, batch_size, args.seed)
    return len(args.rows.guard), {name: (b, time.process_time() - start) for name, b in found.items()}


def shaped_batchings(args, batch_size: int) -> tuple[int, dict]:
    from builder.standins.paper_shaped import paper_shaped_guard

    if not hasattr(args, "guard"):
        args.guard = paper_shaped_guard(args.questions, args.seed)
    rows, found = list(range(len(args.guard))), {}
    for drop_last in (False, True):
        sampler = args.guard.batch_sampler(rows, batch_size, drop_last, generator=torch.Generator(), seed=args.seed)
        start = time.process_time()
        batches = sampler.batches_of_epoch()
        found[f"question apart (ours){', drop_last' if drop_last else ''}"] = (batches, time.process_time() - start)
    return len(rows), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=Path)
    parser.add_argument("--training-files", type=Path)
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--batch-sizes", default=None, help="comma-separated (default 4,8,16,32,64 / 32,64,128)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    on_release = args.release is not None
    sizes = args.batch_sizes or ("4,8,16,32,64" if on_release else "32,64,128")
    load = os.getloadavg()
    table = Table(
        title=f"one epoch, seed {args.seed}; {os.cpu_count()} cores, load {'/'.join(f'{x:.1f}' for x in load)}"
    )
    for column in COLUMNS:
        table.add_column(column, justify="right")
    for batch_size in (int(b) for b in sizes.split(",")):
        rows, found = (release_batchings if on_release else shaped_batchings)(args, batch_size)
        guard = args.rows.guard if on_release else args.guard
        for name, (batches, seconds) in found.items():
            counted = count_in_batch(batches, guard)
            table.add_row(
                str(batch_size),
                name,
                f"{counted.batches:,}",
                f"{counted.rows_per_batch:.1f}",
                f"{counted.rows / rows:.2%}",
                f"{counted.false_negatives:,}",
                f"{counted.between:,}",
                f"{counted.same_question_pairs:,}",
                f"{seconds:.1f}" if not on_release else "",
            )
    Console(width=200).print(table)
    print(f"{rows:,} rows; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
