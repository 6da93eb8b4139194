"""Sorted runs on disk (builder/release/spill.py): what the merge gives back equals an in-memory sort, whether
nothing, some or everything spilled, and the runs' folder is gone afterwards."""
import numpy as np
import pyarrow as pa
import pytest

from builder.release.configs import CorpusIds
from builder.release.spill import KeyRuns, TableRuns


@pytest.mark.parametrize("memory", [10**9, 5_000, 999])
def test_key_runs_give_every_key_back_sorted_and_find_the_repeated_ones(memory, monkeypatch):
    monkeypatch.setattr("builder.release.spill.BLOCK", 700)  # many merge rounds per run
    rng = np.random.default_rng(4)
    batches = [rng.integers(0, 40_000, size=n, dtype=np.uint64) for n in (3_000, 1, 0, 8_000, 2_500)]
    everything = np.concatenate(batches)
    runs = KeyRuns(memory)
    for batch in batches:
        runs.add(batch)
    folder = runs._folder.path
    assert (runs.spilled > 0) == (memory < len(everything))
    merged = np.concatenate(list(runs.chunks()))
    assert np.array_equal(merged, np.sort(everything))
    values, counts = np.unique(everything, return_counts=True)
    again = KeyRuns(memory)
    for batch in batches:
        again.add(batch)
    assert np.array_equal(again.repeated(), values[counts > 1])
    assert folder is None or not folder.exists()


def test_a_key_repeated_across_a_chunk_boundary_is_found(monkeypatch):
    monkeypatch.setattr("builder.release.spill.BLOCK", 2)
    runs = KeyRuns(memory=3)
    for keys in ([5, 1, 9], [5, 7, 2], [11, 12, 13]):
        runs.add(np.array(keys, np.uint64))
    assert runs.repeated().tolist() == [5]


@pytest.mark.parametrize("memory", [10**9, 400, 37])
def test_table_runs_keep_the_first_row_of_each_key_in_key_order(memory, monkeypatch):
    monkeypatch.setattr("builder.release.spill.BLOCK", 50)
    rng = np.random.default_rng(9)
    keys = [f"doc-{k:05d}" for k in rng.integers(0, 600, size=2_000)]
    table = pa.table({"docid": keys, "added": np.arange(len(keys))})
    runs = TableRuns("docid", memory)
    for start in range(0, len(keys), 130):
        runs.add(table.slice(start, 130))
    merged = pa.concat_tables(list(runs.merged()))
    first = {}
    for position, key in enumerate(keys):
        first.setdefault(key, position)
    assert merged["docid"].to_pylist() == sorted(first)
    assert merged["added"].to_pylist() == [first[k] for k in sorted(first)]


def test_corpus_ids_spilled_equal_corpus_ids_in_memory():
    questions = pa.table({"clicked": [[{"url_hash": "H3", "url": "https://three", "click_share": 1.0}]]})
    rows = pa.table({"docid": [f"d{i % 97:03d}" for i in range(3_000)], "url_hash": [f"H{i % 97}" for i in range(3_000)]})
    results = []
    for memory in (None, 50):
        docs = CorpusIds(questions, memory)
        for start in range(0, rows.num_rows, 200):
            docs.add(rows.slice(start, 200))
        assert (docs.runs.spilled > 0) == (memory is not None)
        results.append(pa.concat_tables(list(docs.tables())))
    assert results[0].equals(results[1])
    assert results[0].num_rows == 97 and results[0]["_id"].to_pylist() == sorted(results[0]["_id"].to_pylist())
    assert results[0].filter(pa.compute.equal(results[0]["url_hash"], "H3"))["url"].to_pylist() == ["https://three"]
