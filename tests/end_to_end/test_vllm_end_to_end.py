"""The `paper` and `crux-code` profiles end to end with the reranker and the judge on vLLM (vllm-cpu), against the
same pipeline on the transformers backend: the same reranked runs, pools and judgments, and a valid release.
Runs under `make test-vllm`; skipped where vllm is not installed."""

import os

import pyarrow.parquet as pq
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
pytest.importorskip("vllm", reason="vLLM tests run under `make test-vllm` (.venv-vllm)")

from builder.release.assemble.folder import ReleaseOptions, build_release  # noqa: E402
from builder.release.validate.folder import validate  # noqa: E402
from builder.standins.models import answer_with_digits, save_tiny_causal_lm  # noqa: E402
from generation.stages.judge import JudgeStage  # noqa: E402
from generation.stages.pool import PoolStage  # noqa: E402
from generation.stages.rerank import RerankStage  # noqa: E402
from generation.stages.retrieve import RetrieveStage  # noqa: E402
from tests.end_to_end.test_sample_pipeline import tiny_profile

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_models(tmp_path_factory):
    """The end-to-end test's chat models with vLLM's smallest CPU head size (32)."""
    root = tmp_path_factory.mktemp("vllm-e2e-models")
    judge = save_tiny_causal_lm(
        root / "llama", "LlamaConfig", "LlamaForCausalLM", 2, chat="llama3", head_dim=32, max_position_embeddings=2048
    )
    answer_with_digits(judge)
    reranker = save_tiny_causal_lm(
        root / "qwen3", "Qwen3Config", "Qwen3ForCausalLM", 3, chat="qwen3", head_dim=32, max_position_embeddings=2048
    )
    return judge, reranker


def run_pipeline(profile, questions, sample_index, out):
    index, runs = sample_index / "index", out / "runs"
    RetrieveStage(profile, runs, questions, index).run()
    RerankStage(profile, runs, questions, runs, index).run()
    PoolStage(profile, out / "candidates", questions, runs, sample_index / "corpus").run()
    JudgeStage(profile, out / "judgments", questions, out / "candidates", index).run()
    return {
        stage: pq.read_table(out / folder / f"{stage}-00000-of-00001.parquet")
        for folder, stage in (("runs", "rerank"), ("candidates", "candidates"), ("judgments", "judgments"))
    }


@pytest.mark.parametrize("name", ["paper", "crux-code"])
def test_profile_end_to_end_on_vllm_matches_transformers(name, two_questions, sample_index, vllm_models, tmp_path):  # noqa: F811
    on_hf = tiny_profile(name, *vllm_models)
    on_vllm = on_hf.model_copy(
        update={
            "rerank": on_hf.rerank.model_copy(update={"backend": "vllm"}),
            "judge": on_hf.judge.model_copy(update={"backend": "vllm", "tensor_parallel_size": 1}),
        }
    )
    hf = run_pipeline(on_hf, two_questions, sample_index, tmp_path / "hf")
    vllm = run_pipeline(on_vllm, two_questions, sample_index, tmp_path / "vllm")

    key = ["qid", "rank"]
    assert vllm["rerank"].sort_by([(k, "ascending") for k in key]).column("docid") == hf["rerank"].sort_by(
        [(k, "ascending") for k in key]
    ).column("docid")
    assert vllm["rerank"].column("score").to_pylist() == pytest.approx(
        hf["rerank"].column("score").to_pylist(), abs=1e-3
    )
    assert vllm["candidates"].to_pylist() == hf["candidates"].to_pylist()
    columns = ["subq_id", "docid", "level", "status", "context_cut_by_tokens"]
    assert vllm["judgments"].select(columns).to_pylist() == hf["judgments"].select(columns).to_pylist()
    assert [r.strip() for r in vllm["judgments"].column("raw").to_pylist()] == [
        r.strip() for r in hf["judgments"].column("raw").to_pylist()
    ]
    assert vllm["judgments"].num_rows > 300

    release = tmp_path / "release"
    # the profile the judgments were made under (the tiny models' on vLLM), as their completion records say
    build_release(
        ReleaseOptions(
            judgments=[tmp_path / "vllm" / "judgments"],
            questions=[two_questions],
            out=release,
            profile=on_vllm,
            repo="test/researchy-subq-judgments",
        )
    )
    report = validate(release)
    assert report.ok, [(c.name, c.examples) for c in report.checks if not c.ok]
