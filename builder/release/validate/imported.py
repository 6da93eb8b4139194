"""`validate`'s check of a release of imported labels against what its import recorded (builder/release/assemble/imported.py
gathers the record into the manifest and the card)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.contract import Manifest, SplitStats
from generation.storage.schema import IMPORTED_STATUS, IMPORTED_STATUSES

CHECK = (
    "imported labels: status `imported` only where manifest.json records an import, with a level; the rows, "
    "statuses, files and judges the import recorded"
)


def check_import(
    release: Path, manifest: Manifest, stats: dict[str, SplitStats], judgment_files: list[Path], card_body: str, check
) -> None:
    """A release that records no import has no `imported` status; one that does has exactly the rows and statuses
    its import recorded, no `imported` row without a level, and a card naming the files and judges."""
    statuses: Counter[str] = Counter()
    for s in stats.values():
        statuses.update(s.counts["status"])
    imported = manifest.imported
    if imported is None:
        for status in IMPORTED_STATUSES:
            if statuses.get(status):
                check.fail(
                    f"{statuses[status]:,} judgments have status {status!r}, but manifest.json records no import",
                    statuses[status],
                )
        return
    files = imported.files
    left_out = imported.left_out or {}  # build-release --leave-out-other-text
    judgments = sum(s.judgments for s in stats.values())
    kept = sum(f.rows for f in files) - sum(left_out.values())
    if kept != judgments or imported.rows != kept + sum(left_out.values()):
        check.fail(
            f"the import recorded {imported.rows!r} rows ({sum(f.rows for f in files):,} over its "
            f"files{f', {sum(left_out.values()):,} left out' if left_out else ''}); the release has "
            f"{judgments:,} judgments"
        )
    imported_statuses = {k: v for k, v in sorted((statuses + Counter(left_out)).items())}
    if imported.statuses != imported_statuses:
        differ = sorted(
            k
            for k in set(imported_statuses) | set(imported.statuses)
            if imported_statuses.get(k) != imported.statuses.get(k)
        )
        check.fail(f"statuses differ from what the import recorded: {differ}")
    for path in (p for p in judgment_files if p.parent.name == "unparsed"):
        table = pq.read_table(path, columns=["status"])
        n = pc.sum(pc.equal(table["status"], IMPORTED_STATUS)).as_py() or 0  # imported_other_text may lack one
        if n:
            check.fail(f"{path.relative_to(release)}: {n:,} rows with status {IMPORTED_STATUS} and no level", n)
    for name in [*imported.judges, *(f.sha256 for f in files), *(f.name for f in files)]:
        if name not in card_body:
            check.fail(f"the card does not name the import's {name!r}")
