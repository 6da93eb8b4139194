"""Load a release and each of its configs with `datasets.load_dataset`, as a dataset user does.

A release folder is the Hub repo's files, so the same calls take a local folder or a repo name. Run it on the
release `make demo` writes:

    .venv/bin/python examples/load_release.py --release demo-output/release

It prints each config's splits with their row counts and columns, then Table 1 (judgments per level) from the
default config. A local folder is read afresh each run: `datasets` keys a folder's cache by the folder's name and its
card's YAML, not by its files, so another folder of that name (or this one before a file changed) would be read instead.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections import Counter
from pathlib import Path

from datasets import get_dataset_config_names, get_dataset_split_names, load_dataset
from datasets.exceptions import DatasetsError

from builder.cli.script import run
from builder.cli.support import existing_release
from generation.errors import ArgumentError


def main() -> None:
    parser = argparse.ArgumentParser(description="Load a release and each of its configs.")
    parser.add_argument("--release", default="demo-output/release", help="a release folder or a Hub repo name")
    parser.add_argument("--config", action="append", help="only this config (repeatable; default: every config)")
    args = parser.parse_args()

    release = args.release
    local = Path(release).exists()
    if local and not (existing_release(Path(release)) / "README.md").is_file():
        raise ArgumentError(
            f"{release}: not a release folder (no README.md; `researchy-subq build-release` writes one)"
        )
    # A Hub repo's cache is keyed by its commit. A local folder's is keyed by the folder's name and the card's YAML
    # (datasets/load.py LocalDatasetModuleFactory.get_module hashes dataset_infos and builder_configs, the file
    # patterns; builder.py _relative_data_dir: dataset_name/config_id/version/hash): a fresh cache reads its files.
    cache = tempfile.TemporaryDirectory(prefix="load-release-") if local else contextlib.nullcontext()
    with cache as cache_dir:
        names = loading(release, "its config names", get_dataset_config_names, release)
        unknown = [name for name in args.config or () if name not in names]
        if unknown:
            raise ArgumentError(f"{release}: no config {', '.join(unknown)}; its configs: {', '.join(names)}")
        configs = args.config or names
        print(f"{release}: {len(configs)} configs", file=sys.stderr)
        for name in configs:
            for split in loading(release, name, get_dataset_split_names, release, name):
                rows = loading(
                    release, f"{name}/{split}", load_dataset, release, name, split=split, cache_dir=cache_dir
                )
                print(f"{name:<16} {split:<6} {rows.num_rows:>8,} rows  {', '.join(rows.column_names)}")

        # the default config holds every judgment once; `level` is null for an answer the parser could not read
        judgments = loading(
            release, "judgments/train", load_dataset, release, "judgments", split="train", cache_dir=cache_dir
        )
        levels = Counter(judgments["level"])
    print(f"{'level':>8}  judgments (train)")
    for level in sorted(levels, key=lambda v: -1 if v is None else v):
        print(f"{'unparsed' if level is None else level:>8}  {levels[level]:,}")


def loading(release: str, what: str, call, *args, **kwargs):
    """`call(*args, **kwargs)`; what `datasets` raises on the way is one line naming the release and the config."""
    try:
        return call(*args, **kwargs)
    except (DatasetsError, OSError, ValueError) as e:
        local = Path(release).exists()
        where = release if local else f"{release} (no such folder; read as a Hub repo)"
        cause = f" ({str(e.__cause__).splitlines()[0]})" if e.__cause__ and str(e.__cause__) else ""
        check = f"; `researchy-subq validate {release}` says what is wrong with it" if local else ""
        raise ArgumentError(
            f"{where}: datasets cannot load {what}: {type(e).__name__}: {str(e).splitlines()[0]}{cause}{check}"
        ) from None


if __name__ == "__main__":
    run(main)
