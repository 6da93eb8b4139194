import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from generation.storage import schema
from generation.storage.atomic_files import ParquetSink

EXAMPLE_ROWS = {
    "questions": {
        "qid": "1",
        "question": "q",
        "split": "train",
        "clicked": [{"url_hash": "A" * 32, "url": "https://x", "click_share": 0.5}],
        "answerable": True,
        "answerable_share": 0.5,
        "completeness": 0.25,
        "retrieval_complex": False,
    },
    "subquestions": {"subq_id": "1-0", "qid": "1", "text": "t", "header": None, "depth": 2},
    "corpus": {"docid": "clueweb22-en0000-00-00000", "url_hash": "A" * 32, "url": None, "text": "x"},
    "runs": {"qid": "1", "docid": "d", "rank": 1, "score": 1.5, "stage": "bm25"},
    "candidates": {
        "qid": "1",
        "docid": "d",
        "url_hash": "A" * 32,
        "bm25_rank": 3,
        "rerank_rank": None,
        "clicked": True,
        "click_share": 0.5,
        "source": "clicked",
    },
    "judgments": {
        "subq_id": "1-0",
        "qid": "1",
        "docid": "d",
        "url_hash": "A" * 32,
        "level": None,
        "raw": "N/A",
        "probs": [0.1, 0.1, 0.2, 0.2, 0.2, 0.2],
        "expected": 2.7,
        "bm25_rank": 1,
        "rerank_rank": 2,
        "clicked": False,
        "extract_verbatim": None,
    },
    "qrels": {"query-id": "1-0", "corpus-id": "d", "score": 5},
    "queries": {"_id": "1-0", "text": "what is it?"},
    "corpus_ids": {"_id": "d", "url_hash": "A" * 32, "url": "https://x"},
    "diversity_qrels": {"query-id": "1", "subtopic": 1, "corpus-id": "d", "score": 5, "subq_id": "1-0"},
    "document_texts": {
        "docid": "clueweb22-en0000-00-00000",
        "url_hash": "A" * 32,
        "text": "a b",
        "full_text": "a  b c",
        "words": 3,
    },
    "missing_documents": {"docid": "clueweb22-en0000-00-00001", "reason": "no_file"},
    "training_ids": {"query_id": "1-0", "qid": "1", "positive_id": "d", "negative_ids": ["e", "f"]},
    "hard_negatives": {
        "query_id": "1-0",
        "query_text": "what is it?",
        "positive_document_ids": ["d"],
        "negative_document_ids": ["e", "f", "g"],
        "qid": "1",
    },
    "graded_lists": {
        "query_id": "1-0",
        "qid": "1",
        "docids": ["d", "e"],
        "labels": [5, 0],
        "expected": None,
        "probs": None,
    },
    "pilot_sample": {"qid": "1", "subq_id": "1-0", "docid": "d"},
}


def test_every_table_has_an_example():
    assert set(EXAMPLE_ROWS) == set(schema.TABLES)


@pytest.mark.parametrize("table", sorted(schema.TABLES))
def test_written_with_pyarrow_read_with_datasets(tmp_path, table):
    path = tmp_path / f"{table}.parquet"
    with ParquetSink(path, table) as sink:
        sink.write_rows([EXAMPLE_ROWS[table]])
    assert pq.read_schema(path).remove_metadata() == schema.arrow_schema(table).remove_metadata()
    loaded = datasets.load_dataset("parquet", data_files=str(path), split="train")
    assert loaded.features == schema.features(table)
    row = loaded[0]
    for name, value in EXAMPLE_ROWS[table].items():
        if isinstance(value, float):
            assert row[name] == pytest.approx(value)
        elif name == "probs":
            assert row[name] == pytest.approx(value)
        else:
            assert row[name] == value


def test_features_and_arrow_come_from_one_definition():
    for table, cols in schema.TABLES.items():
        assert schema.arrow_schema(table).names == [c.name for c in cols]
        assert list(schema.features(table)) == [c.name for c in cols]
        assert all(schema.arrow_schema(table).field(c.name).metadata[b"description"] for c in cols)


def test_sink_refuses_rows_that_break_the_schema(tmp_path):
    path = tmp_path / "runs.parquet"
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, TypeError)):
        with ParquetSink(path, "runs") as sink:
            sink.write_rows([{"qid": "1", "docid": "d", "rank": "first", "score": 1.0, "stage": "bm25"}])
            sink.close()
    assert not path.exists()
    assert list(tmp_path.iterdir()) == [], "no temporary file is left behind"


def test_unknown_table_is_named():
    with pytest.raises(KeyError, match="unknown table 'qrel'"):
        schema.arrow_schema("qrel")
