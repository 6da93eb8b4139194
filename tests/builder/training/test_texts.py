"""`researchy-subq texts`: the judged documents' texts from a licensed copy, never into a release.

The copy is a ClueWeb22 txt tree of the published shape (lemurproject/ClueWeb22 ClueWeb22Api.py: one gzip member a
record, `.offset` files of '{:010d}\\n' entries), written by builder/standins/clueweb22_texts.py's `write_tree`; the release is a
real one (conftest's `synthetic_release`)."""

import gzip
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from builder.release.publish.to_hub import PublishRefused, publish
from builder.release.validate.folder import validate
from builder.standins.clueweb22_texts import write_release_stub, write_tree
from builder.training.texts import judged_docids, write_texts
from generation.corpus.docstore import cut_words
from generation.errors import ArgumentError, InputError
from generation.profiles.profile import load_profile
from generation.storage.shards import Shard

CONTEXT_WORDS = 40  # short, so the cut shows


PAPER = load_profile("paper")
PROFILE = PAPER.model_copy(update={"judge": PAPER.judge.model_copy(update={"context_words": CONTEXT_WORDS})})
SYNTHETIC_RELEASE = dict(
    profile=PROFILE, subquestions=60, judgments=1200, test_share=0.25, shards=1, seed=11, unparsed_share=0.0
)


@pytest.fixture(scope="module")
def copy(tmp_path_factory, release):
    """A ClueWeb22 tree holding every judged document but: the last two (the file ends before them) and one whose
    Clean-Text is empty; plus files no judged document lives in, one of them not even gzip."""
    docids = sorted(judged_docids(release)["docid"].to_pylist())
    records = [int(d.rsplit("-", 1)[1]) for d in docids]
    assert all(d.startswith("clueweb22-en0000-00-") for d in docids)
    root = tmp_path_factory.mktemp("copy")
    write_tree(root, {"en0000-00": records[-3] + 1, "en0000-07": 50}, words=120, skip=frozenset({docids[0]}))
    (root / "txt/en/en00/en0000/en0000-09.json.gz").write_bytes(b"never opened: no judged document lives here")
    return {"root": root, "docids": docids, "short": set(docids[-2:]), "empty": {docids[0]}}


def records_of(root: Path) -> dict:
    with gzip.open(root / "txt/en/en00/en0000/en0000-00.json.gz", "rt") as f:
        return {r["ClueWeb22-ID"]: r for r in map(json.loads, f)}


def texts_table(out: Path):
    return pq.read_table(sorted(out.glob("texts-*.parquet"))).sort_by("docid")


def missing_of(out: Path) -> dict:
    rows = [line.split("\t") for p in sorted(out.glob("missing-*.tsv")) for line in p.read_text().splitlines()[1:]]
    return dict(rows)


@pytest.mark.parametrize("offsets", [True, False])
def test_texts_as_the_judge_saw_them_and_whole_with_the_missing_listed(release, copy, tmp_path, offsets):
    out = tmp_path / "texts"
    summary = write_texts(release, copy["root"], out, use_offsets=offsets)
    table = texts_table(out)
    records = records_of(copy["root"])
    expected = [d for d in copy["docids"] if d not in copy["short"] | copy["empty"]]
    assert table["docid"].to_pylist() == expected
    for row in table.to_pylist():
        whole = records[row["docid"]]["Clean-Text"]
        assert row["full_text"] == whole
        assert row["text"] == cut_words(whole, CONTEXT_WORDS) and len(row["text"].split()) == CONTEXT_WORDS
        assert row["words"] == len(whole.split())
        assert row["url_hash"] == records[row["docid"]]["URL-hash"]
    assert missing_of(out) == {**{d: "no_line" for d in copy["short"]}, **{d: "empty_text" for d in copy["empty"]}}
    assert (summary.documents, summary.written, summary.files_opened) == (len(copy["docids"]), len(expected), 1)


