"""Read chosen documents of a ClueWeb22 txt tree by ClueWeb22-ID, touching only their files.

The published layout (lemurproject/ClueWeb22, ClueWeb22Api.py `get_base_filename_by_id` and `get_json_record`):
`clueweb22-en0000-01-00004` lives in `txt/en/en00/en0000/en0000-01.json.gz`, one JSON record per line, record 4
counting from 0. Beside it, `en0000-01.offset` holds one `'{:010d}\\n'` byte offset per record plus one closing
offset: record i is the gzip member between offsets i and i+1, so it is read with one seek and one small
decompression. Without an offset file the record is found by streaming the file's lines up to the last one wanted.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from generation.errors import InputError
from generation.stages.corpus import parse_line

# ClueWeb22-ID: clueweb22-<lang><stream:2><subdir:2>-<file:2>-<record:5> (lemurproject/ClueWeb22's ClueWeb22Docs
# `cwid_regex` names the languages)
CLUEWEB22_ID = re.compile(
    r"^clueweb22-(?P<lang>de|en|es|fr|it|ja|nl|pl|pt|zh_chs|other)"
    r"(?P<stream>\d{2})(?P<subdir>\d{2})-(?P<file>\d{2})-(?P<record>\d{5})$"
)
OFFSET_ENTRY = len(f"{0:010d}\n")  # 11 bytes, as ClueWeb22Api.py reads them


@dataclass(frozen=True)
class Found:
    docid: str
    text: str | None  # None: missing, `reason` says why
    url_hash: str | None = None
    reason: str | None = None


def txt_root(copy: Path) -> Path:
    """The `txt` folder of a ClueWeb22 copy given as its root (holding txt/) or as txt/ itself."""
    copy = Path(copy)
    return copy / "txt" if (copy / "txt").is_dir() else copy


def json_path(root: Path, key: str) -> Path:
    lang_stream_subdir = key.split("-")[0]  # en0000
    lang = re.match(r"[a-z_]+", lang_stream_subdir).group(0)
    stream = lang_stream_subdir[: len(lang) + 2]  # en00
    return root / lang / stream / lang_stream_subdir / f"{key}.json.gz"


def _record(line: bytes, docid: str, path: Path, line_number: int) -> Found:
    """The record at the line `docid` names, parsed as the corpus stage parses ClueWeb22 txt (an InputError naming
    the file and line when it is not one)."""
    doc = parse_line(line, path, line_number)
    if doc["docid"] != docid:
        return Found(docid, None, reason="other_id")
    if not doc["text"].strip():
        return Found(docid, None, reason="empty_text")
    return Found(docid, doc["text"], doc["url_hash"])


def _by_offsets(path: Path, offsets: Path, wanted: list[tuple[int, str]]) -> Iterator[Found]:
    with open(offsets, "rb") as index, open(path, "rb") as data:
        for record, docid in wanted:
            index.seek(record * OFFSET_ENTRY)
            pair = index.read(2 * OFFSET_ENTRY).split()
            if len(pair) < 2:
                yield Found(docid, None, reason="no_line")
                continue
            start, end = int(pair[0]), int(pair[1])
            data.seek(start)
            try:
                line = gzip.decompress(data.read(end - start))
            except (OSError, EOFError, zlib.error) as e:
                raise InputError(
                    path,
                    record + 1,
                    f"bytes {start}-{end} (from {offsets.name}) are not a gzip member "
                    f"({e}): the offset file does not belong to this file",
                    record_id=docid,
                ) from None
            yield _record(line, docid, path, record + 1)


def _by_streaming(path: Path, wanted: list[tuple[int, str]]) -> Iterator[Found]:
    pending = iter(wanted)
    record, docid = next(pending)
    lineno = -1
    try:
        with gzip.open(path, "rb") as f:
            for lineno, line in enumerate(f):
                while lineno == record:
                    yield _record(line, docid, path, lineno + 1)
                    record, docid = next(pending, (None, None))
                    if record is None:
                        return
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(path, lineno + 1, f"not a readable gzip file ({e})") from None
    while record is not None:
        yield Found(docid, None, reason="no_line")
        record, docid = next(pending, (None, None))


def read_file_records(root: Path, key: str, wanted: list[tuple[int, str]], use_offsets: bool = True) -> Iterator[Found]:
    """The documents `wanted` ((record number, docid), sorted by record) of one ClueWeb22 file, in that order."""
    path = json_path(root, key)
    if not path.is_file():
        yield from (Found(docid, None, reason="no_file") for _, docid in wanted)
        return
    offsets = path.with_name(f"{key}.offset")
    if use_offsets and offsets.is_file():
        yield from _by_offsets(path, offsets, wanted)
    else:
        yield from _by_streaming(path, wanted)
