"""The `openai` backend and the batch files on the real engine: a real `vllm serve` and a real `vllm run-batch`
(vllm-cpu 0.32) against the in-process vLLM backend on the same pairs. Runs under `make test-vllm`; skipped where
vllm is not installed. One server for the module (builder/standins/vllm_server.py); the kill test restarts it.
"""

import json
import os
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
vllm = pytest.importorskip("vllm", reason="vLLM tests run under `make test-vllm` (.venv-vllm)")

from builder.standins.models import answer_with_digits, save_tiny_causal_lm  # noqa: E402
from builder.standins.vllm_server import VllmServer, engine_flags  # noqa: E402
from generation.backends.openai_server import make_judge  # noqa: E402
from generation.backends.vllm_adapter import VllmJudgeBackend  # noqa: E402
from generation.judging.batch_files import export_batch, export_judge  # noqa: E402
from generation.judging.batch_import import answer_grader, import_results  # noqa: E402
from generation.judging.judges import BackendUnavailable, LLMJudge  # noqa: E402
from generation.profiles.profile import JudgeConfig, OpenAIServer, load_profile  # noqa: E402
from generation.stages.judge import JudgeStage  # noqa: E402
from tests.generation.backends.test_vllm_backends import DOCUMENTS, MAX_MODEL_LEN, PAIRS, QUESTIONS  # noqa: E402
from tests.helpers import cli, plan_ids  # noqa: E402

pytestmark = pytest.mark.vllm
PLAN = [
    {"subq_id": f"7-{k}", "qid": "7", "docid": f"clueweb22-en0000-00-0000{d}"}
    for k in range(len(QUESTIONS))
    for d in range(len(DOCUMENTS))
]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The tiny Llama with Llama-3.3's chat template, answering with a digit, vLLM's smallest CPU head size."""
    directory = save_tiny_causal_lm(
        tmp_path_factory.mktemp("served-llama"),
        "LlamaConfig",
        "LlamaForCausalLM",
        2,
        chat="llama3",
        head_dim=32,
        max_position_embeddings=2048,
    )
    answer_with_digits(directory)
    return directory


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    running = VllmServer(model, MAX_MODEL_LEN, tmp_path_factory.mktemp("vllm-server") / "server.log").start()
    yield running
    running.kill()


@pytest.fixture(scope="module")
def in_process(model):
    return VllmJudgeBackend(str(model), judge_config(model, "generate"))


def judge_config(model, mode, endpoint="http://127.0.0.1:1/v1", shape="completions", **updates) -> JudgeConfig:
    data = load_profile("paper").judge.model_dump()
    return JudgeConfig.model_validate(
        {
            **data,
            "backend": "openai",
            "model": str(model),
            "mode": mode,
            "dtype": "float32",
            "tensor_parallel_size": 1,
            "max_model_len": MAX_MODEL_LEN,
            "context_words": 400,
            "openai": {"endpoint": endpoint, "request_shape": shape, "concurrency": 8},
            **updates,
        }
    )


def in_process_grades(in_process, model, mode, pairs=PAIRS):
    from transformers import AutoTokenizer

    config = judge_config(model, mode)
    return LLMJudge(config, in_process, AutoTokenizer.from_pretrained(str(model)), "vllm").grade(pairs)


def assert_same(got, expected):
    # vLLM's incremental detokenizer may put a space before a leading WordPiece token (test_vllm_backends.py)
    assert [g.raw.strip() for g in got] == [g.raw.strip() for g in expected]
    assert [(g.level, g.status, g.context_cut_by_tokens) for g in got] == [
        (g.level, g.status, g.context_cut_by_tokens) for g in expected
    ]
    for mine, theirs in zip(got, expected):
        assert (mine.probs is None) == (theirs.probs is None)
        if mine.probs is not None:
            assert mine.probs == pytest.approx(theirs.probs, abs=1e-3)
            assert mine.expected == pytest.approx(theirs.expected, abs=1e-3)


@pytest.mark.parametrize("mode", ["generate", "distribution"])
@pytest.mark.parametrize("shape", ["completions", "chat"])
def test_the_server_backend_grades_as_the_in_process_engine(server, in_process, model, shape, mode):
    judge = make_judge(judge_config(model, mode, server.endpoint, shape))
    got = judge.grade(PAIRS)
    judge.backend.close()
    expected = in_process_grades(in_process, model, mode)
    assert any(g.context_cut_by_tokens for g in expected), "the long document is cut to fit max_model_len"
    assert len({g.level for g in expected}) > 1 and all(g.status == "ok" for g in expected)
    assert_same(got, expected)


def test_export_run_batch_import_gives_the_in_process_rows(in_process, model, tmp_path):
    """Both modes through one `vllm run-batch`: it answers in input order (run_batch.py gathers the requests and
    writes their outputs in that order), so the output's halves are the two exports' results."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    keyed = list(zip(plan_ids(PLAN), PAIRS))
    judges, manifests = {}, {}
    for mode in ("generate", "distribution"):
        judges[mode] = export_judge(judge_config(model, mode, shape="chat"), tokenizer)
        manifests[mode] = export_batch(judges[mode], keyed, tmp_path / mode, profile_hash="test")
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join((tmp_path / m / "requests-00000.jsonl").read_text() for m in judges))
    output = tmp_path / "results.jsonl"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.run_batch",
            "-i",
            str(requests),
            "-o",
            str(output),
            *engine_flags(model, MAX_MODEL_LEN),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = output.read_text().splitlines()
    assert len(lines) == 2 * len(PAIRS)
    for half, mode in enumerate(judges):
        results = tmp_path / f"results-{mode}.jsonl"
        results.write_text("\n".join(lines[half * len(PAIRS) : (half + 1) * len(PAIRS)]) + "\n")
        imported = import_results(
            [results], plan_ids(PLAN), answer_grader(judges[mode]), manifests[mode].context_cut_by_tokens
        )
        assert imported.counts()["graded"] == len(PAIRS) and not imported.unresolved
        assert_same([imported.grades[cid] for cid in plan_ids(PLAN)], in_process_grades(in_process, model, mode))


