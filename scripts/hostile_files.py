"""The files scripts/hostile.py's bad inputs are made of: JSON lines (gzip or not), raw bytes, Researchy Questions
records, the demo profile with one edit, files cut short, copied folders, and the files several cases share."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from generation.profiles.profile import PROFILE_DIR

GOOD_RECORD: dict[str, Any] = {  # a Researchy Questions record, as JSON gives it
    "id": 7,
    "question": "why do cats purr?",
    "DocStream": [],
    "gpt4_decomposition": {"subquestions": ["- what is purring?", "- when do cats purr?"], "headers": []},
}


def jsonl(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(line + b"\n" for line in lines)
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def raw(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def record(**fields) -> bytes:
    return json.dumps({**GOOD_RECORD, **fields}).encode()


def profile_with(w: Path, name: str, old: str, new: str) -> Path:
    path = w / f"{name}.yaml"
    path.write_text((PROFILE_DIR / "demo.yaml").read_text().replace(old, new, 1))
    return path


def cut_file(path: Path, keep: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def shared_files(w: Path) -> tuple[Path, Path]:
    """A plain file where a folder belongs, and a folder of someone else's work (made again if there)."""
    a_file = w / "a-file.txt"
    a_file.write_text("x")
    foreign = w / "foreign"
    foreign.mkdir(exist_ok=True)
    (foreign / "notes.txt").write_text("someone's work")
    return a_file, foreign
