"""The scripts of examples/, each run as a user runs it (`python examples/NAME.py ...`, a new process) on the inputs
the suite already builds: test_texts's synthetic release and ClueWeb22 copy, the small pipeline (the pilot, the
served judge against the loopback stand-in server) and the authors' ratings of tests/fixtures/import_labels. Each
wrong argument ends in the kit's one line `error: ...` (exit status 1), never a traceback. The commands the examples'
README and docstrings print run on the demo's own outputs in tests/end_to_end/test_demo_paste.py."""

import json
import os
import shutil
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from builder.release.layout import config, present_splits
from builder.training.texts import write_texts
from generation.profiles.profile import load_profile
from tests.builder.pilot.test_run import B_CUTS
from tests.builder.training.test_texts import SYNTHETIC_RELEASE, copy  # noqa: F401 - test_texts's release (conftest.py builds it) and ClueWeb22 copy
from tests.generation.stages.test_import_labels import LABELS, hub_questions

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args, expect_code: int = 0, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python examples/NAME ARGS` from the repository root, as its docstring says to run it."""
    command = [sys.executable, str(EXAMPLES / name), *map(str, args)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == expect_code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result


def one_line_error(name: str, *args, cwd: Path = ROOT) -> str:
    """The example's error on bad input: exit status 1, its last stderr line `error: ...`, and no traceback."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), result.stderr
    return last


def test_every_example_is_short_documented_and_tested():
    tested = Path(__file__).read_text()
    for script in sorted(EXAMPLES.glob("*.py")):
        text = script.read_text()
        assert len(text.splitlines()) < 150, script.name
        assert text.startswith('"""') and f"python examples/{script.name}" in text.split('"""')[1], script.name
        assert f'run_example("{script.name}"' in tested, f"{script.name} has no test here"
        assert f'one_line_error("{script.name}"' in tested, f"{script.name}'s bad input has no test here"
        assert text.rstrip().endswith('if __name__ == "__main__":\n    run(main)'), "the kit's error lines"
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
def test_load_release_never_reads_another_folders_cache(release, tmp_path):
    """`datasets` keys a local folder's cache by its name and card YAML: a second folder of the same name whose
    `queries` train file is gone read the first one's cache (118 rows). The example reads each folder afresh."""
    first, second = tmp_path / "a" / release.name, tmp_path / "b" / release.name
    shutil.copytree(release, first)
    shutil.copytree(release, second)
    for path in config("queries").files(second, "train"):
        path.unlink()
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "cache")}  # one cache for both runs
    rows = sum(pq.read_metadata(p).num_rows for p in config("queries").files(first, "train"))
    read = run_example("load_release.py", "--release", first, "--config", "queries", env=env).stdout
    assert f"queries          train  {rows:>8,} rows" in read
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "load_release.py"), "--release", str(second), "--config", "queries"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1 and "queries          train" not in result.stdout, result.stdout
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {second}: datasets cannot load queries/train: ")
    assert f"`researchy-subq validate {second}` says what is wrong with it" in result.stderr


@pytest.mark.subprocess
def test_load_release_bad_input_is_one_line(release, tmp_path):
    (tmp_path / "a-file").write_text("")
    (tmp_path / "not-a-release").mkdir()
    missing = tmp_path / "nowhere"
    assert one_line_error("load_release.py", "--release", missing).startswith(
        f"error: {missing} (no such folder; read as a Hub repo): datasets cannot load its config names: "
    )
    assert one_line_error("load_release.py", "--release", tmp_path / "a-file") == (
        f"error: {tmp_path / 'a-file'}: not a folder (a release is a folder)"
    )
    assert one_line_error("load_release.py", "--release", tmp_path / "not-a-release") == (
        f"error: {tmp_path / 'not-a-release'}: not a release folder (no README.md; `researchy-subq build-release` "
        "writes one)"
    )
    unknown = one_line_error("load_release.py", "--release", release, "--config", "judgements")
    assert unknown.startswith(f"error: {release}: no config judgements; its configs: judgments, level-0, ")


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


@pytest.mark.subprocess
def test_training_rows_bad_input_is_one_line(release, copy, tmp_path):  # noqa: F811
    texts = tmp_path / "texts"
    write_texts(release, copy["root"], texts)
    (tmp_path / "a-file").write_text("")
    good = ["--release", release, "--texts", texts]
    cases = {
        ("--release", tmp_path / "nowhere", "--texts", texts): f"error: {tmp_path / 'nowhere'}: no such folder",
        ("--release", tmp_path / "a-file", "--texts", texts): "not a folder (a release is a folder)",
        (*good, "--negatives", 0): "error: --negatives 0: at least 1",
        (*good, "--fill-order", "judged,bogus"): "error: --fill-order 'judged,bogus': name each of judged, ",
        ("--release", release, "--texts", tmp_path / "no-texts"): "not a folder `researchy-subq texts` wrote",
        (*good, "--out", tmp_path / "a-file"): f"error: {tmp_path / 'a-file'}: is a file; --out takes a folder",
    }
    for args, said in cases.items():  # an --out in the case comes last, so it is the one argparse keeps
        assert said in one_line_error("training_rows.py", "--out", tmp_path / "out", *args)


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
def test_compare_judges_bad_input_is_one_line(tmp_path):
    """Each refused before a pair is judged (the inputs' folders are read last)."""
    (tmp_path / "a-file").write_text("")
    out = ["--out", tmp_path / "pilot"]
    cases = {
        ("--a", "no-such-profile", *out): "error: no bundled profile 'no-such-profile'",
        ("--b-set", "judge.bogus=1", *out): "key judge.bogus: unknown key",
        ("--pairs", 0, *out): "error: --pairs 0: must be >= 1",
        ("--resamples", -1, *out): "error: --resamples -1: must be >= 0",
        ("--candidates", tmp_path / "nowhere", *out): f"error: {tmp_path / 'nowhere'}: no such folder",
        ("--out", tmp_path / "a-file"): f"error: {tmp_path / 'a-file'}: is a file; --out takes a folder",
    }
    for args, said in cases.items():
        assert said in one_line_error("compare_judges.py", *args)


@pytest.mark.subprocess
def test_import_labels_builds_a_release_that_validates_within_the_bounds_given(tmp_path):
    questions = hub_questions(tmp_path)
    ratings = LABELS / "ratings.jsonl"
    (tmp_path / "bounds.yaml").write_text("unparsed_max: 0.2\n")  # the fixture holds 3 unparsed of 27 on purpose
    args = ["--subquestions", questions, "--out", tmp_path / "imported", "--expect", tmp_path / "bounds.yaml"]
    stdout = run_example("import_labels.py", ratings, *args).stdout
    assert "imported: 27 judgments from 5 lines" in stdout and "FAIL" not in stdout
    rows = [line.split()[0] for line in stdout.splitlines() if line.split()[:1] in (["ok"], ["skipped"])]
    passed, skipped = rows.count("ok"), rows.count("skipped")
    assert passed > 10 and stdout.rstrip().endswith(f"{passed} of {passed + skipped} checks passed, {skipped} skipped")
    # the imported labels have no prompt, and validate ran without loads only where told: each skip says why
    assert (
        "skipped  the card's verbatim judge prompt is the kit's, with the manifest's sha256: imported labels" in stdout
    )
    qrels = pq.read_table(config("qrels").files(tmp_path / "imported" / "release", "train"))
    assert qrels.num_rows == 24  # the 27 less the authors' -1, -2 and 7: no level, no qrel
    failed = run_example(
        "import_labels.py", ratings, "--subquestions", questions, "--out", tmp_path / "b", expect_code=1
    )
    assert any(line.startswith("FAIL") and "unparsed" in line for line in failed.stdout.splitlines()), failed.stdout
    assert "checks failed (" in failed.stdout.splitlines()[-1]


@pytest.mark.subprocess
def test_import_labels_bad_input_is_one_line(tmp_path):
    questions = hub_questions(tmp_path)
    ratings = LABELS / "ratings.jsonl"
    (tmp_path / "a-file").write_text("")
    (tmp_path / "misspelt.yaml").write_text("unparsed_maximum: 0.2\n")
    out = ["--subquestions", questions, "--out", tmp_path / "imported"]
    cases = {
        (tmp_path / "nowhere.jsonl", *out): f"error: {tmp_path / 'nowhere.jsonl'}:0: no such file",
        (tmp_path, *out): f"error: {tmp_path}:0: not a file",
        (ratings, "--subquestions", tmp_path / "nowhere"): f"error: {tmp_path / 'nowhere'}: no such folder",
        (ratings, *out, "--expect", tmp_path / "misspelt.yaml"): "unknown keys ['unparsed_maximum']",
        (ratings, *out, "--profile", "no-such-profile"): "error: no bundled profile 'no-such-profile'",
        (ratings, "--subquestions", questions, "--out", tmp_path / "a-file"): "is a file; --out takes a folder",
    }
    for args, said in cases.items():
        assert said in one_line_error("import_labels.py", *args)


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


@pytest.mark.subprocess
def test_served_judge_takes_another_profiles_judge_and_the_servers_model_name(
    small_pipeline, pilot_profile, server_profile, tmp_path
):
    """The pairs' own profile (the small pipeline's, a stand-in judge) with the judge section of another (the
    served chat Llama), through a server that answers to another name than the profile's served_model."""
    from builder.standins.openai_server import StandIn

    server = StandIn(model="renamed-judge")
    try:
        inputs = ["--subquestions", small_pipeline["questions"], "--candidates", small_pipeline["candidates"]]
        args = ["--endpoint", server.endpoint, "--profile", pilot_profile, "--judge", server_profile, *inputs]
        out = tmp_path / "served"
        result = run_example("served_judge.py", *args, "--index", small_pipeline["index"], "--served-model", "renamed-judge", "--out", out)  # fmt: skip
        assert server.answers() > 1 and "judge: renamed-judge (openai server" in result.stdout
    finally:
        server.close()
    written = load_profile(result.stderr.split("profile for build-release: ")[1].split()[0])
    pipeline, judge = load_profile(pilot_profile), load_profile(server_profile)
    assert written.name == f"{pipeline.name}-{judge.name}-judge"  # its judge is openai already: no -openai
    assert (written.bm25, written.rerank, written.pool) == (pipeline.bm25, pipeline.rerank, pipeline.pool)
    assert written.judge.model == judge.judge.model and written.judge.openai.served_model == "renamed-judge"


@pytest.mark.subprocess
def test_served_judge_bad_input_is_one_line(small_pipeline, server_profile, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # nothing listens once the socket is closed
    (tmp_path / "a-file").write_text("")
    inputs = ["--subquestions", small_pipeline["questions"], "--candidates", small_pipeline["candidates"]]
    inputs += ["--index", small_pipeline["index"], "--out", tmp_path / "served"]
    served = ["--profile", server_profile, *inputs]  # an --out in the case comes last, so it is the one kept
    cases = {
        ("--endpoint", closed, *served): f"error: openai backend ({closed}): cannot reach the server",
        ("--endpoint", "gpu-node:8000", *served): "error: --endpoint/--concurrency: judge.openai.endpoint: ",
        ("--endpoint", closed, "--concurrency", 0, *served): "judge.openai.concurrency: Input should be greater",
        ("--endpoint", closed, "--judge", "no-such-profile", *served): "error: no bundled profile 'no-such-profile'",
        # the small pipeline's pairs under the paper profile's pool: made under another profile
        ("--endpoint", closed, "--profile", "paper", *inputs): "made under config",
        ("--endpoint", closed, *served, "--out", tmp_path / "a-file"): "is a file; --out takes a folder",
    }
    for args, said in cases.items():
        assert said in one_line_error("served_judge.py", *args)
