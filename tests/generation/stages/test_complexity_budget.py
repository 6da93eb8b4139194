import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builder.release.assemble.complexity import COLUMNS
from builder.release.assemble.data_files import judgment_inputs, topic_index, with_complexity
from generation.profiles.profile import Complexity
from generation.stages.budgeted import BudgetedJudgeStage
from generation.stages.judge import JudgeStage
from generation.storage.schema import arrow_schema, conform
from generation.storage.shards import Shard, StageOutput


def judgments_file(tmp_path, rows):
    path = tmp_path / "j.parquet"
    full = [
        {
            "url_hash": None,
            "raw": "",
            "probs": None,
            "expected": None,
            "bm25_rank": 1,
            "rerank_rank": 1,
            "clicked": False,
            "extract_verbatim": None,
            **r,
        }
        for r in rows
    ]
    pq.write_table(pa.Table.from_pylist(full, schema=arrow_schema("judgments")), path)
    return path


def test_complexity_by_hand(tmp_path):
    """Completeness over binarised answers (level >= 4): log(m_d) / log(K) averaged over answering documents."""
    rows = [
        # q1 (K=2): d1 answers both (5, 4), d2 none (3, 0): answerable, completeness log 2 / log 2 = 1
        {"qid": "q1", "subq_id": "q1-0", "docid": "d1", "level": 5},
        {"qid": "q1", "subq_id": "q1-1", "docid": "d1", "level": 4},
        {"qid": "q1", "subq_id": "q1-0", "docid": "d2", "level": 3},
        {"qid": "q1", "subq_id": "q1-1", "docid": "d2", "level": 0},
        # q2 (K=3): each document answers one sub-question, the third is never answered: completeness 0
        {"qid": "q2", "subq_id": "q2-0", "docid": "e1", "level": 5},
        {"qid": "q2", "subq_id": "q2-1", "docid": "e1", "level": 0},
        {"qid": "q2", "subq_id": "q2-2", "docid": "e1", "level": 0},
        {"qid": "q2", "subq_id": "q2-0", "docid": "e2", "level": 0},
        {"qid": "q2", "subq_id": "q2-1", "docid": "e2", "level": 4},
        {"qid": "q2", "subq_id": "q2-2", "docid": "e2", "level": None},
        # q3 (K=3): f1 answers two, f2 one: completeness (log 2 / log 3 + 0) / 2
        {"qid": "q3", "subq_id": "q3-0", "docid": "f1", "level": 4},
        {"qid": "q3", "subq_id": "q3-1", "docid": "f1", "level": 5},
        {"qid": "q3", "subq_id": "q3-2", "docid": "f1", "level": 2},
        {"qid": "q3", "subq_id": "q3-0", "docid": "f2", "level": 4},
        {"qid": "q3", "subq_id": "q3-1", "docid": "f2", "level": 1},
        {"qid": "q3", "subq_id": "q3-2", "docid": "f2", "level": 3},
        # q4 (K=1): one answering document covers the whole question
        {"qid": "q4", "subq_id": "q4-0", "docid": "g1", "level": 4},
    ]
    folder = tmp_path / "judgments"
    folder.mkdir()
    stage = StageOutput(folder, "judgments", "by-hand")
    path = stage.path(Shard())
    path.write_bytes(judgments_file(tmp_path, rows).read_bytes())
    stage.mark_done(Shard())
    questions = conform(
        pa.table(
            {"qid": ["q1", "q2", "q3", "q4", "q5"], "question": ["?"] * 5, "split": ["train"] * 5, "clicked": [[]] * 5}
        ),
        "questions",
    )
    subqs = pa.table(
        {
            "subq_id": ["q1-0", "q1-1", "q2-0", "q2-1", "q2-2", "q3-0", "q3-1", "q3-2", "q4-0", "q5-0"],
            "qid": ["q1", "q1", "q2", "q2", "q2", "q3", "q3", "q3", "q4", "q5"],
        }
    )
    index = topic_index(questions, subqs, ["train"])
    table = with_complexity(
        questions, index, judgment_inputs([folder]), Complexity(answer_level=4, completeness_threshold=0.5)
    )
    result = {r["qid"]: {c: r[c] for c in COLUMNS} for r in table.to_pylist()}
    assert result["q1"] == {
        "answerable": True,
        "answerable_share": 1.0,
        "completeness": 1.0,
        "retrieval_complex": False,
    }
    assert result["q2"] == {
        "answerable": False,
        "answerable_share": pytest.approx(2 / 3),
        "completeness": 0.0,
        "retrieval_complex": True,
    }
    assert result["q3"]["completeness"] == pytest.approx(math.log(2) / math.log(3) / 2)
    assert result["q3"]["answerable_share"] == pytest.approx(2 / 3) and result["q3"]["retrieval_complex"] is True
    assert result["q4"] == {
        "answerable": True,
        "answerable_share": 1.0,
        "completeness": 1.0,
        "retrieval_complex": False,
    }
    assert result["q5"] == dict.fromkeys(COLUMNS), "a question without judgments has null complexity"


def budget_profile(small_pipeline, **bandit):
    profile = small_pipeline["profile"]
    return profile.model_copy(update={"bandit": profile.bandit.model_copy(update=bandit)})


def test_budgeted_judging_spends_the_budget_and_resumes_without_rejudging(small_pipeline, tmp_path):
    from generation.backends import make_judge

    profile = budget_profile(small_pipeline, relevant_level=3)
    args = (small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"])
    reference = BudgetedJudgeStage(profile, tmp_path / "once", *args, 0.25, "topk-bernoulli").run()
    rows = pq.read_table(reference.outputs[0]).to_pylist()
    assert (
        reference.judged == len(rows) == pytest.approx(0.25 * reference.full_pairs, abs=len({r["qid"] for r in rows}))
    )
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
        BudgetedJudgeStage(
            profile, tmp_path / "killed", *args, 0.25, "topk-bernoulli", judge=DiesAfterThreeRounds()
        ).run()
    resumed = BudgetedJudgeStage(profile, tmp_path / "killed", *args, 0.25, "topk-bernoulli", judge=real).run()
    assert resumed.judged_now == reference.judged - 3 * len({r["qid"] for r in rows})
    assert pq.read_table(resumed.outputs[0]).to_pylist() == rows

    full = JudgeStage(profile, tmp_path / "full", *args).run()
    assert full.pairs == reference.full_pairs
    assert reference.relevant <= sum(n for level, n in full.levels.items() if level >= 3)
