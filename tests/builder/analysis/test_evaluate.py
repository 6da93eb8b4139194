"""`evaluate`: means over every question of the release (trec_eval -c), clear errors and warnings, and the
numbers of trec_eval (nDCG) and ndeval (alpha-nDCG) as ir-measures computes them."""

import math
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builder.analysis.evaluate import RunWarning, evaluate_run, evaluate_subquestion_run, ndcg, read_run
from generation.storage.schema import arrow_schema

THRESHOLD = 4


def make_release(root, rows):
    """A release folder holding `rows` (qid, subq_id, docid, level) as judgment files partitioned by level."""
    table = pa.Table.from_pylist(
        [
            {
                **r,
                "url_hash": None,
                "raw": "",
                "status": "ok" if r["level"] is not None else "no_digit",
                "clicked": False,
            }
            for r in rows
        ],
        schema=arrow_schema("judgments"),
    )
    for level in {r["level"] for r in rows}:
        folder = root / "data" / "judgments" / ("unparsed" if level is None else f"level_{level}")
        folder.mkdir(parents=True)
        part = table.filter(
            pa.compute.is_null(table["level"]) if level is None else pa.compute.equal(table["level"], level)
        )
        pq.write_table(part, folder / "train-00000-of-00001.parquet")
    return root


def random_judgments(seed=7, questions=12):
    rng = random.Random(seed)
    rows = []
    for q in range(questions):
        docs = [f"doc-{q}-{d}" for d in range(rng.randint(3, 9))]
        for s in range(rng.randint(1, 5)):
            for doc in docs:
                level = rng.choice([0, 0, 1, 2, 2, 3, 4, 5, None])
                rows.append({"qid": f"q{q}", "subq_id": f"q{q}-{s}", "docid": doc, "level": level})
    return rows


def random_run(rows, seed=11):
    """Every question but q3, in random order with distinct scores, with unjudged documents mixed in, plus a
    question the release does not have."""
    rng = random.Random(seed)
    run = {}
    for qid in sorted({r["qid"] for r in rows} - {"q3"}):
        docs = sorted({r["docid"] for r in rows if r["qid"] == qid}) + [f"unjudged-{qid}-{i}" for i in range(3)]
        rng.shuffle(docs)
        run[qid] = docs[: rng.randint(2, len(docs))]
    run["not-a-question"] = ["x"]
    return run


def write_trec(path, run):
    with open(path, "w") as f:
        for qid, docs in run.items():
            for rank, doc in enumerate(docs, 1):
                f.write(f"{qid} Q0 {doc} {rank} {100 - rank + 0.5} tag\n")
    return path


def test_matches_ir_measures_trec_eval_and_ndeval(tmp_path):
    ir_measures = pytest.importorskip("ir_measures")
    pytest.importorskip("pyndeval")
    from ir_measures import alpha_nDCG, nDCG

    rows = random_judgments()
    release = make_release(tmp_path / "release", rows)
    run = random_run(rows)
    ours = evaluate_run(
        read_run(write_trec(tmp_path / "run.trec", run)).ranked,
        release,
        ["alpha-ndcg@5", "alpha-ndcg@10", "ndcg@5", "ndcg@10"],
        THRESHOLD,
    )["metrics"]

    judged = [r for r in rows if r["level"] is not None]
    # ndeval's qrels: one line per (question, aspect = sub-question, document), relevant when it answers it
    aspect_qrels = [ir_measures.Qrel(r["qid"], r["docid"], int(r["level"] >= THRESHOLD), r["subq_id"]) for r in judged]
    best = {}
    for r in judged:
        best[(r["qid"], r["docid"])] = max(best.get((r["qid"], r["docid"]), 0), r["level"])
    graded_qrels = [ir_measures.Qrel(q, d, level) for (q, d), level in best.items()]
    scored = [ir_measures.ScoredDoc(q, d, 100 - rank) for q, docs in run.items() for rank, d in enumerate(docs, 1)]

    for name, measure, qrels in (
        ("alpha-ndcg@5", alpha_nDCG @ 5, aspect_qrels),
        ("alpha-ndcg@10", alpha_nDCG @ 10, aspect_qrels),
        ("ndcg@5", nDCG @ 5, graded_qrels),
        ("ndcg@10", nDCG @ 10, graded_qrels),
    ):
        theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, scored)}
        assert set(theirs) == set(ours[name]["per_query"]), name  # every question, q3 (not in the run) included
        for qid, value in theirs.items():
            assert ours[name]["per_query"][qid] == pytest.approx(value, abs=1e-4), (name, qid)
        assert ours[name]["mean"] == pytest.approx(
            ir_measures.calc_aggregate([measure], qrels, scored)[measure], abs=1e-4
        ), name


