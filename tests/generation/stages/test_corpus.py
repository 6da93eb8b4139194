import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from generation.stages import read_stage
from generation.stages.corpus import CorpusStage, url_hash_of, write_url_map
from generation.storage.shards import Shard, ShardError


def clueweb(docid, text, url="https://example.org/a"):
    return json.dumps(
        {"URL": url + "\n", "URL-hash": url_hash_of(url), "Language": "en", "ClueWeb22-ID": docid, "Clean-Text": text}
    )


@pytest.fixture
def tree(tmp_path):
    folder = tmp_path / "txt" / "en" / "en00" / "en0000"
    folder.mkdir(parents=True)
    with gzip.open(folder / "en0000-00.json.gz", "wt") as f:
        f.write(clueweb("clueweb22-en0000-00-00000", "Bees pollinate crops.", "https://bees.org/1") + "\n")
        f.write(clueweb("clueweb22-en0000-00-00001", "   ", "https://bees.org/2") + "\n")  # empty text
        f.write('{"URL": "https://bees.org/3", "ClueWeb22-ID": \n')  # truncated line
    with gzip.open(folder / "en0000-01.json.gz", "wb") as f:
        f.write(
            (clueweb("clueweb22-en0000-01-00000", "Honey bees and Varroa mites.", "https://bees.org/4") + "\n").encode()
        )
        f.write(b'{"ClueWeb22-ID": "x", "Clean-Text": "\xff\xfe"}\n')  # not UTF-8
        f.write((clueweb("clueweb22-en0000-00-00000", "a second copy", "https://bees.org/1") + "\n").encode())
    plain = tmp_path / "extra.jsonl"
    plain.write_text(
        json.dumps({"id": "doc-1", "contents": "Plain JSONL document.", "url": "https://p.org/x"})
        + "\n"
        + json.dumps({"id": "doc-2", "contents": "No url here."})
        + "\n"
    )
    return tmp_path


def test_reads_clueweb22_and_jsonl_and_reports_every_reject(tree, tmp_path):
    rejects = tmp_path / "rejects.jsonl"
    summary = CorpusStage(None, tmp_path / "corpus", [tree / "txt", tree / "extra.jsonl"], rejects=rejects).run()
    assert summary.documents == 4
    assert dict(summary.rejected) == {"empty text": 1, "undecodable or malformed": 2, "duplicate id": 1}
    rows = read_stage(tmp_path / "corpus", "corpus").to_table().to_pylist()  # input files in sorted order
    assert [r["docid"] for r in rows] == ["doc-1", "doc-2", "clueweb22-en0000-00-00000", "clueweb22-en0000-01-00000"]
    assert rows[2] == {
        "docid": "clueweb22-en0000-00-00000",
        "url_hash": url_hash_of("https://bees.org/1"),
        "url": "https://bees.org/1",
        "text": "Bees pollinate crops.",
    }
    assert rows[0]["url_hash"] == url_hash_of("https://p.org/x") and rows[1]["url_hash"] is None
    lines = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [(line["line"], line["field"]) for line in lines] == [(2, "Clean-Text"), (3, None), (2, None), (3, "id")]
    assert "not UTF-8" in lines[2]["error"] and "duplicate id, first at" in lines[3]["error"]
    assert all(line["file"].endswith(".json.gz") for line in lines)


def test_shards_split_input_files_and_map_waits_for_all(tree, tmp_path):
    out = tmp_path / "corpus"
    first = CorpusStage(None, out, [tree / "txt", tree / "extra.jsonl"]).run(Shard(0, 2))
    with pytest.raises(ShardError, match="1 of 2 corpus shards are not complete"):
        write_url_map(out)
    second = CorpusStage(None, out, [tree / "txt", tree / "extra.jsonl"]).run(Shard(1, 2))
    assert first.documents + second.documents == 5  # the duplicate is in another file: caught by the map
    with pytest.raises(Exception, match="1 docids appear in more than one corpus shard"):
        write_url_map(out)


def test_completed_shard_is_skipped_and_other_shard_counts_refused(tree, tmp_path):
    out = tmp_path / "corpus"
    CorpusStage(None, out, [tree / "extra.jsonl"]).run()
    again = CorpusStage(None, out, [tree / "extra.jsonl"]).run()
    assert again.skipped_shards == 1 and again.documents == 0
    with pytest.raises(ShardError, match="cut into 1 shard, this run asks for 2"):
        CorpusStage(None, out, [tree / "extra.jsonl"]).run(Shard(0, 2))
    CorpusStage(None, tmp_path / "three", [tree / "extra.jsonl"]).run(Shard(0, 3))
    with pytest.raises(ShardError, match="cut into 3 shards, this run asks for 1;"):
        CorpusStage(None, tmp_path / "three", [tree / "extra.jsonl"]).run()
    path, rows = write_url_map(out)
    assert rows == 1 and pq.read_table(path).column("docid").to_pylist() == ["doc-1"]


def test_tampered_shard_is_detected(tree, tmp_path):
    out = tmp_path / "corpus"
    CorpusStage(None, out, [tree / "extra.jsonl"]).run()
    shard_file = out / "corpus-00000-of-00001.parquet"
    shard_file.write_bytes(shard_file.read_bytes()[:-10])
    with pytest.raises(ShardError, match="does not match its completion record"):
        CorpusStage(None, out, [tree / "extra.jsonl"]).run()


def test_url_map_from_spilled_runs_equals_the_in_memory_one(tmp_path, monkeypatch, capsys):
    """The map is sorted in runs on disk (bounded memory at 86M documents): with a run every 97 rows and URL-hashes
    shared by up to 5 documents across run and chunk boundaries, it equals the whole-table answer, warning included;
    a docid repeated across shards is still found when its 64-bit hashes are spilled."""
    from generation.corpus import url_hashes

    docs = tmp_path / "docs"
    docs.mkdir()
    rng = np.random.default_rng(3)
    ids = [f"doc-{i:05d}" for i in rng.permutation(3000)]
    for part in range(3):
        (docs / f"p{part}.jsonl").write_text(
            "".join(
                json.dumps({"id": d, "contents": "text", "url_hash": url_hash_of(f"https://u/{int(d[4:]) % 1700}")})
                + "\n"
                for d in ids[part::3]
            )
        )
    out = tmp_path / "corpus"
    for k in range(3):
        CorpusStage(None, out, [docs]).run(Shard(k, 3))
    whole = pa.concat_tables(
        pq.read_table(p, columns=["url_hash", "docid"]) for p in sorted(out.glob("corpus-*.parquet"))
    )
    expected = url_hashes.one_document_per_hash(whole, out)
    expected_err = capsys.readouterr().err
    path, rows = write_url_map(out, memory=97)
    assert pq.read_table(path).to_pylist() == expected.to_pylist() and rows == 1700
    assert " ".join(capsys.readouterr().err.split()) == " ".join(expected_err.split())
    assert "1,300 documents share a URL-hash" in " ".join(expected_err.split())

    monkeypatch.setattr("generation.storage.spill.SPILL_BYTES", 8 * 64)  # a run of docid hashes every 64 rows
    (docs / "p3.jsonl").write_text(json.dumps({"id": ids[5], "contents": "again"}) + "\n")
    again = tmp_path / "again"
    for k in range(2):
        CorpusStage(None, again, [docs]).run(Shard(k, 2))
    with pytest.raises(Exception, match=f"1 docids appear in more than one corpus shard, e.g. \\['{ids[5]}'\\]"):
        write_url_map(again)
