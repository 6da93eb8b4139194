"""Build training rows with another number of negatives (k), without rebuilding the release.

The release's `hard-negatives` config has k = `training.negatives` negatives a row. `write_training_files`
re-derives the rows from the release's graded lists under another k, with the texts from your own ClueWeb22 copy
(`researchy-subq texts` writes them). `training_rows` then reads them as the `train` command's trainer does:
(anchor, positive, negative_1..k) texts, and the ids its batch sampler keeps apart. Run it on the demo's output:

    .venv/bin/python examples/training_rows.py --release demo-output/release --texts demo-output/texts \
        --out demo-output/training-k5 --negatives 5

It prints the rows per split, the negatives by source and the first training row. A k above the release's may reach
retrieved documents whose texts `researchy-subq texts` wrote only with --all-retrieved: those rows are left out and
counted, and it prints the `texts` command that writes them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.cli.script import run
from builder.cli.support import check_folder_arg, existing_release
from builder.training.files import write_training_files


def main() -> None:
    parser = argparse.ArgumentParser(description="Build training rows with another number of negatives.")
    parser.add_argument("--release", type=Path, default="demo-output/release", help="a release folder")
    parser.add_argument(
        "--texts", type=Path, default="demo-output/texts", help="the folder `researchy-subq texts` wrote"
    )
    parser.add_argument("--out", type=Path, default="demo-output/training-k5", help="folder for the training files")
    parser.add_argument("--negatives", type=int, default=5, help="k, negatives a row")
    parser.add_argument(
        "--fill-order",
        default=None,
        help="where negatives come from, in order, of judged,retrieved_unjudged,other_question (default: the "
        "release's)",
    )
    args = parser.parse_args()

    existing_release(args.release)
    check_folder_arg(args.out, "--out")
    fill_order = tuple(args.fill_order.split(",")) if args.fill_order else None
    print(f"re-deriving the rows with {args.negatives} negatives a row -> {args.out}", file=sys.stderr)
    summary = write_training_files(
        args.release, args.texts, args.out, negatives=args.negatives, formats=("sentence-transformers",),
        fill_order=fill_order,
    )  # fmt: skip
    for line in summary.lines():
        print(line)

    # the trainer's reader imports sentence-transformers and torch: only once the files are written
    from builder.training.recipe import training_rows
    from builder.training.run_settings import release_profile

    rows = training_rows(args.release, summary.out, release_profile(args.release))
    print(f"train: {rows.dataset.num_rows:,} rows, columns {', '.join(rows.dataset.column_names)}")
    if rows.dataset.num_rows:
        first = rows.dataset[0]
        for column, text in first.items():
            print(f"  {column}: {text[:80]!r}")


if __name__ == "__main__":
    run(main)
