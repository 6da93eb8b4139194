"""Labels that do not depend on the batch, or a measure of how much they do: the fp8 granularity
and vLLM's batch-invariant mode as profile settings, and the pilot's stability check (level flips, largest |dP|)."""

import json

import pytest
import torch
import yaml

from generation.backends.placement import check_fp8_device
from generation.backends.vllm_adapter import judge_engine_args, judge_engine_env
from generation.profiles.profile import ProfileError, load_profile, with_overrides
from tests.helpers import assert_one_line_error, cli_one_line

FP8_ON_TRANSFORMERS = ["judge.backend=transformers", "judge.quantization=fp8"]


def test_the_defaults_hash_as_before_and_per_row_or_batch_invariant_hash_apart():
    """per-tensor and batch_invariant false are the defaults, left out of the dump: every bundled profile keeps the
    config hash it had (its shards stay valid); per-row changes the labels, so it changes the judge's hash."""
    paper = load_profile("paper")
    assert "fp8_granularity" not in paper.judge.model_dump() and "batch_invariant" not in paper.judge.model_dump()
    assert paper.judge.fp8_granularity == "per-tensor" and paper.judge.batch_invariant is False
    fp8 = with_overrides(paper, FP8_ON_TRANSFORMERS, origin="test")
    per_row = with_overrides(paper, [*FP8_ON_TRANSFORMERS, "judge.fp8_granularity=per-row"], origin="test")
    stated = with_overrides(paper, [*FP8_ON_TRANSFORMERS, "judge.fp8_granularity=per-tensor"], origin="test")
    assert stated.config_hash() == fp8.config_hash() != per_row.config_hash()
    invariant = with_overrides(paper, ["judge.batch_invariant=true"], origin="test")
    assert invariant.config_hash() != paper.config_hash()


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["judge.fp8_granularity=per-row"], ["fp8_granularity: per-row", "backend vllm", "batch_invariant: true"]),
        (["judge.backend=transformers", "judge.fp8_granularity=per-row"], ["fp8_granularity", "quantization None"]),
        (["judge.fp8_granularity=per-token"], ["fp8_granularity", "'per-tensor' or 'per-row'"]),
        (["judge.backend=transformers", "judge.batch_invariant=true"], ["batch_invariant", "fp8_granularity: per-row"]),
    ],
)
def test_a_granularity_or_mode_the_backend_cannot_run_is_refused_naming_the_setting(overrides, fragments):
    with pytest.raises(ProfileError) as refused:
        with_overrides(load_profile("paper"), overrides, origin="--b-set")
    for fragment in fragments:
        assert fragment in str(refused.value)


def test_fp8_on_a_cpu_or_an_older_gpu_is_refused_with_torchaos_rule(monkeypatch):
    """On a CPU, fp8 needs a GPU (as before); on a GPU below compute capability 8.9, torchao's own rule
    (torchao/float8/inference.py `_check_hardware_support`: per-tensor and per-row both need >= 8.9) names the
    setting. No GPU here: the capability query is the one thing stood in for."""
    with pytest.raises(ValueError, match=r"quantization: fp8 needs a CUDA GPU of compute capability >= 8.9"):
        check_fp8_device("cpu", "per-row")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    with pytest.raises(ValueError, match=r"judge.fp8_granularity: per-row fp8 needs compute capability >= 8.9"):
        check_fp8_device("cuda:0", "per-row")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    check_fp8_device("cuda:0", "per-row")  # an H100: accepted


def test_batch_invariant_reaches_vllms_environment_not_its_engine_arguments():
    """vLLM 0.32 takes the mode from VLLM_BATCH_INVARIANT (docs.vllm.ai v0.32.0, features/batch_invariance), not from
    an `LLM(...)` argument: the adapter sets it before building the engine."""
    paper = load_profile("paper")
    invariant = with_overrides(paper, ["judge.batch_invariant=true"], origin="test")
    assert judge_engine_env(invariant.judge) == {"VLLM_BATCH_INVARIANT": "1"}
    assert judge_engine_env(paper.judge) == {}
    assert judge_engine_args("m", invariant.judge) == judge_engine_args("m", paper.judge)


def pilot(profile, pipeline, out, *b_set):
    return cli_one_line(
        "pilot",
        "--a", profile,
        "--b", profile,
        *b_set,
        "--subquestions", pipeline["questions"],
        "--candidates", pipeline["candidates"],
        "--index", pipeline["index"],
        "--out", out,
        "--pairs", 24,
        "--questions", 2,
        "--resamples", 20,
    )  # fmt: skip


