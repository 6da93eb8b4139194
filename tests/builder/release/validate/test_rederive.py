"""A release that cannot lie: every determined column is re-derived by `validate`, so a corruption
that is RE-SEALED (checksums, sizes, row counts, statistics, card counts and plot made consistent again, as a
careless merge script would) is still caught, and by the semantic check alone. The corruptions are those of
scripts/hostile.py (builder/standins/release_faults.py)."""

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from builder.release.contract import PromptRef
from builder.release.validate.folder import Report, validate
from builder.release.validate.rederive import Rederivation
from builder.standins.release_faults import DISTRIBUTION_FAULTS, GENERATE_FAULTS, failed_keys
from generation.judging.parsing import STAND_IN_RAW, r3a_raw
from generation.judging.prompts import get_prompt
from generation.profiles.profile import load_profile
from generation.storage.schema import arrow_schema


def distribution_profile():
    paper = load_profile("paper")
    return paper.model_copy(update={"judge": paper.judge.model_copy(update={"mode": "distribution"})})


# 22 candidates per question: some are admitted by the reranker alone
SYNTHETIC = dict(subquestions=400, judgments=8_400, test_share=0.25, shards=2, seed=11, unparsed_share=0.004)


@pytest.fixture(scope="module")
def generate_release(synthetic_release):
    return synthetic_release("generate", load_profile("paper"), rows_per_file=3000, **SYNTHETIC)[0]


@pytest.fixture(scope="module")
def distribution_release(synthetic_release):
    return synthetic_release("distribution", distribution_profile(), rows_per_file=3000, **SYNTHETIC)[0]


def test_fresh_releases_of_both_modes_validate(generate_release, distribution_release):
    for release in (generate_release, distribution_release):
        report = validate(release, load=False)
        assert report.ok, [(c.name, c.examples) for c in report.checks if not c.ok]


def caught_by_the_semantic_check_alone(release, tmp_path, fault):
    corrupt, allowed, required = fault
    broken = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, broken)
    corrupt(broken)
    report = validate(broken, load=False)
    failed = failed_keys(report)
    details = [(c.name, c.examples) for c in report.checks if not c.ok]
    assert required in failed and failed <= allowed, details
    for check in report.checks:
        for line in check.examples:  # one line each, naming a file (or the card/manifest) and a count or row
            assert "\n" not in line and (
                "data/" in line or "README.md" in line or "manifest.json" in line or "/" in line or ".png" in line
            ), line


@pytest.mark.parametrize("name", sorted(GENERATE_FAULTS))
@pytest.mark.slow
def test_validate_catches_each_resealed_corruption(generate_release, tmp_path, name):
    caught_by_the_semantic_check_alone(generate_release, tmp_path, GENERATE_FAULTS[name])


@pytest.mark.parametrize("name", sorted(DISTRIBUTION_FAULTS))
@pytest.mark.slow
def test_validate_catches_each_resealed_distribution_corruption(distribution_release, tmp_path, name):
    caught_by_the_semantic_check_alone(distribution_release, tmp_path, DISTRIBUTION_FAULTS[name])


# --- the rules no synthetic release exercises: the stand-in, r3a, a 0-2 scale, engine errors, an unknown hash ---


def judgments(rows):
    base = {
        "subq_id": "q-0",
        "qid": "q",
        "docid": "d",
        "url_hash": None,
        "level": None,
        "raw": "",
        "status": "ok",
        "probs": None,
        "expected": None,
        "bm25_rank": 1,
        "rerank_rank": None,
        "clicked": False,
        "source": "bm25",
        "context_cut_by_tokens": False,
        "extract_verbatim": None,
    }
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=arrow_schema("judgments"))


def rederive(profile, rows, prompt_id=None, sha=None, imported=False):
    prompt = get_prompt(prompt_id or profile.judge.prompt)
    report = Report(Path("release"))
    stated = None if imported else PromptRef(id=prompt.id, sha256=sha or prompt.sha256)
    rule = Rederivation(stated, imported, profile, report)
    rule.add(judgments(rows), 0)
    rule.end_file("data/judgments/level_0/train-00000-of-00001.parquet")
    return {c.name.split(" ")[0]: c.examples for c in report.checks if not c.ok}


