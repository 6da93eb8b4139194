"""`researchy-subq texts` over damaged `.offset` files: each record read at an offset is checked
against the ClueWeb22-ID expected there; on a mismatch the file is read by streaming and the offset file is named as
wrong. A damaged gzip member of the data is blamed on the data file, not on the offset file.

The copy is a ClueWeb22 txt tree of the published shape (builder/standins/clueweb22_texts.py `write_tree`: one gzip
member a record, `.offset` files of '{:010d}\\n' entries, lemurproject/ClueWeb22 ClueWeb22Api.py)."""

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from builder.standins.clueweb22_texts import write_release_stub, write_tree
from builder.training.texts import write_texts
from generation.errors import InputError

KEY = "en0000-04"
RECORDS = 6
DOCIDS = [f"clueweb22-{KEY}-{i:05d}" for i in range(RECORDS)]


@pytest.fixture
def copy(tmp_path) -> Path:
    write_tree(tmp_path / "copy", {KEY: RECORDS}, words=20)
    return tmp_path / "copy"


def data_path(copy: Path) -> Path:
    return copy / "txt/en/en00/en0000" / f"{KEY}.json.gz"


def offset_path(copy: Path) -> Path:
    return data_path(copy).with_name(f"{KEY}.offset")


def offsets_of(copy: Path) -> list[int]:
    return [int(x) for x in offset_path(copy).read_text().split()]


def write_offsets(copy: Path, entries: list) -> None:
    offset_path(copy).write_text("".join(e if isinstance(e, str) else f"{e:010d}\n" for e in entries))


def written(out: Path) -> dict[str, str]:
    table = pq.read_table(sorted(out.glob("texts-*.parquet")))
    return dict(zip(table["docid"].to_pylist(), table["full_text"].to_pylist()))


def originals(copy: Path) -> dict[str, str]:
    with gzip.open(data_path(copy), "rt") as f:
        return {r["ClueWeb22-ID"]: r["Clean-Text"] for r in map(json.loads, f)}


def release_of(tmp_path: Path) -> Path:
    return write_release_stub(tmp_path / "release", DOCIDS)


def check_streamed_and_named(copy: Path, tmp_path: Path, what: str):
    texts = originals(copy)
    summary = write_texts(release_of(tmp_path), copy, tmp_path / "out")
    assert written(tmp_path / "out") == texts  # every record found, none listed missing
    assert summary.written == RECORDS and not summary.missing
    assert list(summary.wrong_offsets) == [str(offset_path(copy))]
    assert what in summary.wrong_offsets[str(offset_path(copy))]
    return summary


def test_a_non_numeric_offset_line_names_the_offset_file_and_streams(copy, tmp_path):
    entries = offsets_of(copy)
    entries[3] = "not-a-num\n".rjust(11)
    write_offsets(copy, entries)
    check_streamed_and_named(copy, tmp_path, "line 4")


def test_shifted_offsets_name_the_offset_file_instead_of_listing_documents_missing(copy, tmp_path):
    entries = offsets_of(copy)
    write_offsets(copy, entries[1:] + [entries[-1]])  # each record's start is the next one's
    check_streamed_and_named(copy, tmp_path, "clueweb22-en0000-04-00001")


def test_a_short_offset_file_names_the_offset_file_instead_of_listing_documents_missing(copy, tmp_path):
    write_offsets(copy, offsets_of(copy)[:3])  # the offsets of records 0 and 1 only
    check_streamed_and_named(copy, tmp_path, "ends")


def test_a_consistent_short_file_lists_its_records_missing_and_blames_no_offset_file(copy, tmp_path):
    """The data file ends where its offset file says: a record past it is `no_line`, and no offset file is wrong."""
    release = write_release_stub(tmp_path / "release", [*DOCIDS, f"clueweb22-{KEY}-{RECORDS + 2:05d}"])
    summary = write_texts(release, copy, tmp_path / "out")
    assert summary.written == RECORDS and dict(summary.missing) == {"no_line": 1}
    assert summary.wrong_offsets == {}


def test_a_damaged_gzip_member_is_blamed_on_the_data_file_not_the_offset_file(copy, tmp_path):
    entries, path = offsets_of(copy), data_path(copy)
    data = bytearray(path.read_bytes())
    data[entries[2] : entries[3]] = b"\xff" * (entries[3] - entries[2])
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as raised:
        write_texts(release_of(tmp_path), copy, tmp_path / "out")
    message = str(raised.value)
    assert f"{KEY}.json.gz:3" in message and "offset" not in message


def test_the_cli_names_the_wrong_offset_file_on_stderr(copy, tmp_path):
    from builder.cli.main import app

    entries = offsets_of(copy)
    write_offsets(copy, entries[1:] + [entries[-1]])
    result = CliRunner().invoke(
        app, ["texts", str(release_of(tmp_path)), "--from", str(copy), "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    assert f"{RECORDS:,} of {RECORDS:,} documents written" in result.stdout
    assert str(offset_path(copy)) in result.stderr and "wrong" in result.stderr
    assert str(offset_path(copy)) not in result.stdout
