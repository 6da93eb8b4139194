"""The texts a file holds, in every form the push's scan reads them (builder/training/text_scan.py).

A file's bytes are read as:

- stored: all of it when it is UTF-8 (a README, a JSON config, a vocabulary), else its runs of RUN_CHARS or more
  printable ASCII bytes (the header of a weights file);
- UTF-16, little- and big-endian, from an even or an odd byte: runs of RUN_CHARS or more code units of Latin text
  (ASCII, Latin-1 and general punctuation, U+2000-U+206F);
- base64, standard or URL-safe, padded or not, on one line or wrapped: every run of B64_CHARS or more of its alphabet
  in a text above, decoded from each of its first four characters (a run in a binary file may start early);
- gzip: every gzip member (its magic `1f 8b 08`, anywhere in the bytes), decompressed, and read to where it breaks
  off when it is cut.

JSON and HTML escapes are undone in every text. What base64 or gzip decodes is read again the same way, up to DEPTH
layers (base64 of gzip of UTF-16 is three), and at most `DecodeBudget.limit` decoded bytes a file (DECODED_BYTES by
default); a file with more is reported as not read whole (`DecodeBudget.exceeded`), never passed as clean. A large
file is read through a memory map, READ_BYTES at a time, each window overlapping the next by OVERLAP bytes.

Not read: other compressions (zlib or raw deflate without a gzip header, zip, bzip2, xz, zstd), other encodings
(UTF-32, hex, percent-encoding, ROT13, any cipher), UTF-16 text outside those Latin ranges, text cut into pieces
shorter than RUN_CHARS, and text held as numbers (token ids, the weights' own values).
"""

from __future__ import annotations

import binascii
import html
import mmap
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

READ_BYTES = 16 << 20  # a window of a large file (the weights)
OVERLAP = 1 << 16  # a text crossing a window's end is read whole in the next window, up to this long
RUN_CHARS = 24  # printable characters in a row that count as text in a binary file (random bytes: ~1e-10 of the time)
B64_CHARS = 32  # base64 characters in a row worth decoding: 24 bytes, about four words
DEPTH = 3  # layers of base64 and gzip decoded, one inside the other
DECODED_BYTES = 256 << 20  # decoded bytes read from one file at most
# what the push says it scanned, and what it cannot see (the module docstring, in one line each)
FORMS_READ = f"as stored, as UTF-16 (LE and BE), and inside base64 and gzip, up to {DEPTH} layers deep"
FORMS_NOT_READ = (
    "text in another compression (zlib, zip, bzip2, xz, zstd) or encoding (UTF-32, hex, percent-encoding, a cipher), "
    f"in pieces of under {RUN_CHARS} characters, or held as numbers (token ids, weights)"
)
GZIP_MAGIC = (0x1F, 0x8B, 0x08)  # RFC 1952: ID1, ID2, CM = deflate
GUNZIP_PIECE = 1 << 16
ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[nrtbf\"/\\])")
SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": " ", "f": " ", '"': '"', "/": "/", "\\": "\\"}
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}(?:[\r\n]+[A-Za-z0-9+/_-]{16,})*")  # wrapped lines: 16 or more each
URL_SAFE = str.maketrans("-_", "+/")


def _text_units() -> np.ndarray:
    units = np.zeros(1 << 16, bool)
    units[[0x09, 0x0A, 0x0D]] = True
    units[0x20:0x7F] = units[0xA0:0x100] = units[0x2000:0x2070] = True
    return units


TEXT_UNITS = _text_units()  # UTF-16 code units read as text
PRINTABLE = TEXT_UNITS[:0x100].copy()
PRINTABLE[0x7F:] = False  # bytes read as text in a binary file: printable ASCII, tab and line ends


@dataclass
class DecodeBudget:
    """The decoded bytes one file may still produce; `exceeded` once it had more to give."""

    limit: int = DECODED_BYTES
    exceeded: bool = False

    def spend(self, size: int) -> bool:
        """Whether `size` more decoded bytes may be read (they are counted), else the budget is exceeded."""
        if size > self.limit:
            self.exceeded = True
            return False
        self.limit -= size
        return True


def file_texts(path: Path, budget: DecodeBudget) -> Iterator[str]:
    """The texts of the file at `path`, in every form above."""
    with open(path, "rb") as f:
        if not f.seek(0, 2):
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield from _texts(data, 0, budget)


def _texts(data: bytes | mmap.mmap, depth: int, budget: DecodeBudget) -> Iterator[str]:
    for window in _windows(data):
        for text in (*_stored(window), *_utf16(window)):
            text = html.unescape(ESCAPE.sub(_unescape, text))
            yield text
            if depth < DEPTH:
                for decoded in _base64(text, budget):
                    yield from _texts(decoded, depth + 1, budget)
    if depth < DEPTH:
        for offset in _gzip_offsets(data):
            yield from _texts(_gunzip(data, offset, budget), depth + 1, budget)


