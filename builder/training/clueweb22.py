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
from collections.abc import Callable, Iterator
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
    text: str
    url_hash: str | None = None


@dataclass(frozen=True)
class Missing:
    """A wanted document whose text the copy does not give, and why (`no_file`, `no_line`, `empty_text`, ...)."""

    docid: str
    reason: str


def txt_root(copy: Path) -> Path:
    """The `txt` folder of a ClueWeb22 copy given as its root (holding txt/) or as txt/ itself."""
    copy = Path(copy)
    return copy / "txt" if (copy / "txt").is_dir() else copy


def json_path(root: Path, key: str) -> Path:
    lang_stream_subdir = key.split("-")[0]  # en0000
    lang = lang_stream_subdir.rstrip("0123456789")  # en (CLUEWEB22_ID: letters, then four digits)
    stream = lang_stream_subdir[: len(lang) + 2]  # en00
    return root / lang / stream / lang_stream_subdir / f"{key}.json.gz"


def _record(doc: dict, docid: str) -> Found | Missing:
    """What the record at the line `docid` names gives (parsed as the corpus stage parses ClueWeb22 txt)."""
    if doc["docid"] != docid:
        return Missing(docid, "other_id")
    if not doc["text"].strip():
        return Missing(docid, "empty_text")
    return Found(docid, doc["text"], doc["url_hash"])


@dataclass(frozen=True)
class OffsetMismatch:
    """A record the offset file does not lead to: what reading at its offsets gave (None: nothing readable), and why."""

    index: int  # position in the file's wanted list
    found: Found | Missing | None
    why: str


def _offset_entry(raw: bytes, line: int) -> int | str:
    """One entry of an offset file, or what is wrong with it."""
    text = raw.strip()
    return int(text) if text.isdigit() else f"line {line} is {raw.decode('latin-1')!r}, not a byte offset"


def _last_offset(index, size: int) -> int | None:
    index.seek(max(0, size - 2 * OFFSET_ENTRY))
    tail = index.read().split()
    return int(tail[-1]) if tail and tail[-1].isdigit() else None


def _by_offsets(path: Path, offsets: Path, wanted: list[tuple[int, str]]) -> Iterator[Found | Missing | OffsetMismatch]:
    """The wanted records read at their offsets, each checked against the ClueWeb22-ID expected there; the first that
    is not where the offsets say is an OffsetMismatch, and nothing is read after it."""
    data_size, index_size = path.stat().st_size, offsets.stat().st_size
    with open(offsets, "rb") as index, open(path, "rb") as data:
        for position, (record, docid) in enumerate(wanted):
            index.seek(record * OFFSET_ENTRY)
            pair = [_offset_entry(raw, record + 1 + i) for i, raw in enumerate(index.read(2 * OFFSET_ENTRY).split())]
            if len(pair) < 2:
                last = _last_offset(index, index_size)
                if last == data_size:  # the offsets cover the whole file: it has no such record
                    yield Missing(docid, "no_line")
                    continue
                yield OffsetMismatch(
                    position,
                    Missing(docid, "no_line"),
                    f"it ends before record {record}, at offset {last} of the {data_size:,} bytes of {path.name}",
                )
                return
            wrong = next((entry for entry in pair if isinstance(entry, str)), None)
            if wrong is not None:
                yield OffsetMismatch(position, None, wrong)
                return
            start, end = (entry for entry in pair if isinstance(entry, int))  # every entry, none being wrong
            data.seek(start)
            try:
                doc = parse_line(gzip.decompress(data.read(max(0, end - start))), path, record + 1)
            except (OSError, EOFError, zlib.error, InputError) as e:
                yield OffsetMismatch(position, None, f"bytes {start}-{end} are not a ClueWeb22 record ({e})")
                return
            if doc["docid"] != docid:
                yield OffsetMismatch(
                    position, _record(doc, docid), f"bytes {start}-{end} hold {doc['docid']}, not {docid}"
                )
                return
            yield _record(doc, docid)


def _by_streaming(path: Path, wanted: list[tuple[int, str]]) -> Iterator[Found | Missing]:
    pending = iter(wanted)
    record, docid = next(pending)
    lineno = -1
    try:
        with gzip.open(path, "rb") as f:
            for lineno, line in enumerate(f):
                while lineno == record:
                    yield _record(parse_line(line, path, lineno + 1), docid)
                    following = next(pending, None)
                    if following is None:
                        return
                    record, docid = following
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(path, lineno + 2, f"not a readable gzip file ({e})") from None  # the line after the last read
    yield Missing(docid, "no_line")  # the file ends before this record, and before every one still pending
    yield from (Missing(later, "no_line") for _, later in pending)


def read_file_records(
    root: Path,
    key: str,
    wanted: list[tuple[int, str]],
    use_offsets: bool = True,
    wrong_offsets: Callable[[Path, str], object] = lambda offsets, why: None,
) -> Iterator[Found | Missing]:
    """The documents `wanted` ((record number, docid), sorted by record) of one ClueWeb22 file, in that order. Through
    its offset file when there is one (and `use_offsets`); from the first record not where the offsets say, by
    streaming the file, and `wrong_offsets(offset file, why)` is called when streaming finds what the offsets missed."""
    path = json_path(root, key)
    if not path.is_file():
        yield from (Missing(docid, "no_file") for _, docid in wanted)
        return
    offsets = path.with_name(f"{key}.offset")
    if not (use_offsets and offsets.is_file()):
        yield from _by_streaming(path, wanted)
        return
    for found in _by_offsets(path, offsets, wanted):
        if not isinstance(found, OffsetMismatch):
            yield found
            continue
        streamed = _by_streaming(path, wanted[found.index :])
        first = next(streamed)  # a damaged data file raises here, naming itself
        if first != found.found:
            wrong_offsets(offsets, found.why)
        yield first
        yield from streamed
