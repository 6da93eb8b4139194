"""A release of imported labels (`import-labels`, generation/stages/import_labels.py): what the import recorded,
gathered from the judgment shards' completion records into the manifest and the card, and checked by `validate`
against the data (`check_import`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.lineage import judgment_records
from generation.schema import IMPORTED_STATUS, IMPORTED_STATUSES

# what a release of imported labels lacks that a release the kit judged has (the card and manifest state it)
NOT_PRODUCED = (
    "the judge prompt: no prompt text or prompt hash (the kit did not build the requests)",
    "pool provenance: bm25_rank, rerank_rank and source are null (the kit did not retrieve, rerank or pool)",
    "probs and expected (no distribution), and raw where the files hold no judge text",
)


def _sum(counters) -> dict:
    total = Counter()
    for counter in counters:
        total.update(counter or {})
    return dict(sorted(total.items()))


def import_record(folders: list[Path]) -> dict | None:
    """The imports of these judgment folders as one account (files merged by sha256; counts summed over shards),
    or None when the kit's own judge made them."""
    imports = [(r.extra or {}).get("imported") for _, r in judgment_records(folders)]
    imports = [i for i in imports if i is not None]
    if not imports:
        return None
    files: dict[str, dict] = {}
    for record in imports:
        for f in record["files"]:
            entry = files.setdefault(
                f["sha256"],
                {
                    "name": f["name"],
                    "sha256": f["sha256"],
                    "bytes": f["bytes"],
                    "format": record["format"],
                    "lines": f["lines"],
                    "rows": 0,
                    "duplicates": 0,
                    "rejected": 0,
                },
            )
            for key in ("rows", "duplicates", "rejected"):
                entry[key] += f[key]
    return {
        "judges": sorted({r["judge"] for r in imports}),
        "formats": sorted({r["format"] for r in imports}),
        "parsers": sorted({r["parser"] for r in imports if r.get("parser")}),
        "files": sorted(files.values(), key=lambda f: (f["name"], f["sha256"])),
        "rows": sum(r["rows"] for r in imports),
        "duplicates": sum(r["duplicates"] for r in imports),
        "rejected": _sum(r["rejected"] for r in imports),
        "statuses": _sum(r["statuses"] for r in imports),
        "documents": _sum(r["documents"] for r in imports),
        "clicked_unknown": sum(r["clicked_unknown"] for r in imports),
        "incomplete_documents": sum(r["incomplete_documents"] for r in imports),
        "graded_on_other_text": other_text_account(imports),
        "not_produced_by_the_kit": list(NOT_PRODUCED),
    }


def other_text_account(imports: list[dict]) -> dict | None:
    """The authors' clicked-pass defect as the imports found it (generation/labels/authors_pass.py), summed over shards;
    None when no import checked it (not crux-ratings, or no --corpus)."""
    found = [r["graded_on_other_text"] for r in imports if r.get("graded_on_other_text") is not None]
    return _sum(found) if found else None


def imported_line(imported: dict) -> str:
    """One line for a commit message: what was imported, from which files."""
    files = ", ".join(f"{f['name']} (sha256 {f['sha256']})" for f in imported.get("files", []))
    return (
        f"Labels imported ({', '.join(imported.get('formats', []))}; no prompt, no pool provenance) from {files}, "
        f"judge: {'; '.join(imported.get('judges', []))}."
    )


CHECK = (
    "imported labels: status `imported` only where manifest.json records an import, with a level; the rows, "
    "statuses, files and judges the import recorded"
)


def check_import(release: Path, manifest: dict, stats: dict, judgment_files: list[Path], card_body: str, check) -> None:
    """A release that records no import has no `imported` status; one that does has exactly the rows and statuses
    its import recorded, no `imported` row without a level, and a card naming the files and judges."""
    statuses = _sum(s["counts"]["status"] for s in stats.values())
    imported = manifest.get("imported")
    if imported is None:
        for status in IMPORTED_STATUSES:
            if statuses.get(status):
                check.fail(
                    f"{statuses[status]:,} judgments have status {status!r}, but manifest.json records no import",
                    statuses[status],
                )
        return
    files = imported.get("files") if isinstance(imported, dict) else None
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and isinstance(f.get("rows"), int) and isinstance(f.get("sha256"), str) for f in files
    ):
        check.fail("manifest.json: `imported` needs `files`, each with its name, sha256 and rows")
        return
    left_out = imported.get("left_out") or {}  # build-release --leave-out-other-text
    judgments = sum(s["judgments"] for s in stats.values())
    kept = sum(f["rows"] for f in files) - sum(left_out.values())
    if kept != judgments or imported.get("rows") != kept + sum(left_out.values()):
        check.fail(
            f"the import recorded {imported.get('rows')!r} rows ({sum(f['rows'] for f in files):,} over its "
            f"files{f', {sum(left_out.values()):,} left out' if left_out else ''}); the release has "
            f"{judgments:,} judgments"
        )
    statuses = {k: v for k, v in sorted((Counter(statuses) + Counter(left_out)).items())}
    if imported.get("statuses") != statuses:
        differ = sorted(
            k
            for k in set(statuses) | set(imported.get("statuses") or {})
            if statuses.get(k) != (imported.get("statuses") or {}).get(k)
        )
        check.fail(f"statuses differ from what the import recorded: {differ}")
    for path in (p for p in judgment_files if p.parent.name == "unparsed"):
        table = pq.read_table(path, columns=["status"])
        n = pc.sum(pc.equal(table["status"], IMPORTED_STATUS)).as_py() or 0  # imported_other_text may lack one
        if n:
            check.fail(f"{path.relative_to(release)}: {n:,} rows with status {IMPORTED_STATUS} and no level", n)
    for name in [*imported.get("judges", []), *(f["sha256"] for f in files), *(f.get("name", "") for f in files)]:
        if name not in card_body:
            check.fail(f"the card does not name the import's {name!r}")
