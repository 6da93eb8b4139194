"""A release of imported labels (`import-labels`, generation/stages/import_labels.py): what the import recorded,
gathered from the judgment shards' completion records into the manifest and the card (`validate` checks it against
the data: builder/release/validate/imported.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from builder.release.assemble.lineage import judgment_records
from builder.release.contract import ImportedFile, ImportRecord
from generation.labels.account import ImportAccount, OtherTextAccount, read_account

# what a release of imported labels lacks that a release the kit judged has (the card and manifest state it)
NOT_PRODUCED = (
    "the judge prompt: no prompt text or prompt hash (the kit did not build the requests)",
    "pool provenance: bm25_rank, rerank_rank and source are null (the kit did not retrieve, rerank or pool)",
    "probs and expected (no distribution), and raw where the files hold no judge text",
)


def summed(counters) -> dict:
    """Count dicts (None for none) added up, keys sorted."""
    total: Counter[str] = Counter()
    for counter in counters:
        total.update(counter or {})
    return dict(sorted(total.items()))


def import_record(folders: list[Path]) -> ImportRecord | None:
    """The imports of these judgment folders as one account (files merged by sha256; counts summed over shards),
    or None when the kit's own judge made them."""
    accounts = [(path, (r.extra or {}).get("imported")) for path, r in judgment_records(folders)]
    imports = [read_account(path, account) for path, account in accounts if account is not None]
    if not imports:
        return None
    files: dict[str, ImportedFile] = {}
    for record in imports:
        for f in record.files:
            if f.sha256 not in files:  # the same content under any name or shard: one entry
                files[f.sha256] = ImportedFile(
                    name=f.name, sha256=f.sha256, bytes=f.bytes, format=record.format, lines=f.lines, rows=0,
                    duplicates=0, rejected=0
                )  # fmt: skip
            entry = files[f.sha256]
            entry.rows += f.rows
            entry.duplicates += f.duplicates
            entry.rejected += f.rejected
    return ImportRecord(
        judges=sorted({r.judge for r in imports}),
        formats=sorted({r.format for r in imports}),
        parsers=sorted({r.parser for r in imports if r.parser}),
        files=sorted(files.values(), key=lambda f: (f.name, f.sha256)),
        rows=sum(r.rows for r in imports),
        duplicates=sum(r.duplicates for r in imports),
        rejected=summed(r.rejected for r in imports),
        statuses=summed(r.statuses for r in imports),
        documents=summed(r.documents for r in imports),
        clicked_unknown=sum(r.clicked_unknown for r in imports),
        incomplete_documents=sum(r.incomplete_documents for r in imports),
        graded_on_other_text=other_text_account(imports),
        not_produced_by_the_kit=list(NOT_PRODUCED),
    )


def other_text_account(imports: list[ImportAccount]) -> OtherTextAccount | None:
    """The authors' clicked-pass defect as the imports found it (generation/labels/authors_pass.py), summed over shards;
    None when no import checked it (not crux-ratings, or no --corpus)."""
    found = [r.graded_on_other_text.model_dump() for r in imports if r.graded_on_other_text is not None]
    return OtherTextAccount(**summed(found)) if found else None


def imported_line(imported: ImportRecord) -> str:
    """One line for a commit message: what was imported, from which files."""
    files = ", ".join(f"{f.name} (sha256 {f.sha256})" for f in imported.files)
    return (
        f"Labels imported ({', '.join(imported.formats)}; no prompt, no pool provenance) from {files}, "
        f"judge: {'; '.join(imported.judges)}."
    )