def test_with_offsets_only_the_judged_records_are_read(copy, tmp_path):
    """Every other record is judged; the bytes of an unjudged one are overwritten: reading through the offsets never
    touches them, streaming the file does and fails, naming the file."""
    root = tmp_path / "copy"
    shutil.copytree(copy["root"], root)
    judged = [d for d in copy["docids"][::2] if d not in copy["short"] | copy["empty"]]
    release = write_release_stub(tmp_path / "release", judged, context_words=CONTEXT_WORDS)
    path = root / "txt/en/en00/en0000/en0000-00.json.gz"
    offsets = [int(x) for x in (path.with_name("en0000-00.offset")).read_text().split()]
    unjudged = int(copy["docids"][3].rsplit("-", 1)[1])
    data = bytearray(path.read_bytes())
    data[offsets[unjudged] : offsets[unjudged + 1]] = b"\xff" * (offsets[unjudged + 1] - offsets[unjudged])
    path.write_bytes(bytes(data))
    assert write_texts(release, root, tmp_path / "with", use_offsets=True).written == len(judged)
    with pytest.raises(InputError, match="en0000-00.json.gz"):
        write_texts(release, root, tmp_path / "without", use_offsets=False)


def texts_table_rows(copy) -> int:
    return len(copy["docids"]) - len(copy["short"]) - len(copy["empty"])


def test_shards_split_the_files_and_a_rerun_skips_done_shards(copy, tmp_path):
    stub = write_release_stub(
        tmp_path / "stub-release",
        copy["docids"][:30]
        + [f"clueweb22-en0000-07-{i:05d}" for i in range(0, 60, 7)]
        + ["clueweb22-en0003-01-00001", "doc-42"],
        context_words=CONTEXT_WORDS,
    )
    sharded = tmp_path / "three"
    summaries = [write_texts(stub, copy["root"], sharded, Shard(i, 3)) for i in range(3)]
    assert sum(s.documents for s in summaries) == 30 + 9 + 2
    assert sum(s.files_opened for s in summaries) == 3  # en0000-00, en0000-07, en0003-01: each once
    assert write_texts(stub, copy["root"], sharded, Shard(1, 3)).skipped
    missing = missing_of(sharded)
    assert missing["clueweb22-en0003-01-00001"] == "no_file" and missing["doc-42"] == "not_clueweb22_id"
    assert missing["clueweb22-en0000-07-00056"] == "no_line"
    table = texts_table(sharded)
    assert table.num_rows == 30 - 1 + 8 and table["docid"].to_pylist() == sorted(set(table["docid"].to_pylist()))
    write_texts(stub, copy["root"], tmp_path / "one")
    assert texts_table(tmp_path / "one").equals(table) and missing_of(tmp_path / "one") == missing


def test_the_kits_corpus_parquet_as_the_copy_gives_the_same_texts(release, copy, tmp_path):
    from generation.stages.corpus import CorpusStage

    CorpusStage(
        None,
        tmp_path / "corpus",
        [copy["root"] / "txt/en/en00/en0000/en0000-00.json.gz"],
        rejects=tmp_path / "rejects.jsonl",
    ).run()
    write_texts(release, tmp_path / "corpus", tmp_path / "from-parquet")
    write_texts(release, copy["root"], tmp_path / "from-tree")
    assert texts_table(tmp_path / "from-parquet").equals(texts_table(tmp_path / "from-tree"))
    assert set(missing_of(tmp_path / "from-parquet")) == copy["short"] | copy["empty"]


