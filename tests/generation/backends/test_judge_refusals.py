"""A judge setting this machine cannot run is refused in one line naming the setting and what to do, before a lock,
a chunk or a profile is written (generation/backends/__init__.py `refuse_unrunnable`): `quantization: fp8` on a
transformers judge without a CUDA GPU, `backend: vllm` without vllm installed. A token budget no prompt fits is said
once, and the prompts are judged as before (generation/backends/batching.py)."""

from importlib.util import find_spec

import pytest
import torch
import yaml

from tests.generation.backends.test_batching import judge, judge_pairs
from tests.helpers import assert_one_line_error, cli_one_line

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU here runs fp8")
NO_VLLM = pytest.mark.skipif(find_spec("vllm") is not None, reason="vllm is installed here")


def judge_profile(tmp_path, small_pipeline, chat_llama, **judge):
    data = small_pipeline["profile"].model_dump()
    data["judge"] = {
        **data["judge"],
        "backend": "transformers",
        "model": str(chat_llama),
        "prompt": "crux-paper",
        "chat_template": True,
        "max_model_len": 512,
        "dtype": "float32",
        **judge,
    }
    path = tmp_path / "judge.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_judge(profile, small_pipeline, out, *extra):
    return cli_one_line(
        "judge",
        "--profile",
        profile,
        "--subquestions",
        small_pipeline["questions"],
        "--candidates",
        small_pipeline["candidates"],
        "--index",
        small_pipeline["index"],
        "--out",
        out,
        *extra,
    )


@NO_GPU
@pytest.mark.parametrize("variant", [(), ("--limit", "5"), ("--budget", "0.5")], ids=["full", "limit", "budget"])
def test_fp8_on_a_cpu_is_refused_before_anything_is_written(tmp_path, small_pipeline, chat_llama, variant):
    profile = judge_profile(tmp_path, small_pipeline, chat_llama, quantization="fp8", device="auto")
    out = tmp_path / "judgments"
    code, output = run_judge(profile, small_pipeline, out, *variant)
    assert_one_line_error(
        code,
        output,
        "judge.quantization: fp8 needs a CUDA GPU of compute capability >= 8.9",
        "Remove `quantization`",
        "(judge.device: auto, no CUDA GPU visible)",
    )
    assert not list(tmp_path.glob("judgments*")), "no folder, no _locks, no chunks"


@NO_VLLM
@pytest.mark.parametrize("how", ["profile", "--backend"])
def test_vllm_without_vllm_is_refused_before_anything_is_written(tmp_path, small_pipeline, chat_llama, how):
    """In the profile, or given as --backend (which writes a profile of its own beside the judgments once the run
    can go ahead)."""
    profile = judge_profile(tmp_path, small_pipeline, chat_llama, **({"backend": "vllm"} if how == "profile" else {}))
    out = tmp_path / "judgments"
    code, output = run_judge(profile, small_pipeline, out, *(["--backend", "vllm"] if how == "--backend" else []))
    assert_one_line_error(
        code,
        output,
        "judge.backend: vllm needs the vllm package, which this environment lacks:",
        "pip install 'researchy-subq-judgments[vllm]'",
        "or set judge.backend: transformers",
    )
    assert not out.exists()


def test_a_budget_no_prompt_fits_is_said_once_and_changes_no_grade(chat_llama, capsys):
    pairs = judge_pairs(1, 6)
    expected, _ = judge(chat_llama, "distribution", batch_size=8)
    small, backend = judge(chat_llama, "distribution", batch_size=8, max_batch_tokens=40)
    alone = sorted(len(small.encode_pair(p)[0]) for p in pairs)
    assert alone[0] > 40
    assert [g.probs for g in small.grade(pairs)] == [pytest.approx(g.probs, abs=1e-5) for g in expected.grade(pairs)]
    said = " ".join(capsys.readouterr().err.split())
    assert said.count("warning:") == 1
    assert (
        f"warning: judge.max_batch_tokens: 40 tokens is less than every one of the 6 prompts costs alone "
        f"({alone[0]:,} to {alone[-1]:,} tokens): each of those runs in a batch of its own, whatever batch_size says."
    ) in said
    small.grade(pairs)
    assert "warning:" not in capsys.readouterr().err, "once a backend"
    fitting, _ = judge(chat_llama, "distribution", batch_size=8, max_batch_tokens=alone[-1] * 8)
    fitting.grade(pairs)
    assert "warning:" not in capsys.readouterr().err
