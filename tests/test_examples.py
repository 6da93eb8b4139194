"""The scripts of examples/, each run as a user runs it (`python examples/NAME.py ...`, a new process) on the inputs
the suite already builds: test_texts's synthetic release and ClueWeb22 copy, the small pipeline (the pilot, the
served judge against the loopback stand-in server) and the authors' ratings of tests/fixtures/import_labels."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from builder.release.layout import config, present_splits
from builder.training.texts import write_texts
from generation.profiles import load_profile
from tests.test_import_labels import LABELS, hub_questions
from tests.test_pilot import B_CUTS
from tests.test_texts import SYNTHETIC_RELEASE, copy  # noqa: F401 - test_texts's release (conftest.py builds it) and ClueWeb22 copy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args, expect_code: int = 0) -> subprocess.CompletedProcess:
    """`python examples/NAME ARGS` from the repository root, as its docstring says to run it."""
    command = [sys.executable, str(EXAMPLES / name), *map(str, args)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == expect_code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_every_example_is_short_documented_and_tested():
    tested = Path(__file__).read_text()
    for script in sorted(EXAMPLES.glob("*.py")):
        text = script.read_text()
        assert len(text.splitlines()) < 150, script.name
        assert text.startswith('"""') and f"python examples/{script.name}" in text.split('"""')[1], script.name
        assert f'run_example("{script.name}"' in tested, f"{script.name} has no test here"
        assert f"examples/{script.name}" in (EXAMPLES / "README.md").read_text(), script.name


@pytest.mark.subprocess
def test_load_release_prints_every_config_and_split_with_its_rows(release):
    out = run_example("load_release.py", "--release", release).stdout
    listed = {tuple(line.split()[:3]) for line in out.splitlines() if line.split()[3:4] == ["rows"]}
    card = yaml.safe_load((release / "README.md").read_text().split("---")[1])  # the card's YAML: its configs
    names = [c["config_name"] for c in card["configs"]]
    expected = {
        (name, split, f"{sum(pq.read_metadata(p).num_rows for p in config(name).files(release, split)):,}")
        for name in names
        for split in present_splits(release)
        if config(name).files(release, split)
    }
    assert listed == expected and len(names) > 10
    levels = Counter(pq.read_table(config("judgments").files(release, "train"), columns=["level"])["level"].to_pylist())
    table = out.split("judgments (train)\n")[1].splitlines()
    assert {line.split()[0]: line.split()[1] for line in table} == {
        ("unparsed" if level is None else str(level)): f"{n:,}" for level, n in levels.items()
    }


@pytest.mark.subprocess
def test_training_rows_with_another_k(release, copy, tmp_path):  # noqa: F811
    write_texts(release, copy["root"], tmp_path / "texts")
    out = tmp_path / "k5"
    args = ["--release", release, "--texts", tmp_path / "texts", "--out", out, "--negatives", 5]
    stdout = run_example("training_rows.py", *args, "--fill-order", "judged,other_question").stdout
    texts = pq.read_table(out / "sentence-transformers" / "train.parquet")
    ids = pq.read_table(out / "sentence-transformers-ids" / "train.parquet")
    assert texts.column_names == ["anchor", "positive", *(f"negative_{i}" for i in range(1, 6))]
    assert texts.num_rows == ids.num_rows > 0 and f"train: {texts.num_rows:,} rows" in stdout
    assert all(len(n) == len(set(n)) == 5 for n in ids["negative_ids"].to_pylist())
    assert {s for row in ids["negative_sources"].to_pylist() for s in row} <= {"judged", "other_question"}
    assert "5 negatives a row" in stdout and "fill order judged, other_question" in stdout


@pytest.fixture
def pilot_profile(tmp_path, small_pipeline):
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small_pipeline["profile"].model_dump()))
    return path


@pytest.mark.subprocess
def test_compare_judges_runs_the_pilot_and_prints_its_record(small_pipeline, pilot_profile, tmp_path):
    out = tmp_path / "pilot"
    args = ["--a", pilot_profile, "--b", pilot_profile, "--b-set", B_CUTS, "--out", out]
    inputs = ["--subquestions", small_pipeline["questions"], "--candidates", small_pipeline["candidates"]]
    sample = ["--index", small_pipeline["index"], "--pairs", 150, "--questions", 2, "--resamples", 100]
    stdout = run_example("compare_judges.py", *args, *inputs, *sample).stdout
    record = json.loads((out / "pilot.json").read_text())
    assert record["sample"]["taken"]["pairs"] == 150 and "sample: 150 pairs of 2 questions" in stdout
    assert f"exact_agreement: {record['agreement']['measures']['exact_agreement']:.3f}" in stdout
    assert record["differences"][0] in stdout and stdout.rstrip().endswith(record["verdict"]["line"])


@pytest.mark.subprocess
def test_import_labels_builds_a_release_that_validates_within_the_bounds_given(tmp_path):
    questions = hub_questions(tmp_path)
    ratings = LABELS / "ratings.jsonl"
    (tmp_path / "bounds.yaml").write_text("unparsed_max: 0.2\n")  # the fixture holds 3 unparsed of 27 on purpose
    args = ["--subquestions", questions, "--out", tmp_path / "imported", "--expect", tmp_path / "bounds.yaml"]
    stdout = run_example("import_labels.py", ratings, *args).stdout
    assert "imported: 27 judgments from 5 lines" in stdout and "FAIL" not in stdout
    checks = [line for line in stdout.splitlines() if line.startswith("ok ")]
    assert checks and stdout.rstrip().endswith(f"{len(checks)} of {len(checks)} checks passed")
    qrels = pq.read_table(config("qrels").files(tmp_path / "imported" / "release", "train"))
    assert qrels.num_rows == 24  # the 27 less the authors' -1, -2 and 7: no level, no qrel
    failed = run_example(
        "import_labels.py", ratings, "--subquestions", questions, "--out", tmp_path / "b", expect_code=1
    )
    assert any(line.startswith("FAIL") and "unparsed" in line for line in failed.stdout.splitlines()), failed.stdout


@pytest.mark.subprocess
def test_served_judge_judges_through_the_server_given(small_pipeline, server_profile, standin, tmp_path):
    out = tmp_path / "served"
    inputs = ["--subquestions", small_pipeline["questions"], "--candidates", small_pipeline["candidates"]]
    args = ["--endpoint", standin.endpoint, "--profile", server_profile, *inputs, "--index", small_pipeline["index"]]
    result = run_example("served_judge.py", *args, "--out", out)
    judged = pq.read_table(next(out.glob("judgments-*.parquet")))
    # every pair went through the server, after the backend's one start-up probe (generation/backends/openai_server.py)
    assert standin.answers() == judged.num_rows + 1 and judged.num_rows > 0
    assert f"pairs: {judged.num_rows:,}; statuses: ok {judged.num_rows:,}" in result.stdout
    assert "judge: standin-judge (openai server" in result.stdout
    written = result.stderr.split("profile for build-release: ")[1].split()[0]
    assert load_profile(written).judge.openai.endpoint == standin.endpoint
