"""Before spending GPUs: how many pairs, how many prompt tokens, and what that costs in FLOPs and GPU-hours."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from generation.docstore import DocStore, cut_words
from generation.judge import plan_pairs
from generation.judges import Pair, PromptEncoder
from generation.models import resolve_model
from generation.profiles import Profile
from generation.prompts import get_prompt
from generation.shards import Shard

PAPER_PAIRS = 24_316_320


@dataclass(frozen=True)
class ModelSize:
    name: str = "Llama-3.3-70B"
    params: float = 70.6e9
    layers: int = 80
    hidden: int = 8192


# Dense tensor-core peaks of one H100 SXM (no sparsity).
H100_PEAK = {"bf16": 989e12, "fp8": 1979e12}


@dataclass
class Plan:
    pairs: int
    subquestions: int
    sampled: int
    mean_prompt_tokens: float
    mean_shared_prefix_tokens: float
    new_tokens: int
    tokenizer: str

    def flops_per_pair(self, model: ModelSize, prefix_cached: bool = False) -> float:
        """2 x params per token processed, plus causal attention over the prompt (2 x layers x L^2 x hidden)."""
        prompt = self.mean_prompt_tokens
        if prefix_cached:
            reuse = 1 - self.subquestions / max(self.pairs, 1)  # the first pair of each sub-question pays its prefix
            prompt -= reuse * self.mean_shared_prefix_tokens
        tokens = prompt + self.new_tokens
        return 2 * model.params * tokens + 2 * model.layers * tokens ** 2 * model.hidden

    def gpu_hours(self, pairs: int, model: ModelSize, precision: str, utilisation: float,
                  prefix_cached: bool = False) -> float:
        return pairs * self.flops_per_pair(model, prefix_cached) / (H100_PEAK[precision] * utilisation) / 3600


def measure(profile: Profile, subquestions: Path, candidates: Path, index: Path, sample: int = 200,
            tokenizer: str | None = None, seed: int = 0) -> Plan:
    from transformers import AutoTokenizer

    config = profile.judge
    pairs = plan_pairs(subquestions, candidates, Shard())
    chosen = random.Random(seed).sample(pairs, min(sample, len(pairs)))
    tokenizer_name = tokenizer or config.model
    tok = AutoTokenizer.from_pretrained(str(resolve_model(tokenizer_name)))
    encoder = PromptEncoder(tok, config.chat_template and bool(getattr(tok, "chat_template", None)))
    prompt = get_prompt(config.prompt)
    docs = DocStore(index)
    lengths, prefixes = [], []
    for row in chosen:
        pair = Pair(row["text"], docs.text(row["docid"]))
        context = cut_words(pair.document, config.context_words)
        lengths.append(len(encoder.encode(prompt.messages(pair.question, context))))
        prefixes.append(len(encoder.encode(prompt.messages(pair.question, ""))))
    n = max(len(chosen), 1)
    return Plan(len(pairs), len({p["subq_id"] for p in pairs}), len(chosen), sum(lengths) / n, sum(prefixes) / n,
                config.max_new_tokens or prompt.max_new_tokens, tokenizer_name)