def _windows(data: bytes | mmap.mmap) -> Iterator[bytes]:
    for start in range(0, len(data), READ_BYTES):
        yield data[start : start + READ_BYTES + OVERLAP]


def _unescape(match: re.Match) -> str:
    code = match.group(1)
    return chr(int(code[1:], 16)) if code.startswith("u") else SIMPLE_ESCAPES[code]


def _runs(mask: np.ndarray, length: int) -> list[tuple[int, int]]:
    """(start, end) of every run of True in `mask` at least `length` long. Such a run covers a whole block of
    length // 2, so only the rare full blocks are followed out to the run's ends (random bytes have almost none)."""
    block = max(1, length // 2)
    count = len(mask) // block
    full = np.flatnonzero(mask[: count * block].reshape(count, block).all(axis=1))
    if not len(full):
        return []
    breaks = np.flatnonzero(np.diff(full) > 1)
    firsts, lasts = np.concatenate([full[:1], full[breaks + 1]]), np.concatenate([full[breaks], full[-1:]])
    runs = []
    for first, last in zip(firsts.tolist(), lasts.tolist()):
        start, end = first * block, (last + 1) * block
        while start and mask[start - 1]:  # into the block before, which is not full: fewer than `block` steps
            start -= 1
        while end < len(mask) and mask[end]:
            end += 1
        if end - start >= length:
            runs.append((start, end))
    return runs


def _stored(window: bytes) -> list[str]:
    """All of the window when it is UTF-8 (a character cut at its end left to the next window), else its runs of
    printable ASCII."""
    try:
        return [window.decode("utf-8")]
    except UnicodeDecodeError as e:
        if e.reason == "unexpected end of data" and e.start >= len(window) - 3:
            return [window[: e.start].decode("utf-8")]
    return [window[a:b].decode("ascii") for a, b in _runs(PRINTABLE[np.frombuffer(window, np.uint8)], RUN_CHARS)]


def _utf16(window: bytes) -> list[str]:
    """The runs of Latin UTF-16 text in the window: little- and big-endian, from an even and from an odd byte. Each
    such code unit's high byte is 0x00 or 0x20: runs of those bytes are found first, then checked unit by unit."""
    data, found = np.frombuffer(window, np.uint8), []
    latin_high = (data == 0x00) | (data == 0x20)
    for first in (0, 1):
        units = (len(data) - first) // 2
        for high in (0, 1):  # big-endian: the high byte first
            at_high, at_low = first + high, first + 1 - high
            for a, b in _runs(latin_high[at_high : at_high + 2 * units : 2], RUN_CHARS):
                code = data[at_low + 2 * a : at_low + 2 * b : 2].astype(np.uint16)
                code |= data[at_high + 2 * a : at_high + 2 * b : 2].astype(np.uint16) << 8
                found += [
                    code[c:d].astype("<u2").tobytes().decode("utf-16-le") for c, d in _runs(TEXT_UNITS[code], RUN_CHARS)
                ]
    return found


def _base64(text: str, budget: DecodeBudget) -> Iterator[bytes]:
    """The bytes of every base64 run of `text`, decoded from each of its first four characters."""
    for match in BASE64_RUN.finditer(text):
        run = "".join(match.group().split()).translate(URL_SAFE)
        if len(run) < B64_CHARS:
            continue
        for start in range(4):
            usable = run[start : start + (len(run) - start) // 4 * 4]
            if not budget.spend(len(usable) // 4 * 3):
                return
            yield binascii.a2b_base64(usable)


def _gzip_offsets(data: bytes | mmap.mmap) -> list[int]:
    found: set[int] = set()
    for start in range(0, len(data), READ_BYTES):
        window = np.frombuffer(data[start : start + READ_BYTES + len(GZIP_MAGIC) - 1], np.uint8)
        hit = (window[:-2] == GZIP_MAGIC[0]) & (window[1:-1] == GZIP_MAGIC[1]) & (window[2:] == GZIP_MAGIC[2])
        found.update((np.flatnonzero(hit) + start).tolist())
    return sorted(found)


def _gunzip(data: bytes | mmap.mmap, offset: int, budget: DecodeBudget) -> bytes:
    """The gzip member at `offset`, decompressed up to its end, to where it breaks off, or to the budget's end."""
    member, out, position = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), bytearray(), offset
    try:
        while not member.eof and position < len(data):
            piece = data[position : position + GUNZIP_PIECE]
            position += len(piece)
            while piece and not member.eof:
                if not budget.limit:
                    budget.exceeded = True
                    return bytes(out)
                decoded = member.decompress(piece, budget.limit)
                budget.spend(len(decoded))
                out += decoded
                piece = member.unconsumed_tail
    except zlib.error:
        pass  # not gzip after all (three bytes alike by chance), or cut: what came before the break is read
    return bytes(out)
