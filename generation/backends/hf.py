"""transformers backend: batched, left-padded causal LM forward passes on CPU or GPU."""
from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Sequence

import torch

from generation.judging.judges import LLMJudge
from generation.judging.reranker_input import make_encoder
from generation.models import resolve_model
from generation.profiles import JudgeConfig
from generation.profiles import Rerank as RerankConfig

DTYPES = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


MIN_SHARED_PREFIX = 16  # tokens; below it a separate prefix pass costs more than it saves


def shared_prefix_length(sequences: Sequence[Sequence[int]]) -> int:
    """Tokens every sequence starts with, leaving each at least one token of its own (the position scored)."""
    first, limit = sequences[0], min(len(s) for s in sequences) - 1
    length = 0
    while length < limit and all(s[length] == first[length] for s in sequences):
        length += 1
    return length


def pick_device(device: str = "auto") -> str:
    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """input_ids, attention_mask and position_ids for left padding, so every last position is real and
    each sequence sees the positions it would see alone."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
        mask[row, width - len(seq):] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return ids, mask, positions


class TransformersBackend:
    def __init__(self, model_path: str | Path, device: str = "auto", dtype: str = "auto", batch_size: int = 8):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = pick_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        torch_dtype = DTYPES[dtype]
        if torch_dtype == "auto" and self.device == "cpu":
            torch_dtype = torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch_dtype).to(self.device).eval()
        self.batch_size = batch_size
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)

    def _batches(self, sequences: Sequence[Sequence[int]]):
        """Length-sorted batches (less padding), yielded with the original positions."""
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        for start in range(0, len(order), self.batch_size):
            chosen = order[start:start + self.batch_size]
            yield chosen, [sequences[i] for i in chosen]

    @torch.inference_mode()
    def next_token_logprobs(self, sequences: Sequence[Sequence[int]], token_ids: Sequence[int]) -> torch.Tensor:
        """log p(token | sequence) over the full vocabulary at the last position, for each of `token_ids`.

        One forward per batch with `logits_to_keep=1` (the LM head on the last position only). The prompt prefix
        every sequence shares (the instruction, the reranker's query) runs once; each batch continues from a copy
        of its KV cache."""
        out = torch.empty((len(sequences), len(token_ids)), dtype=torch.float64)
        wanted = torch.tensor(list(token_ids), dtype=torch.long)
        if not sequences:
            return out
        shared = shared_prefix_length(sequences)
        prefix = None
        if shared >= MIN_SHARED_PREFIX:
            prefix = self.model(input_ids=torch.tensor([sequences[0][:shared]], device=self.device),
                                use_cache=True, logits_to_keep=1).past_key_values
        else:
            shared = 0
        for positions, batch in self._batches(sequences):
            ids, mask, pos = (t.to(self.device) for t in left_pad([s[shared:] for s in batch], self.pad_id))
            cache = None
            if prefix is not None:
                cache = copy.deepcopy(prefix)
                cache.batch_repeat_interleave(len(batch))
                mask = torch.cat([torch.ones((len(batch), shared), dtype=mask.dtype, device=self.device), mask], 1)
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos + shared, past_key_values=cache,
                                use_cache=cache is not None, logits_to_keep=1).logits[:, -1, :]
            logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
            out[positions] = logprobs[:, wanted].double()
        return out

    @torch.inference_mode()
    def generate(self, sequences: Sequence[Sequence[int]], max_new_tokens: int) -> list[str]:
        """Greedy continuation of each sequence, decoded without special tokens."""
        texts: list[str] = [""] * len(sequences)
        for positions, batch in self._batches(sequences):
            ids, mask, _ = (t.to(self.device) for t in left_pad(batch, self.pad_id))
            out = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                      do_sample=False, pad_token_id=self.pad_id)
            for row, position in enumerate(positions):
                texts[position] = self.tokenizer.decode(out[row, ids.shape[1]:], skip_special_tokens=True)
        return texts


class QwenRerankerScorer:
    """P(yes) of a Qwen3-Reranker-style causal LM through the transformers backend (CPU or GPU)."""

    def __init__(self, config: RerankConfig, device: str = "auto"):
        path = resolve_model(config.model)
        self.backend = TransformersBackend(path, device=device, dtype=config.dtype, batch_size=config.batch_size)
        self.encoder = make_encoder(config, self.backend.tokenizer)
        tokenizer = self.backend.tokenizer
        self.no_id, self.yes_id = tokenizer.convert_tokens_to_ids("no"), tokenizer.convert_tokens_to_ids("yes")
        self.description = f"{config.model} (transformers, P(yes))"

    def score(self, instruction: str, query: str, documents: Sequence[str]) -> list[float]:
        sequences = [self.encoder.encode(instruction, query, d) for d in documents]
        logprobs = self.backend.next_token_logprobs(sequences, [self.no_id, self.yes_id])
        return [1.0 / (1.0 + math.exp(float(no) - float(yes))) for no, yes in logprobs]


def make_scorer(config: RerankConfig) -> QwenRerankerScorer:
    return QwenRerankerScorer(config)


def make_judge(config: JudgeConfig):
    backend = TransformersBackend(resolve_model(config.model), device=config.device, dtype=config.dtype,
                                  batch_size=config.batch_size)
    return LLMJudge(config, backend, backend.tokenizer, f"{config.model} (transformers)")