def test_subquestion_ndcg_matches_ir_measures_trec_eval(tmp_path):
    """nDCG@10 over sub-questions (what `researchy-subq train` reports): trec_eval's per sub-question, with the levels
    as gains; a sub-question missing from the run scores 0 and still counts in the mean (trec_eval -c)."""
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import nDCG

    rows = random_judgments()
    release = make_release(tmp_path / "release", rows)
    rng = random.Random(5)
    run = {}
    for subq in sorted({r["subq_id"] for r in rows} - {"q2-0"}):
        docs = sorted({r["docid"] for r in rows if r["subq_id"] == subq}) + ["unjudged"]
        rng.shuffle(docs)
        run[subq] = docs
    ours = evaluate_subquestion_run(run, release, depth=10)
    qrels = [ir_measures.Qrel(r["subq_id"], r["docid"], r["level"]) for r in rows if r["level"] is not None]
    scored = [ir_measures.ScoredDoc(q, d, 100 - rank) for q, docs in run.items() for rank, d in enumerate(docs, 1)]
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([nDCG @ 10], qrels, scored)}
    judged = {r["subq_id"] for r in rows if r["level"] is not None}
    assert set(ours["per_query"]) == judged and ours["queries"] == len(judged)
    for subq in judged:
        assert ours["per_query"][subq] == pytest.approx(theirs.get(subq, 0.0), abs=1e-4), subq
    assert "q2-0" in judged and ours["per_query"]["q2-0"] == 0.0
    assert ours["mean"] == pytest.approx(sum(theirs.values()) / len(judged), abs=1e-4)


def test_questions_missing_from_the_run_score_zero(tmp_path):
    rows = [{"qid": q, "subq_id": f"{q}-0", "docid": f"{q}-d", "level": 5} for q in ("a", "b", "c", "d")]
    release = make_release(tmp_path / "release", rows)
    result = evaluate_run({"a": ["a-d"], "zzz": ["a-d"]}, release, ["alpha-ndcg@10", "ndcg@10"])
    for name in ("alpha-ndcg@10", "ndcg@10"):
        assert result["metrics"][name]["mean"] == pytest.approx(0.25)
        assert (result["metrics"][name]["queries"], result["metrics"][name]["in_run"]) == (4, 1)
    assert result["ignored_run_queries"] == 1


def test_split_restricts_the_questions(tmp_path):
    rows = [{"qid": q, "subq_id": f"{q}-0", "docid": f"{q}-d", "level": 5} for q in ("a", "b")]
    release = make_release(tmp_path / "release", rows)
    folder = release / "data" / "judgments" / "level_5"
    table = pq.read_table(folder / "train-00000-of-00001.parquet")
    pq.write_table(table.filter(pa.compute.equal(table["qid"], "b")), folder / "test-00000-of-00001.parquet")
    pq.write_table(table.filter(pa.compute.equal(table["qid"], "a")), folder / "train-00000-of-00001.parquet")
    assert evaluate_run({"a": ["a-d"]}, release, ["ndcg@10"], split="train")["metrics"]["ndcg@10"]["mean"] == 1.0
    assert evaluate_run({"a": ["a-d"]}, release, ["ndcg@10"])["metrics"]["ndcg@10"]["mean"] == 0.5


def test_a_run_that_matches_no_question_is_an_error(tmp_path):
    release = make_release(tmp_path / "release", [{"qid": "1051893", "subq_id": "1051893-0", "docid": "d", "level": 5}])
    with pytest.raises(ValueError, match=r"no query id of the run is a question of .*run ids like \['1051893-0'\]"):
        evaluate_run({"1051893-0": ["d"]}, release, ["ndcg@10"])


def test_malformed_and_repeated_run_lines_are_named(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 2.0 t\n\nq1 Q0 d2 2 1.0\nq1 Q0 d3 3 high t\nq1 Q0 d1 4 0.5 t\nq1 Q0 d4 5 1.5 t\n")
    with pytest.warns(RunWarning) as caught:
        run = read_run(path)
    messages = [str(w.message) for w in caught]
    assert any("2 lines malformed" in m and "line 3, 4" in m for m in messages), messages
    assert any("1 lines repeating" in m and "line 5" in m for m in messages), messages
    assert run.ranked == {"q1": ["d1", "d4"]}


def test_run_order_is_score_then_docid_descending_as_trec_eval(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q Q0 b 1 1.0 t\nq Q0 a 2 1.0 t\nq Q0 c 3 2.0 t\n")
    assert read_run(path).ranked == {"q": ["c", "b", "a"]}


def test_ndcg_gain_is_the_level():
    discount = math.log2(3)
    assert ndcg(["d2", "d1"], {"d1": 5, "d2": 1}, 10) == pytest.approx((1 + 5 / discount) / (5 + 1 / discount))
    assert ndcg(["d1", "unjudged"], {"d1": 5, "d2": 1}, 1) == 1.0
