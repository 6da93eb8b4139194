"""The kit's one reader of TREC qrels files, for everything that reads them: `validate`'s check of a release's
`data/qrels/SPLIT.qrels.txt` (builder/release/assemble/trec.py) and `agreement`'s labels (builder/analysis/labels.py), and
the rules `import-labels --format qrels` reads its lines by (`line_fields`, `is_relevance`).

The format, as trec_eval reads it (usnistgov/trec_eval, get_qrels.c): one judgment a line, `qid iter docno rel`,
"Fields are separated by whitespace, string fields can contain no whitespace", `iter` is ignored. The rules here:

- fields are separated by runs of white space (space, tab, \\v, \\f, \\r: C's isspace, so CRLF lines read too), and
  white space before the first field or after the last is ignored;
- a line has exactly 4 fields; `iter` is any token (trec_eval ignores it; the kit writes 0, which `validate`
  checks of a release's own file); `rel` is an integer (at most 18 digits, a `-` allowed), where trec_eval's atol
  would read `1.5` as 1 and `high` as 0;
- a line whose first character is `#` is a comment and skipped, as trec_eval skips it; a blank line is an error,
  as it is to trec_eval ("Malformed line");
- the text is UTF-8.

A bad line is left out of the rows and handed to the caller's `bad` (its 1-based line number, what is wrong, how
many lines of the same kind its block holds, and the field), which raises or reports it naming the file. The file
is read in blocks of BLOCK_BYTES and parsed with Arrow's compute functions, so a 1 GB file streams in flat memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

COLUMNS = ("query-id", "iteration", "corpus-id", "score")
WHITE_SPACE = " \t\v\f\r"
INTEGER = r"^-?\d{1,18}$"
# Arrow holds a block's lines and their fields at once: 1 MB blocks keep that to some tens of MB at any file size
BLOCK_BYTES = 1 << 20
_SEPARATOR = re.compile(f"[{WHITE_SPACE}]+")
_INTEGER = re.compile(INTEGER)


def line_fields(text: str) -> list[str] | None:
    """One line's fields by the rules above, for a reader that takes a line at a time (`import-labels --format
    qrels`, which rejects each bad line on its own): None for a comment line."""
    if text.startswith("#"):
        return None
    trimmed = text.strip(WHITE_SPACE + "\n")
    return _SEPARATOR.split(trimmed) if trimmed else []


def is_relevance(value: str) -> bool:
    return _INTEGER.match(value) is not None


@dataclass(frozen=True)
class BadLine:
    line: int  # 1-based, the first such line of its block
    problem: str
    count: int  # lines of this kind in the block, this one included
    field: str | None = None  # "rel" for a relevance that is not an integer


def read_trec_qrels(path: Path, bad: Callable[[BadLine], None]) -> Iterator[pa.Table]:
    """Tables of the file's good lines in order: query-id, iteration, corpus-id (strings), score (int64) and line
    (its 1-based line number); each kind of bad line in a block goes to `bad` once, in the order of the lines."""
    base, pending = 0, []  # pending: the pieces of a line not yet ended (a list: no copying a long line again)
    with open(path, "rb") as f:
        while True:
            block = f.read(BLOCK_BYTES)
            cut = block.rfind(b"\n") + 1  # 0: no line ends in the block
            if block and not cut:
                pending.append(block)
                continue
            data = b"".join([*pending, block[:cut]]) if block else b"".join(pending)
            pending = [block[cut:]]
            if data:
                table, lines = parse_lines(data, base, bad)
                base += lines
                if table.num_rows:
                    yield table
            if not block:
                return


def parse_lines(data: bytes, base: int, bad: Callable[[BadLine], None]) -> tuple[pa.Table, int]:
    """The good lines of `data` (whole lines, each but the file's last ending in \\n; the first numbered base + 1)
    as a table, and how many lines."""
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n")) + 1
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    offsets = np.concatenate([[0], ends]).astype(np.int64)  # each line keeps its \n, trimmed below
    lines = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    numbers = np.arange(base + 1, base + len(lines) + 1, dtype=np.int64)
    found: list[BadLine] = []
    try:
        text = lines.cast(pa.large_string())
    except pa.ArrowInvalid:
        values = lines.to_pylist()
        broken = [i for i, v in enumerate(values) if not _utf8(v)]
        found.append(BadLine(int(numbers[broken[0]]), "not UTF-8", len(broken)))
        for i in broken:
            values[i] = b"#"  # left out as a comment is, reported above
        text = pa.array([v.decode("utf-8") for v in values], pa.large_string())
    comment = pc.starts_with(text, "#").to_numpy(zero_copy_only=False)
    trimmed = pc.utf8_trim(text, WHITE_SPACE + "\n")
    if b"  " in data or any(c in data for c in (b"\t", b"\v", b"\f", b"\r")):
        fields = pc.split_pattern_regex(trimmed, "[ \t\v\f\r]+")
    else:  # single spaces only (the kit's own files): the same fields, five times faster
        fields = pc.split_pattern(trimmed, " ")
    counts = np.where(
        pc.equal(trimmed, "").to_numpy(zero_copy_only=False),
        0,
        pc.list_value_length(fields).to_numpy(zero_copy_only=False),
    )
    wrong_count = ~comment & (counts != 4)
    four = pc.filter(fields, pa.array(counts == 4))
    rel = pc.list_element(four, 3) if len(four) else pa.array([], pa.large_string())
    integer = np.zeros(len(lines), bool)
    integer[counts == 4] = pc.match_substring_regex(rel, INTEGER).to_numpy(zero_copy_only=False)
    not_integer = ~comment & (counts == 4) & ~integer
    if wrong_count.any():
        first = int(np.flatnonzero(wrong_count)[0])
        found.append(
            BadLine(
                int(numbers[first]),
                f"{counts[first]} fields, not 4 ({trimmed[first].as_py()[:80]!r})",
                int(wrong_count.sum()),
            )
        )
    if not_integer.any():
        first = int(np.flatnonzero(not_integer)[0])
        value = pc.list_element(fields[first : first + 1], 3)[0].as_py()
        found.append(
            BadLine(int(numbers[first]), f"relevance {value[:40]!r} is not an integer", int(not_integer.sum()), "rel")
        )
    for line in sorted(found, key=lambda b: b.line):
        bad(line)
    good = pa.array(~comment & (counts == 4) & integer)
    kept = pc.filter(fields, good)
    columns = [pc.list_element(kept, i).cast(pa.string()) if len(kept) else pa.array([], pa.string()) for i in range(4)]
    return pa.table(
        [*columns[:3], columns[3].cast(pa.int64()), pa.array(numbers[good.to_numpy(zero_copy_only=False)])],
        names=[*COLUMNS, "line"],
    ), len(lines)


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