def test_the_pilot_measures_a_setting_against_itself_at_batch_size_1(small_pipeline, chat_profile, tmp_path):
    """The recipe: the same setting, B at `judge.batch_size=1` (each pair alone in its forward). float32 on a CPU is
    batch-independent to rounding: no level flips, |dP| below 1e-4; the record and the printed line say both."""
    out = tmp_path / "pilot"
    code, output = pilot(chat_profile, small_pipeline, out, "--b-set", "judge.batch_size=1")
    assert code == 0, output
    record = json.loads((out / "pilot.json").read_text())
    assert record["differences"] == ["judge.batch_size: 8 -> 1"]
    stability = record["stability"]
    assert stability["pairs"] == stability["with_distribution"] == 24
    assert stability["level_flips"] == 0 and 0 <= stability["max_abs_dp"] < 1e-4
    assert "a stability check" in output and "label stability: 0 level flips of 24 pairs" in output
    assert "largest |dP(level)|" in output


def test_the_stability_figures_count_real_differences(small_pipeline, chat_profile, tmp_path):
    """Another prompt moves every distribution: the flips and |dP| are the pairs' own, recomputed from the shards."""
    import pyarrow.parquet as pq

    out = tmp_path / "pilot"
    code, output = pilot(chat_profile, small_pipeline, out, "--b-set", "judge.prompt=crux-paper-document-first")
    assert code == 0, output
    stability = json.loads((out / "pilot.json").read_text())["stability"]
    files = {s: out / s / "pilot-judgments-00000-of-00001.parquet" for s in "ab"}
    rows = {s: {(r["subq_id"], r["docid"]): r for r in pq.read_table(files[s]).to_pylist()} for s in "ab"}
    flips = sum(rows["a"][k]["level"] != rows["b"][k]["level"] for k in rows["a"])
    largest = max(max(abs(x - y) for x, y in zip(rows["a"][k]["probs"], rows["b"][k]["probs"])) for k in rows["a"])
    assert stability["level_flips"] == flips and stability["max_abs_dp"] == pytest.approx(largest, rel=1e-6)
    assert stability["max_abs_dp"] > 1e-3
    said = " ".join(output.split())  # another prompt is no stability check: its changes are plain disagreement
    assert f"disagreement: B gave another level than A to {flips:,} of" in said and "label stability" not in said


def test_label_stability_is_said_only_where_a_and_b_differ_in_batching_alone():
    from builder.pilot.contract import PilotStability
    from builder.pilot.stability import batching_only, stability_line

    paper = load_profile("paper")
    batch = with_overrides(paper, ["judge.batch_size=1"], origin="test")
    seqs = with_overrides(paper, ["judge.engine_args={max_num_seqs: 1}"], origin="test")
    words = with_overrides(paper, ["judge.context_words=64"], origin="test")
    both = with_overrides(paper, ["judge.batch_size=1", "judge.context_words=64"], origin="test")
    assert batching_only(paper, batch) and batching_only(paper, seqs)
    assert not batching_only(paper, words) and not batching_only(paper, both) and not batching_only(paper, paper)
    stability = PilotStability(pairs=24, level_flips=3, with_distribution=0, max_abs_dp=None, worst=None)
    assert stability_line(stability, True).startswith("label stability: 3 level flips of 24 pairs both graded (12.5%)")
    assert stability_line(stability, False).startswith(
        "disagreement: B gave another level than A to 3 of 24 pairs both graded (12.5%)"
    )


@pytest.mark.parametrize(
    ("overrides", "b_set", "fragments"),
    [
        (
            {"backend": "openai", "openai": {"endpoint": "http://127.0.0.1:9/v1", "request_shape": "completions"}},
            "judge.batch_size=1",
            ["judge.batch_size: setting A (backend openai) cannot run a pair alone", "VLLM_BATCH_INVARIANT=1"],
        ),
        ({"backend": "vllm"}, "judge.batch_size=1", ["judge.batch_size: setting A (backend vllm)", "max_num_seqs: 1"]),
    ],
)
def test_a_stability_check_on_a_backend_that_cannot_isolate_pairs_is_refused(
    small_pipeline, chat_profile, tmp_path, overrides, b_set, fragments
):
    data = yaml.safe_load(chat_profile.read_text())
    data["judge"].update(overrides)
    chat_profile.write_text(yaml.safe_dump(data))
    code, output = pilot(chat_profile, small_pipeline, tmp_path / "pilot", "--b-set", b_set)
    assert_one_line_error(code, output, *fragments)
    assert not (tmp_path / "pilot" / "a").exists(), "refused before anything is judged"