def test_the_stand_in_level_is_the_cut_points_its_cosine_reaches():
    demo = load_profile("demo")  # cut points 0.37, 0.46, 0.585, 0.63, 0.72
    good = [
        {"raw": STAND_IN_RAW.format(c), "level": level}
        for c, level in ((0.1, 0), (0.5, 2), (0.75, 5), (0.58496, 2), (0.58500, 3))
    ]
    assert rederive(demo, good) == {}
    # 0.58496 prints as 0.5850: at the cut point either side is accepted, elsewhere one level only
    assert rederive(demo, [{"raw": STAND_IN_RAW.format(0.58496), "level": 3}]) == {}
    found = rederive(demo, [{"raw": STAND_IN_RAW.format(0.5), "level": 3}, {"raw": "4", "level": 4}])
    assert len(found["level"]) == 2 and "gives level 2 (ok), stored 3 (ok)" in found["level"][1]
    assert "not a stand-in judgment" in found["level"][0] and "(1 rows)" in found["level"][0]


def test_r3a_may_turn_an_ok_grade_into_not_verbatim_and_nothing_else():
    paper = load_profile("paper")
    r3a = paper.model_copy(update={"judge": paper.judge.model_copy(update={"prompt": "r3a"})})
    answer = "<think> x </think> <extract> a fragment </extract> <score> 2 </score>"
    rows = [
        {"raw": r3a_raw("find facts", answer), "level": 2, "extract_verbatim": True},
        {"raw": r3a_raw("find facts", answer), "level": None, "status": "not_verbatim", "extract_verbatim": False},
        {"raw": r3a_raw("the intent <score> 0 </score>", answer), "level": 2, "extract_verbatim": True},
        {"raw": r3a_raw("x", "<score> 2 </score>"), "level": None, "status": "no_digit"},
    ]
    assert rederive(r3a, rows) == {}
    found = rederive(
        r3a,
        [
            {"raw": r3a_raw("x", answer), "level": 1, "extract_verbatim": True},
            {"raw": r3a_raw("x", answer), "level": None, "status": "not_verbatim", "extract_verbatim": True},
        ],
    )
    assert any("stored 1" in e for e in found["level"]) and any("extract_verbatim" in e for e in found["level"])


def test_an_ok_level_off_the_prompt_scale_and_engine_errors_with_probabilities_are_refused():
    paper = load_profile("paper")
    umbrela = paper.model_copy(update={"judge": paper.judge.model_copy(update={"prompt": "umbrela"})})
    found = rederive(
        umbrela,
        [
            {"raw": "<score> 4 </score>", "level": 4},
            {"raw": "Timeout", "level": None, "status": "engine_error", "probs": [0.5, 0.5, 0.0]},
            {"raw": "Timeout", "level": None, "status": "engine_error"},
        ],
    )
    assert any("off the prompt's scale 0-2" in e for e in found["level"])
    assert any("probabilities with a level not from a distribution" in e for e in found["level"])


def test_a_prompt_hash_the_kit_does_not_know_is_a_failure_not_a_guess():
    found = rederive(load_profile("paper"), [{"raw": "3", "level": 3}], sha="0" * 64)
    assert "its parser" in found["level"][0] or "parser is not this kit's" in found["level"][0]


def test_distribution_ties_go_to_the_lowest_level():
    profile = distribution_profile()
    tie = [0.4, 0.0, 0.4, 0.1, 0.1, 0.0]
    mean = sum(p * lv for lv, p in enumerate(tie))
    assert rederive(profile, [{"raw": "0", "level": 0, "probs": tie, "expected": mean}]) == {}
    found = rederive(profile, [{"raw": "2", "level": 2, "probs": tie, "expected": mean}])
    assert "level 2, argmax 0" in found["distribution"][0]


def test_imported_labels_keep_no_text_no_pool_and_their_batch_answers_parse():
    """import-labels rows: `imported` levels without raw, the authors' sentinels as statuses without raw, OpenAI
    Batch answers with raw parsed by the profile prompt's parser, error lines `request_failed` with the error."""
    crux = load_profile("crux-code")
    none = {"bm25_rank": None, "source": None}
    rows = [
        {"raw": None, "level": 3, "status": "imported", **none},
        {"raw": None, "level": None, "status": "negative", **none},
        {"raw": "4", "level": 4, "status": "ok", **none},
        {"raw": "rate limited", "level": None, "status": "request_failed", **none},
    ]
    assert rederive(crux, rows, imported=True) == {}
    found = rederive(
        crux,
        [
            {"raw": "2", "level": 4, "status": "ok", **none},
            {"raw": None, "level": 9, "status": "imported", **none},
            {"raw": None, "level": 3, "status": "imported", "bm25_rank": 1, "source": "bm25"},
        ],
        imported=True,
    )
    assert any("gives level 2 (ok), stored 4" in e for e in found["level"])
    assert any("off the prompt's scale 0-5" in e for e in found["level"])
    assert "pool provenance on an imported label" in found["source"][0]
    assert (
        "with the judge's text"
        in rederive(crux, [{"raw": "3", "level": 3, "status": "imported", **none}], imported=True)["level"][0]
    )
