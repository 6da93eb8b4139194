"""Sorted runs on disk (generation/storage/spill.py): what the merge gives back equals an in-memory sort, whether
nothing, some or everything spilled, and the runs' folder is gone afterwards."""

import numpy as np
import pyarrow as pa
import pytest

from builder.release.assemble.configs import CorpusIds
from generation.storage.spill import KeyRuns, TableRuns


@pytest.mark.parametrize("memory", [10**9, 5_000, 999])
def test_key_runs_give_every_key_back_sorted_and_find_the_repeated_ones(memory, monkeypatch):
    monkeypatch.setattr("generation.storage.spill.BLOCK", 700)  # many merge rounds per run
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
    monkeypatch.setattr("generation.storage.spill.BLOCK", 2)
    runs = KeyRuns(memory=3)
    for keys in ([5, 1, 9], [5, 7, 2], [11, 12, 13]):
        runs.add(np.array(keys, np.uint64))
    assert runs.repeated().tolist() == [5]


@pytest.mark.parametrize("memory", [10**9, 400, 37])
def test_table_runs_keep_the_first_row_of_each_key_in_key_order(memory, monkeypatch):
    monkeypatch.setattr("generation.storage.spill.RUN_BATCH_ROWS", 50)
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
    rows = pa.table(
        {"docid": [f"d{i % 97:03d}" for i in range(3_000)], "url_hash": [f"H{i % 97}" for i in range(3_000)]}
    )
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


def test_records_sorted_by_their_key_field_keep_equal_keys_in_the_order_added(monkeypatch):
    monkeypatch.setattr("generation.storage.spill.BLOCK", 5)
    dtype = np.dtype([("key", np.uint64), ("added", np.int64)])
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 30, size=200).astype(np.uint64)
    runs = KeyRuns(memory=17, dtype=dtype, key="key")
    for start in range(0, 200, 9):
        part = np.empty(len(keys[start : start + 9]), dtype)
        part["key"], part["added"] = keys[start : start + 9], np.arange(start, start + len(part))
        runs.add(part)
    merged = np.concatenate(list(runs.chunks()))
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(merged["key"], keys[order]) and np.array_equal(merged["added"], order)


def test_complexity_is_the_same_whether_its_pairs_spilled_or_not(monkeypatch):
    from builder.release.assemble.complexity import ComplexityAccumulator

    rng = np.random.default_rng(7)
    questions, subq_per_question = 300, 6
    subq_question = np.repeat(np.arange(questions), subq_per_question)
    subquestions_of = np.bincount(subq_question, minlength=questions)
    batches = []
    for _ in range(12):
        subquestion = rng.integers(0, len(subq_question), 4_000)
        batches.append(
            (
                subq_question[subquestion],
                subquestion,
                rng.integers(0, 50, 4_000).astype(np.uint64),
                pa.array(rng.integers(0, 6, 4_000), pa.int8()),
            )
        )
    results = []
    for memory in (10**9, 700):
        accumulator = ComplexityAccumulator(subquestions_of, subq_question, 4, 0.5)
        accumulator._pairs.memory = memory
        for batch in batches:
            accumulator.add(*batch)
        assert (accumulator._pairs.spilled > 0) == (memory == 700)
        results.append(accumulator.result())
    for name in results[0]:
        assert np.array_equal(results[0][name], results[1][name]), name  # bit for bit, whatever the chunks