def test_a_server_killed_mid_run_is_one_line_and_a_rerun_finishes_the_shard(server, model, small_pipeline, tmp_path):
    profile = small_pipeline["profile"]
    config = judge_config(
        model,
        "generate",
        server.endpoint,
        "completions",
        chunk_size=16,
        max_model_len=384,
        context_words=256,
        prompt="crux-code",
    )
    config = config.model_copy(
        update={"openai": OpenAIServer(**{**config.openai.model_dump(), "max_retries": 1, "retry_backoff_s": 0.1})}
    )
    stages = (
        tmp_path / "judgments",
        small_pipeline["questions"],
        small_pipeline["candidates"],
        small_pipeline["index"],
    )
    chunks_seen = []

    def kill_after_two_chunks(done, total=None):
        if total is None:
            chunks_seen.append(done)
            if len(chunks_seen) == 2:
                server.kill()

    judge = make_judge(config)
    with pytest.raises(BackendUnavailable) as caught:
        JudgeStage(profile.model_copy(update={"judge": config}), *stages, judge=judge).run(
            progress=kill_after_two_chunks
        )
    judge.backend.close()
    message = str(caught.value)
    assert "\n" not in message and "the server stopped answering" in message, message
    chunks = sorted((tmp_path / "judgments").glob("*.chunks/chunk-*.parquet"))
    assert len(chunks) == 2, "the chunks judged before the kill, and not the one in flight"

    server.start()  # on another port: the endpoint is outside the config hash, so the shard resumes
    moved = config.model_copy(update={"openai": config.openai.model_copy(update={"endpoint": server.endpoint})})
    judge = make_judge(moved)
    summary = JudgeStage(profile.model_copy(update={"judge": moved}), *stages, judge=judge).run()
    judge.backend.close()
    assert summary.chunks_done_before == 2 and summary.judged_now == summary.pairs - 32
    table = pq.read_table(tmp_path / "judgments" / "judgments-00000-of-00001.parquet")
    assert table.num_rows == summary.pairs > 32
    assert len(set(zip(table["subq_id"].to_pylist(), table["docid"].to_pylist()))) == table.num_rows
    assert set(table["status"].to_pylist()) == {"ok"}
    assert json.loads(json.dumps(summary.statuses)) == {"ok": summary.pairs}