@pytest.mark.slow
def test_refuses_a_release_folder_and_validate_and_publish_refuse_a_release_holding_text(release, copy, tmp_path):
    with pytest.raises(ArgumentError, match="inside the release folder"):
        write_texts(release, copy["root"], release / "texts")
    assert not (release / "texts").exists()
    broken = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, broken)
    write_texts(release, copy["root"], tmp_path / "texts")
    shutil.copytree(tmp_path / "texts", broken / "my-texts")
    with pytest.raises(ArgumentError, match="inside the release folder"):  # any release, not only the one named
        write_texts(release, copy["root"], broken / "data" / "more")
    report = validate(broken, load=False)
    failed = {c.name: c.examples for c in report.checks if not c.ok}
    assert list(failed) == ["no document text in the release folder (ClueWeb22's licence forbids redistributing it)"]
    assert any("my-texts/texts-00000-of-00001.parquet" in line for line in next(iter(failed.values())))
    with pytest.raises(PublishRefused, match="no document text"):
        publish(broken, "org/researchy-subq-judgments", say=lambda line: None, notice=lambda line: None)


def test_cli_texts(release, copy, tmp_path):
    from builder.cli.main import app

    result = CliRunner().invoke(app, ["texts", str(release), "--from", str(copy["root"]), "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    assert f"{texts_table_rows(copy):,} of {len(copy['docids']):,} documents written" in result.stdout
    refused = CliRunner().invoke(app, ["texts", str(release), "--from", str(copy["root"]), "--out", str(release)])
    assert refused.exit_code == 1 and "inside the release folder" in refused.output
    bad = CliRunner().invoke(
        app, ["texts", str(release), "--from", str(tmp_path / "nothing"), "--out", str(tmp_path / "u")]
    )
    assert bad.exit_code == 1 and "no such file or folder" in bad.output


@pytest.mark.parametrize("offsets", [True, False])
def test_a_record_that_is_not_json_is_named_by_file_and_line(tmp_path, offsets):
    write_tree(tmp_path / "copy", {"en0000-03": 3}, words=20, offsets=offsets)
    path = tmp_path / "copy/txt/en/en00/en0000/en0000-03.json.gz"
    members = [gzip.compress(line + b"\n") for line in gzip.decompress(path.read_bytes()).splitlines()]
    members[1] = gzip.compress(b"{not json\n")
    path.write_bytes(b"".join(members))
    if offsets:
        starts = [0]
        for member in members:
            starts.append(starts[-1] + len(member))
        path.with_name("en0000-03.offset").write_text("".join(f"{s:010d}\n" for s in starts))
    release = write_release_stub(tmp_path / "release", ["clueweb22-en0000-03-00001"])
    with pytest.raises(InputError, match=r"en0000-03\.json\.gz:2: not valid JSON"):
        write_texts(release, tmp_path / "copy", tmp_path / "out", use_offsets=offsets)


def test_an_offset_file_without_its_last_line_break_still_gives_the_last_record(tmp_path):
    """ClueWeb22's html/ja/ja00/ja0009/ja0009-57.warc.offset ends without a line break (ir-datasets-clueweb22 0.1.0,
    clueweb22.py `_fix_missing_line_break`); the closing offset is still read."""
    write_tree(tmp_path / "copy", {"en0000-05": 4}, words=20)
    offsets = tmp_path / "copy/txt/en/en00/en0000/en0000-05.offset"
    offsets.write_text(offsets.read_text().rstrip("\n"))
    release = write_release_stub(tmp_path / "release", ["clueweb22-en0000-05-00003"])
    assert write_texts(release, tmp_path / "copy", tmp_path / "out").written == 1


def test_cli_texts_from_a_corpus_parquet_names_the_copy_not_clueweb22_files(release, copy, tmp_path):
    from builder.cli.main import app
    from generation.stages.corpus import CorpusStage

    CorpusStage(None, tmp_path / "corpus", [copy["root"] / "txt/en/en00/en0000/en0000-00.json.gz"]).run()
    result = CliRunner().invoke(
        app, ["texts", str(release), "--from", str(tmp_path / "corpus"), "--out", str(tmp_path / "t")]
    )
    assert result.exit_code == 0, result.output
    assert f"from the corpus Parquet {tmp_path / 'corpus'} ->" in " ".join(result.stdout.split())
    assert "ClueWeb22 files" not in result.stdout
