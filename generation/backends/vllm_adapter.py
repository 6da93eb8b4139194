"""vLLM adapter (GPU only; never executed on the machines that test this kit).

Everything vLLM is handed is built by the pure functions here, which the tests check without vllm
installed; the classes only pass those values to `vllm.LLM`.
"""
from __future__ import annotations

from typing import Sequence

from generation.reranker import VLLM_HF_OVERRIDES


def reranker_engine_args(model: str, max_length: int, dtype: str, tensor_parallel_size: int = 1) -> dict:
    """Qwen3-Reranker served as a sequence classifier over the "no"/"yes" token logits."""
    return {"model": model, "runner": "pooling", "hf_overrides": dict(VLLM_HF_OVERRIDES),
            "max_model_len": max_length, "dtype": dtype, "tensor_parallel_size": tensor_parallel_size,
            "enable_prefix_caching": True}


def token_prompts(sequences: Sequence[Sequence[int]]) -> list[dict]:
    """vLLM's TokensPrompt is a TypedDict: {"prompt_token_ids": [...]}."""
    return [{"prompt_token_ids": list(seq)} for seq in sequences]


class VllmReranker:
    def __init__(self, model: str, max_length: int, dtype: str = "auto", tensor_parallel_size: int = 1):
        from vllm import LLM

        self.llm = LLM(**reranker_engine_args(model, max_length, dtype, tensor_parallel_size))

    def p_yes(self, sequences: Sequence[Sequence[int]]) -> list[float]:
        outputs = self.llm.classify(token_prompts(sequences), use_tqdm=False)
        return [float(o.outputs.probs[0]) for o in outputs]