def test_paper_judge_through_the_server_and_through_run_batch_then_a_valid_release(
    server, model, small_pipeline, tmp_path
):
    """The paper's judge section on the served model, from the command line: `judge --backend openai --endpoint`,
    then `build-release` and `validate`; and the same shard through `--export-batch`, a real `vllm run-batch` and
    `--import-batch`, which gives the served run's rows."""
    import yaml

    data = small_pipeline["profile"].model_dump()
    data["name"] = "paper-served"
    data["judge"] = {
        **load_profile("paper").judge.model_dump(),
        "backend": "vllm",
        "model": str(model),
        "dtype": "float32",
        "max_model_len": MAX_MODEL_LEN,
        "context_words": 256,
        "chunk_size": 64,
        "openai": {"endpoint": "http://127.0.0.1:1/v1", "request_shape": "chat"},
    }
    profile = tmp_path / "paper-served.yaml"
    profile.write_text(yaml.safe_dump(data))
    inputs = [
        "--subquestions",
        small_pipeline["questions"],
        "--candidates",
        small_pipeline["candidates"],
        "--index",
        small_pipeline["index"],
    ]

    def cli_ok(*args):
        code, output = cli(*args)
        assert code == 0, output
        return output

    cli_ok(
        "judge",
        "--profile",
        profile,
        *inputs,
        "--out",
        tmp_path / "served",
        "--backend",
        "openai",
        "--endpoint",
        server.endpoint,
    )
    cli_ok("judge", "--profile", profile, *inputs, "--out", tmp_path / "batched", "--export-batch", tmp_path / "batch")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.run_batch",
            "-i",
            str(tmp_path / "batch" / "requests-00000.jsonl"),
            "-o",
            str(tmp_path / "batch" / "out.jsonl"),
            *engine_flags(model, MAX_MODEL_LEN),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    cli_ok(
        "judge",
        "--profile",
        profile,
        *inputs,
        "--out",
        tmp_path / "batched",
        "--import-batch",
        tmp_path / "batch" / "out.jsonl",
    )

    def rows(folder):
        table = pq.read_table(next(folder.glob("judgments-*.parquet")))
        return sorted(
            (r["subq_id"], r["docid"], r["level"], r["status"], r["raw"].strip(), r["context_cut_by_tokens"])
            for r in table.to_pylist()
        )

    served = rows(tmp_path / "served")
    assert served == rows(tmp_path / "batched") and len(served) > 100
    assert {r[3] for r in served} == {"ok"}
    # the served run is the vllm profile judged through `--backend openai`: its own config hash, in the profile file
    # judge wrote beside the judgments
    served_profile = tmp_path / "served" / "paper-served-openai.yaml"
    assert load_profile(served_profile).judge.backend == "openai"
    cli_ok(
        "build-release",
        "--profile",
        served_profile,
        "--judgments",
        tmp_path / "served",
        "--questions",
        small_pipeline["questions"],
        "--out",
        tmp_path / "release",
    )
    summary = cli_ok("validate", tmp_path / "release").rstrip().splitlines()[-1]
    passed, total = re.match(r"(\d+) of (\d+) checks passed", summary).groups()
    assert int(passed) > 10 and summary == f"{passed} of {total} checks passed, {int(total) - int(passed)} skipped"
