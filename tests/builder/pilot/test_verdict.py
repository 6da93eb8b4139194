"""The pilot's verdict (builder/pilot/verdict.py) on real judged tables, and the pilot's writer guards and
argument refusals: a judge that says one level for everything never passes, a B that drops A's positives fails,
the bootstrap's lower end can be required; `OUT/a` a link is refused, a killed run's temporary sample is cleaned,
pilot.json is byte-stable, --seed -1 and a key the pilot does not compare are refused before anything is written."""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml
from sklearn.metrics import cohen_kappa_score

from builder.pilot.contract import PilotVerdict
from builder.pilot.measures import measure_agreement
from builder.pilot.options import PilotOptions
from builder.pilot.run import run_pilot
from builder.pilot.verdict import FAIL, PASS, UNDECIDED, VerdictRule, decide, verdict_problems
from generation.errors import ArgumentError
from generation.pilot.sample import SAMPLE_FILE
from generation.storage.atomic_files import LinkRefused
from tests.builder.pilot.test_run import B_CUTS, pilot_args
from tests.helpers import assert_one_line_error, cli_one_line

# options that name settings and folders; PilotOptions reads none of them until a pilot runs
ANY_SETTINGS = {"a": "paper", "b": "paper", **{k: Path(k) for k in ("subquestions", "candidates", "index", "out")}}


def judged(levels, questions=20):
    """A setting's judged sample: pair i in question i % questions, its level given."""
    n = len(levels)
    return pa.table(
        {
            "subq_id": [f"q{i % questions}-0" for i in range(n)],
            "qid": [f"q{i % questions}" for i in range(n)],
            "docid": [f"d{i}" for i in range(n)],
            "level": pa.array(levels, pa.int8()),
            "expected": pa.array([None] * n, pa.float32()),
            "status": ["ok"] * n,
        }
    )


def agreement_of(a_levels, b_levels, resamples=200):
    return measure_agreement(judged(a_levels), judged(b_levels), 5, 4, resamples, 0, "linear")


def test_a_judge_that_says_one_level_for_everything_cannot_pass():
    fours = [4] * 200
    agreement = agreement_of(fours, fours)
    assert np.isnan(cohen_kappa_score(fours, fours, weights="linear"))  # sklearn: undefined
    assert agreement.measures["kappa_linear"] is None and agreement.measures["spearman"] is None
    verdict = decide(agreement, VerdictRule())
    assert verdict.decision == UNDECIDED and not verdict.passed
    assert "setting A gave one level to every pair" in verdict.line
    assert "the linear-weighted kappa is undefined" in verdict.line and "PASS" not in verdict.line
    # one side constant, the other not: still no verdict
    rng = np.random.default_rng(0)
    varied = rng.integers(0, 6, 200).tolist()
    assert decide(agreement_of(varied, fours), VerdictRule()).decision == UNDECIDED


def test_a_b_that_drops_a_fifth_of_the_positives_fails_on_recall_whatever_its_kappa():
    rng = np.random.default_rng(1)
    a = rng.choice([0, 1, 2, 3, 4, 5], 1000, p=[0.3, 0.2, 0.15, 0.1, 0.15, 0.1]).tolist()
    positives = [i for i, level in enumerate(a) if level >= 4]
    b = list(a)
    for i in positives[: int(len(positives) * 0.18)]:
        b[i] = 3  # one level down: a small disagreement for the kappa, a lost positive for training
    agreement = agreement_of(a, b)
    kappa = agreement.measures["kappa_linear"]
    assert kappa == pytest.approx(cohen_kappa_score(a, b, weights="linear")) and kappa >= 0.8
    recall = agreement.answer.recall
    assert recall == pytest.approx(1 - int(len(positives) * 0.18) / len(positives))
    verdict = decide(agreement, VerdictRule())
    assert verdict.decision == FAIL, verdict.line
    assert f"B's recall of A's positives {recall:.3f} < 0.90" in verdict.line
    assert decide(agreement, VerdictRule(min_recall=0.8)).decision == PASS  # the bound is settable
    assert "recall of A's positives (level >= 4) >= 0.80" in VerdictRule(min_recall=0.8).text()


