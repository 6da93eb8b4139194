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


def judge_engine_args(model: str, config) -> dict:
    """`vllm.LLM` arguments for the judge. Processed log-probabilities make the returned top-k the
    distribution after `allowed_token_ids` (vLLM's default logprobs are taken before it)."""
    args = {"model": model, "tensor_parallel_size": config.tensor_parallel_size, "dtype": config.dtype,
            "max_model_len": config.max_model_len, "enable_prefix_caching": config.enable_prefix_caching,
            "logprobs_mode": "processed_logprobs", "seed": 0}
    if config.quantization:
        args["quantization"] = config.quantization
    return args


def generate_params(max_new_tokens: int) -> dict:
    return {"temperature": 0.0, "max_tokens": max_new_tokens, "n": 1}


def distribution_params(token_ids: Sequence[int]) -> dict:
    """One step, restricted to the digit tokens, returning the log-probability of each."""
    return {"temperature": 0.0, "max_tokens": 1, "n": 1, "allowed_token_ids": list(token_ids),
            "logprobs": len(token_ids)}


def logprob_row(step_logprobs: dict, token_ids: Sequence[int]) -> list[float]:
    """{token_id: Logprob} of one generated position -> log-probabilities in `token_ids` order."""
    return [float(step_logprobs[t].logprob) if t in step_logprobs else float("-inf") for t in token_ids]


class VllmJudgeBackend:
    def __init__(self, model: str, config):
        from vllm import LLM

        self.llm = LLM(**judge_engine_args(model, config))

    def generate(self, sequences: Sequence[Sequence[int]], max_new_tokens: int) -> list[str]:
        from vllm import SamplingParams

        outputs = self.llm.generate(token_prompts(sequences), SamplingParams(**generate_params(max_new_tokens)),
                                    use_tqdm=False)
        return [o.outputs[0].text for o in outputs]

    def next_token_logprobs(self, sequences: Sequence[Sequence[int]], token_ids: Sequence[int]) -> list[list[float]]:
        from vllm import SamplingParams

        outputs = self.llm.generate(token_prompts(sequences), SamplingParams(**distribution_params(token_ids)),
                                    use_tqdm=False)
        return [logprob_row(o.outputs[0].logprobs[0], token_ids) for o in outputs]
