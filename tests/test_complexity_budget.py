import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builder.complexity import complexity
from generation.budgeted import run_budgeted_judge
from generation.judge import run_judge
from generation.schema import arrow_schema


def judgments_file(tmp_path, rows):
    path = tmp_path / "j.parquet"
    full = [{"url_hash": None, "raw": "", "probs": None, "expected": None, "bm25_rank": 1, "rerank_rank": 1,
             "clicked": False, "extract_verbatim": None, **r} for r in rows]
    pq.write_table(pa.Table.from_pylist(full, schema=arrow_schema("judgments")), path)
    return path


def test_complexity_by_hand(tmp_path):
    rows = [
        # q1: d1 answers both sub-questions (levels 5, 4): answerable; entropy of (5, 4) normalised by log 2
        {"qid": "q1", "subq_id": "q1-0", "docid": "d1", "level": 5}, {"qid": "q1", "subq_id": "q1-1", "docid": "d1", "level": 4},
        {"qid": "q1", "subq_id": "q1-0", "docid": "d2", "level": 3}, {"qid": "q1", "subq_id": "q1-1", "docid": "d2", "level": 0},
        # q2: each document answers one sub-question only; the third sub-question is never answered
        {"qid": "q2", "subq_id": "q2-0", "docid": "e1", "level": 5}, {"qid": "q2", "subq_id": "q2-1", "docid": "e1", "level": 0},
        {"qid": "q2", "subq_id": "q2-2", "docid": "e1", "level": 0},
        {"qid": "q2", "subq_id": "q2-0", "docid": "e2", "level": 0}, {"qid": "q2", "subq_id": "q2-1", "docid": "e2", "level": 4},
        {"qid": "q2", "subq_id": "q2-2", "docid": "e2", "level": None},
    ]
    subqs = pa.table({"qid": ["q1", "q1", "q2", "q2", "q2"], "subq_id": ["q1-0", "q1-1", "q2-0", "q2-1", "q2-2"]})
    result = complexity([judgments_file(tmp_path, rows)], subqs, answer_level=4, threshold=0.5)
    p = [5 / 9, 4 / 9]
    d1 = -sum(x * math.log(x) for x in p) / math.log(2)
    assert result["q1"]["answerable"] is True and result["q1"]["answerable_share"] == 1.0
    assert result["q1"]["completeness"] == pytest.approx((d1 + 0.0) / 2)  # d2: all mass on one sub-question
    assert result["q1"]["retrieval_complex"] is False
    assert result["q2"] == {"answerable": False, "answerable_share": pytest.approx(2 / 3), "completeness": 0.0,
                            "retrieval_complex": True}


def budget_profile(small_pipeline, **bandit):
    profile = small_pipeline["profile"]
    return profile.model_copy(update={"bandit": profile.bandit.model_copy(update=bandit)})


def test_budgeted_judging_spends_the_budget_and_resumes_without_rejudging(small_pipeline, tmp_path):
    from generation.judge import make_judge

    profile = budget_profile(small_pipeline, relevant_level=3)
    args = (small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"])
    reference = run_budgeted_judge(profile, *args, tmp_path / "once", 0.25, "topk-bernoulli")
    rows = pq.read_table(reference.outputs[0]).to_pylist()
    assert reference.judged == len(rows) == pytest.approx(0.25 * reference.full_pairs, abs=len({r["qid"] for r in rows}))
    assert len({(r["subq_id"], r["docid"]) for r in rows}) == len(rows)

    real = make_judge(profile.judge)

    class DiesAfterThreeRounds:
        description = real.description

        def __init__(self):
            self.calls = 0

        def grade(self, pairs):
            self.calls += 1
            if self.calls > 3:
                raise KeyboardInterrupt("killed")
            return real.grade(pairs)

    with pytest.raises(KeyboardInterrupt):
        run_budgeted_judge(profile, *args, tmp_path / "killed", 0.25, "topk-bernoulli", judge=DiesAfterThreeRounds())
    resumed = run_budgeted_judge(profile, *args, tmp_path / "killed", 0.25, "topk-bernoulli", judge=real)
    assert resumed.judged_now == reference.judged - 3 * len({r["qid"] for r in rows})
    assert pq.read_table(resumed.outputs[0]).to_pylist() == rows

    full = run_judge(profile, *args, tmp_path / "full")
    assert full.pairs == reference.full_pairs
    assert reference.relevant <= sum(n for level, n in full.levels.items() if level >= 3)
