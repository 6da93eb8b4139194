"""Writes the generated reference pages of docs/reference/ (profiles, stages, CLI, columns) from the code;
`--check` writes nothing and exits 1 naming every stale page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.cli.reference import stale_reference, write_reference

FOLDER = Path(__file__).resolve().parent.parent / "docs" / "reference"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page differs from what the code generates")
    args = parser.parse_args()
    if args.check:
        stale = stale_reference(FOLDER)
        for path in stale:
            print(f"{path}: stale; run python scripts/make_reference.py", file=sys.stderr)
        return 1 if stale else 0
    for path in write_reference(FOLDER):
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
