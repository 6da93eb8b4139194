"""Load a release and each of its configs with `datasets.load_dataset`, as a dataset user does.

A release folder is the Hub repo's files, so the same calls take a local folder or a repo name. Run it on the
release `make demo` writes:

    .venv/bin/python examples/load_release.py --release demo-output/release

It prints each config's splits with their row counts and columns, then Table 1 (judgments per level) from the
default config.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from datasets import get_dataset_config_names, get_dataset_split_names, load_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description="Load a release and each of its configs.")
    parser.add_argument("--release", default="demo-output/release", help="a release folder or a Hub repo name")
    parser.add_argument("--config", action="append", help="only this config (repeatable; default: every config)")
    args = parser.parse_args()

    configs = args.config or get_dataset_config_names(args.release)
    print(f"{args.release}: {len(configs)} configs", file=sys.stderr)
    for name in configs:
        for split in get_dataset_split_names(args.release, name):
            rows = load_dataset(args.release, name, split=split)
            print(f"{name:<16} {split:<6} {rows.num_rows:>8,} rows  {', '.join(rows.column_names)}")

    # the default config holds every judgment once; `level` is null for an answer the parser could not read
    judgments = load_dataset(args.release, "judgments", split="train")
    levels = Counter(judgments["level"])
    print(f"{'level':>8}  judgments (train)")
    for level in sorted(levels, key=lambda v: -1 if v is None else v):
        print(f"{'unparsed' if level is None else level:>8}  {levels[level]:,}")


if __name__ == "__main__":
    main()
