"""The kit's one TREC qrels reader (generation/labels/trec_qrels.py), through both of its users: `agreement`'s labels
(builder/analysis/labels.py) and `validate`'s check of a release's file (builder/release/assemble/trec.py)."""

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from builder.analysis.labels import read_trec_qrels
from builder.release.validate.trec import compare_trec_qrels
from generation.errors import InputError
from generation.labels import trec_qrels

# Lines of the published shape: TREC's own qrels (space-separated, iteration 0), a tab-separated file, columns
# aligned with runs of spaces, CRLF line ends, an iteration other than 0 (trec_eval ignores the column), a
# negative grade, and a comment line (trec_eval skips a line that starts with #).
PUBLISHED = (
    b"301 0 FBIS3-10082 1\n"
    b"301\t0\tFBIS3-10169\t0\n"
    b"  302   0   FBIS3-10243    2  \n"
    b"302 0 FBIS3-10319 1\r\n"
    b"# judged again\n"
    b"303 Q0 clueweb22-en0000-00-00001 -2\n"
    b"303 0 clueweb22-en0000-00-00002 3"
)  # no newline at the end
ROWS = [
    ("301", "FBIS3-10082", 1),
    ("301", "FBIS3-10169", 0),
    ("302", "FBIS3-10243", 2),
    ("302", "FBIS3-10319", 1),
    ("303", "clueweb22-en0000-00-00001", -2),
    ("303", "clueweb22-en0000-00-00002", 3),
]


def test_qrels_of_the_published_shapes_read_as_trec_eval_reads_them(tmp_path):
    path = tmp_path / "published.qrels"
    path.write_bytes(PUBLISHED)
    labels = read_trec_qrels(path)
    assert list(zip(*(labels[c].to_pylist() for c in ("query", "docid", "grade")), strict=True)) == ROWS
    bad = []
    table = pa.concat_tables(trec_qrels.read_trec_qrels(path, bad.append))
    assert not bad and table["line"].to_pylist() == [1, 2, 3, 4, 6, 7]
    assert table["iteration"].to_pylist() == ["0", "0", "0", "0", "Q0", "0"]


@pytest.mark.parametrize("block", [1, 7, 64])
def test_lines_across_blocks_keep_their_numbers(tmp_path, monkeypatch, block):
    monkeypatch.setattr(trec_qrels, "BLOCK_BYTES", block)
    path = tmp_path / "published.qrels"
    path.write_bytes(PUBLISHED + b"\n304 0 d 1 x\n")
    bad = []
    table = pa.concat_tables(trec_qrels.read_trec_qrels(path, bad.append))
    assert table["line"].to_pylist() == [1, 2, 3, 4, 6, 7] and table["score"].to_pylist() == [r[2] for r in ROWS]
    assert [(b.line, b.problem) for b in bad] == [(8, "5 fields, not 4 ('304 0 d 1 x')")]


@pytest.mark.parametrize(
    "line, problem",
    [
        (b"301 0 FBIS3-10082", "3 fields, not 4"),
        (b"301 0 FBIS3-10082 1 extra", "5 fields, not 4"),
        (b"   ", "0 fields, not 4"),  # a blank line: trec_eval's "Malformed line" too
        (b"301 0 FBIS3-10082 high", "relevance 'high' is not an integer"),
        (b"301 0 FBIS3-10082 1.5", "relevance '1.5' is not an integer"),  # trec_eval's atol would read 1
        (b"301 0 FBIS3-\xff 1", "not UTF-8"),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, problem):
    path = tmp_path / "bad.qrels"
    path.write_bytes(b"301 0 FBIS3-10169 0\n302\t0\tFBIS3-10243\t2\n" + line + b"\n303 0 FBIS3-10319 1\n")
    with pytest.raises(InputError, match=rf"bad\.qrels:3:.*{problem}"):
        read_trec_qrels(path)
    bad = []
    rows = sum(t.num_rows for t in trec_qrels.read_trec_qrels(path, bad.append))
    assert rows == 3 and [(b.line, b.count) for b in bad] == [(3, 1)] and problem in bad[0].problem


def test_validate_names_the_release_file_and_line_and_holds_it_to_iteration_0(tmp_path):
    qrels = tmp_path / "data" / "qrels"
    qrels.mkdir(parents=True)
    (qrels / "test.qrels.txt").write_text("s1 0 d1 2\ns1 0 d2 x\ns2 1 d3 0\n")
    index = SimpleNamespace(subquestion_positions=lambda ids: np.zeros(len(ids), np.int64))
    check = SimpleNamespace(found=[], fail=lambda message, count=1: check.found.append((message, count)))
    compare_trec_qrels(tmp_path, "test", index, (1, 0), check)
    assert check.found[0] == ("test.qrels.txt line 2: relevance 'x' is not an integer", 1)
    assert check.found[1][0].startswith("test.qrels.txt line 3: the line of query-id s2 corpus-id d3 has iteration '1'")
