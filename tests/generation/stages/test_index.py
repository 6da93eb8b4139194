"""The index holds postings only: texts come from the Parquet corpus through the index's docid map, the JSON
parts Anserini reads through named pipes are at least one per thread, and an index that stored its raw JSON (built before,
or elsewhere) is still read from itself. Real Anserini, real Lucene, real Parquet."""

import json
import shutil
import subprocess

import pyarrow.parquet as pq
import pytest

from generation.corpus.docid_map import DocidMap, write_docid_map
from generation.corpus.docstore import DocStore, MissingDocument, NotAnIndex
from generation.corpus.java import lucene_searcher_class
from generation.profiles.profile import load_profile
from generation.stages.corpus import ROW_GROUP_ROWS
from generation.stages.index import IndexStage, index_collection_command, json_parts, write_json_part
from generation.stages.retrieve import RetrieveStage


def corpus_rows(sample_index):
    table = pq.read_table(sample_index / "corpus" / "corpus-00000-of-00001.parquet")
    return {r["docid"]: r for r in table.to_pylist()}


def test_index_stores_no_text_and_the_docstore_reads_the_corpus(sample_index):
    index = sample_index / "index"
    record = json.loads((index / "researchy_subq_index.json").read_text())
    assert record["stored_raw"] is False and record["corpus_folder"] == "../corpus"
    searcher = lucene_searcher_class()(str(index))
    some = next(iter(corpus_rows(sample_index)))
    assert searcher.doc(some).raw() is None and searcher.doc(some).contents() is None  # postings only

    rows = corpus_rows(sample_index)
    docs = DocStore(index)
    ordered = sorted(rows, reverse=True)
    docs.prefetch(ordered[:700])  # across row groups
    assert len(docs) == len(rows)
    assert all(docs.text(d) == rows[d]["text"] and docs.url_hash(d) == rows[d]["url_hash"] for d in ordered)
    with pytest.raises(MissingDocument, match="'clueweb22-en9999-00-00000' is not in the index"):
        docs.text("clueweb22-en9999-00-00000")


def test_json_parts_are_one_per_thread_at_least_and_hold_every_document(sample_index, tmp_path):
    corpus = sample_index / "corpus" / "corpus-00000-of-00001.parquet"
    groups = pq.ParquetFile(corpus).num_row_groups
    assert groups >= 4 and pq.ParquetFile(corpus).metadata.row_group(0).num_rows == ROW_GROUP_ROWS
    parts = json_parts([corpus], 3)
    assert len(parts) == 3 and sorted(g for _, gs in parts for g in gs) == list(range(groups))
    lines = []
    for n, (path, gs) in enumerate(parts):
        target = tmp_path / f"part-{n}.jsonl"
        write_json_part(path, gs, target)
        lines += [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    rows = corpus_rows(sample_index)
    assert [line["id"] for line in lines] == list(rows)
    assert all(
        line
        == {"id": d, "contents": rows[d]["text"], "url_hash": rows[d]["url_hash"] or "", "url": rows[d]["url"] or ""}
        for line, d in zip(lines, rows)
    )


def test_docid_map_lookups_across_row_groups(tmp_path, sample_index, monkeypatch):
    monkeypatch.setattr("generation.corpus.docid_map.ROW_GROUP_ROWS", 100)
    corpus = sample_index / "corpus" / "corpus-00000-of-00001.parquet"
    rows = write_docid_map([corpus], tmp_path / "map.parquet", memory=300)  # spilled runs
    assert rows == len(corpus_rows(sample_index)) and pq.ParquetFile(tmp_path / "map.parquet").num_row_groups > 20
    lookup = DocidMap(tmp_path / "map.parquet")
    parquet = pq.ParquetFile(corpus)
    for group in (0, parquet.num_row_groups - 1):
        docids = parquet.read_row_group(group, columns=["docid"])["docid"].to_pylist()
        assert [lookup.get(d) for d in docids] == [(corpus.name, group, i) for i in range(len(docids))]
    assert lookup.get("") is None and lookup.get("zzz") is None


@pytest.mark.subprocess
def test_runs_equal_those_of_an_index_with_raw_stored_which_still_serves_texts(
    sample_index, sample_questions, tmp_path
):
    """An index built as this kit built them before (-storeRaw, a record without `stored_raw`): the same BM25 runs
    byte for byte, and the docstore reads its texts from the index itself."""
    old = tmp_path / "old-index"
    staging = tmp_path / "json"
    staging.mkdir()
    rows = corpus_rows(sample_index)
    with open(staging / "part-00000.jsonl", "w", encoding="utf-8") as f:
        for d, r in rows.items():
            f.write(
                json.dumps(
                    {"id": d, "contents": r["text"], "url_hash": r["url_hash"] or "", "url": r["url"] or ""},
                    ensure_ascii=False,
                )
                + "\n"
            )
    subprocess.run(
        index_collection_command(staging, old, 1, "porter", store_raw=True),
        check=True,
        capture_output=True,
    )
    record = json.loads((sample_index / "index" / "researchy_subq_index.json").read_text())
    for key in ("stored_raw", "corpus_folder", "corpus_folder_absolute"):
        record.pop(key)
    (old / "researchy_subq_index.json").write_text(json.dumps(record))

    docs = DocStore(old)
    some = sorted(rows)[::97]
    assert [docs.text(d) for d in some] == [rows[d]["text"] for d in some]
    profile = load_profile("demo")
    RetrieveStage(profile, tmp_path / "old-runs", sample_questions, old).run()
    RetrieveStage(profile, tmp_path / "new-runs", sample_questions, sample_index / "index").run()
    for name in ("bm25-00000-of-00001.parquet", "bm25-00000-of-00001.trec"):
        assert (tmp_path / "old-runs" / name).read_bytes() == (tmp_path / "new-runs" / name).read_bytes()


def test_an_index_whose_corpus_is_gone_says_so(sample_index, tmp_path):
    shutil.copytree(sample_index / "corpus", tmp_path / "corpus")
    IndexStage(None, tmp_path / "index", tmp_path / "corpus", threads=2).run()
    moved = tmp_path / "elsewhere"
    (tmp_path / "index").rename(moved)  # the relative path breaks, the absolute one still finds the corpus
    assert DocStore(moved).text(next(iter(corpus_rows(sample_index))))
    shutil.rmtree(tmp_path / "corpus")
    with pytest.raises(NotAnIndex, match="whose files \\(corpus-00000-of-00001.parquet\\) are not there any more"):
        DocStore(moved)


def test_a_failing_anserini_leaves_no_writer_waiting_and_says_why(sample_index, tmp_path, monkeypatch):
    """Java exits before it opens its pipes (here: an unknown option): the writers waiting for a reader are released
    and the stage fails with Anserini's own words, instead of hanging."""
    import generation.stages.index as index_module

    shutil.copytree(sample_index / "corpus", tmp_path / "corpus")
    real_popen = subprocess.Popen
    monkeypatch.setattr(
        index_module.subprocess, "Popen", lambda command, **kw: real_popen(command + ["-noSuchOption"], **kw)
    )
    with pytest.raises(
        index_module.IndexBuildError,
        match='having indexed no of 2,192 documents:\n.*"-noSuchOption" is not a valid option',
    ):
        IndexStage(None, tmp_path / "index", tmp_path / "corpus", threads=3).run()
    assert not (tmp_path / "index").exists() and not list(tmp_path.glob(".index.*"))
