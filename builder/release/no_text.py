"""Document text never goes into a release folder (ClueWeb22's licence forbids redistributing it).

`researchy-subq texts` and `training-files` write the texts of a user's own licensed copy locally and refuse a folder
inside a release; `validate` (and so `publish`, which validates first) fails a release folder that holds any file
they write, or any other file that carries document text: a corpus or texts Parquet, a BEIR/Tevatron corpus.jsonl,
FlagEmbedding lines, a sentence-transformers (anchor, positive, ...) table.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq

from builder.release.layout import MANIFEST
from generation.errors import ArgumentError

TEXTS_MARKER = "_document_texts.json"  # written at the top of every folder `texts` and `training-files` write
TEXT_TABLES = {b"document_texts", b"corpus", b"n_tuple"}  # schema-module tables that hold document text
SKIPPED = {".git", ".cache"}


def _parquet_has_text(path: Path) -> bool:
    try:
        schema = pq.read_schema(path)
    except Exception:  # noqa: BLE001 - an unreadable file is the readable-files check's to report
        return False
    names = set(schema.names)
    return (
        (schema.metadata or {}).get(b"table") in TEXT_TABLES
        or {"docid", "text"} <= names
        or "full_text" in names
        or {"anchor", "positive"} <= names
    )


def _jsonl_has_text(path: Path) -> bool:
    if path.name in ("corpus.jsonl", "corpus.jsonl.gz"):
        return True
    if path.name.endswith(".gz"):
        return False
    try:
        with open(path, "rb") as f:
            first = json.loads(f.readline() or b"{}")
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and ({"query", "pos"} <= set(first) or {"docid", "text"} <= set(first))


def text_files(folder: Path) -> list[str]:
    """Files under `folder` (paths relative to it) that hold or announce document text."""
    folder = Path(folder)
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
        for name in sorted(files):
            path = Path(top) / name
            if path.is_symlink():
                continue
            if (
                name == TEXTS_MARKER
                or (name.endswith(".parquet") and _parquet_has_text(path))
                or (name.endswith((".jsonl", ".jsonl.gz")) and _jsonl_has_text(path))
            ):
                found.append(str(path.relative_to(folder)))
    return found


def enclosing_release(path: Path) -> Path | None:
    """The release folder `path` is in or is (a folder with manifest.json and data/), or None."""
    path = Path(path).resolve()
    for folder in (path, *path.parents):
        if (folder / MANIFEST).is_file() and (folder / "data").is_dir():
            return folder
    return None


def refuse_release_target(out: Path, release: Path, option: str = "--out") -> None:
    """An ArgumentError when `out` is, or is inside, a release folder (`release` or any other)."""
    out, release = Path(out).resolve(), Path(release).resolve()
    inside = release if out == release or release in out.parents else enclosing_release(out)
    if inside is not None:
        raise ArgumentError(
            f"{option} {out} is inside the release folder {inside}: document texts never go into a "
            "release (ClueWeb22's licence forbids redistributing them); choose a folder outside it"
        )
