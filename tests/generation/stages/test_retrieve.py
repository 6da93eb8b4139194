import pyarrow.parquet as pq
import pytest

from generation.corpus.java import lucene_searcher_class
from generation.corpus.topics import load_topics
from generation.profiles.profile import load_profile
from generation.stages.retrieve import RetrieveStage, bm25_query
from generation.storage.shards import Shard, ShardError


def test_index_holds_the_whole_sample_with_raw_json(sample_index):
    from generation.corpus.docstore import DocStore

    docs = DocStore(sample_index / "index")
    assert len(docs) == pq.ParquetFile(sample_index / "corpus" / "corpus-00000-of-00001.parquet").metadata.num_rows
    row = pq.read_table(sample_index / "corpus" / "corpus-00000-of-00001.parquet").slice(7, 1).to_pylist()[0]
    assert docs.text(row["docid"]) == row["text"] and docs.url_hash(row["docid"]) == row["url_hash"]


@pytest.mark.parametrize("query", ["question", "subquestions"])
def test_rankings_equal_pyserini_search(sample_index, sample_questions, tmp_path, query):
    profile = load_profile("demo")
    profile = profile.model_copy(
        update={"bm25": profile.bm25.model_copy(update={"query": query, "k1": 1.2, "b": 0.75})}
    )
    out = tmp_path / "runs"
    summary = RetrieveStage(profile, out, sample_questions, sample_index / "index", threads=2).run()
    ours = pq.read_table(out / "bm25-00000-of-00001.parquet").to_pylist()
    assert summary.queries == 21 and len(ours) == 21 * 100

    searcher = lucene_searcher_class()(str(sample_index / "index"))
    searcher.set_bm25(1.2, 0.75)
    for topic in load_topics(sample_questions):
        expected = [
            (h.docid, pytest.approx(h.score, abs=1e-4)) for h in searcher.search(bm25_query(topic, profile.bm25), k=100)
        ]
        got = [(r["docid"], r["score"]) for r in ours if r["qid"] == topic.qid]
        assert [r["rank"] for r in ours if r["qid"] == topic.qid] == list(range(1, 101))
        assert got == expected, topic.qid

    trec = (out / "bm25-00000-of-00001.trec").read_text().splitlines()
    assert len(trec) == len(ours)
    qid, q0, docid, rank, score, tag = trec[0].split()
    assert (qid, q0, docid, int(rank)) == (ours[0]["qid"], "Q0", ours[0]["docid"], 1)


def test_shards_partition_questions_and_resume(sample_index, sample_questions, tmp_path):
    profile, out = load_profile("demo"), tmp_path / "runs"
    queries = [
        RetrieveStage(profile, out, sample_questions, sample_index / "index").run(Shard(i, 3)).queries for i in range(3)
    ]
    assert sum(queries) == 21 and all(queries)
    assert RetrieveStage(profile, out, sample_questions, sample_index / "index").run(Shard(1, 3)).skipped_shards == 1
    other = profile.model_copy(update={"bm25": profile.bm25.model_copy(update={"k1": 1.5})})
    with pytest.raises(ShardError, match="was made under config"):
        RetrieveStage(other, out, sample_questions, sample_index / "index").run(Shard(0, 3))