def test_the_lower_end_can_be_required_instead_of_the_point_estimate():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 6, 120).tolist()
    b = [level if rng.random() < 0.9 else min(5, level + 1) for level in a]
    agreement = agreement_of(a, b, resamples=300)
    low = agreement.confidence_95["kappa_linear"][0]
    rule = dict(threshold=round(low + 0.01, 2), min_recall=0.5, min_precision=0.5)
    assert agreement.measures["kappa_linear"] >= rule["threshold"] > low
    assert decide(agreement, VerdictRule(**rule)).decision == PASS
    strict = decide(agreement, VerdictRule(**rule, basis="lower end"))
    assert strict.decision == FAIL and f"(the interval's lower end) {low:.3f} <" in strict.line
    recall_low = agreement.answer.confidence_95["recall"][0]
    assert 0 < recall_low <= agreement.answer.recall
    with pytest.raises(ArgumentError, match="--require-lower-end with --resamples 0"):
        PilotOptions(**ANY_SETTINGS, resamples=0, require_lower_end=True)
    with pytest.raises(ArgumentError, match="--min-recall 1.5"):
        PilotOptions(**ANY_SETTINGS, min_recall=1.5)


def test_a_verdict_edited_against_its_figures_is_found():
    agreement = agreement_of([0, 1, 2, 3, 4, 5] * 30, [0, 1, 2, 3, 4, 5] * 30)
    verdict = decide(agreement, VerdictRule())
    stated = PilotVerdict.model_validate_json(verdict.model_dump_json(), strict=True)  # as a record reads it back
    assert verdict.decision == PASS and verdict_problems(agreement, stated) == []
    stated = stated.model_copy(update={"decision": FAIL, "passed": False})
    assert "verdict 'FAIL' (decision, passed differ)" in verdict_problems(agreement, stated)[0]


@pytest.fixture
def profile_file(tmp_path, small_pipeline):
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small_pipeline["profile"].model_dump()))
    return path


def test_the_pilot_refuses_bad_arguments_before_anything_is_written(small_pipeline, profile_file, tmp_path):
    out = tmp_path / "p"
    for more, fragment in (
        (("--seed", -1), "--seed -1: must be >= 0"),
        (("--b-set", "complexity.answer_level=3"), "--b-set 'complexity.answer_level=3': the pilot compares judge"),
        (("--min-precision", 2), "--min-precision 2.0: a share in [0, 1]"),
    ):
        code, output = cli_one_line(*pilot_args(profile_file, small_pipeline, out, *more))
        assert_one_line_error(code, output, fragment)
        assert not out.exists(), more


def test_the_pilot_writes_no_file_through_a_link_and_cleans_a_killed_runs_sample(
    small_pipeline, profile_file, tmp_path
):
    users = tmp_path / "users"
    users.mkdir()
    (users / "pilot-judgments-00000-of-00001.parquet").write_text("the user's own file\n")
    out = tmp_path / "p"
    out.mkdir()
    (out / "a").symlink_to(users)
    code, output = cli_one_line(*pilot_args(profile_file, small_pipeline, out))
    assert_one_line_error(code, output, f"{out / 'a'}: is a symbolic link")
    assert sorted(p.name for p in users.iterdir()) == ["pilot-judgments-00000-of-00001.parquet"]
    assert (users / "pilot-judgments-00000-of-00001.parquet").read_text() == "the user's own file\n"
    with pytest.raises(LinkRefused):  # the library refuses it as the command does
        folders = {k: small_pipeline[k] for k in ("candidates", "index")}
        run_pilot(PilotOptions(a=str(profile_file), b=str(profile_file), b_set=[B_CUTS], out=out, pairs=20, questions=2,
                               resamples=0, subquestions=small_pipeline["questions"], **folders))  # fmt: skip

    (out / "a").unlink()
    stale = out / f".{SAMPLE_FILE}.tmp-999999999-0badcafe"  # a killed writer's (no such pid)
    stale.write_bytes(b"half a file")
    code, output = cli_one_line(*pilot_args(profile_file, small_pipeline, out))
    assert code == 0, output
    assert not stale.exists() and not list(out.glob(".*.tmp-*"))
    first = (out / "pilot.json").read_bytes()
    (out / "pilot.json").unlink()
    code, output = cli_one_line(*pilot_args(profile_file, small_pipeline, out))  # every shard done: the record again
    assert code == 0 and (out / "pilot.json").read_bytes() == first
    assert "the rule: PASS when the linear-weighted kappa >= 0.80" in output
    assert "no prompt (a stand-in judge)" in output and "prompt crux-paper" not in output
