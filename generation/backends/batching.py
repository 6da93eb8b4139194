"""Batches by tokens: the transformers backend's batches hold at most `max_batch_tokens` tokens (a pair count only
caps them), their size set from the GPU's free memory when asked (`auto`), and made smaller, with one notice, when
a batch still runs out of memory.

A padded batch costs rows x its longest sequence (what the GPU holds); a packed one the sum of its lengths.
Sequences are sorted by length, so a padded batch wastes little. One sequence longer than the budget goes alone:
it cannot be split, and if it does not fit by itself it fails alone (`isolate_failures` marks that pair).
"""
from __future__ import annotations

import warnings
from typing import Callable, Sequence

import torch

from generation.model_shapes import Shape

# Bytes of activations per token in flight beyond the KV cache, in units of the model's dtype size: the residual
# stream, the norm's output, q/k/v and the attention output (each ~hidden wide), and the gated MLP's gate, up and
# their product (3 x intermediate) alive at once inside one layer. A rule of thumb, not a measurement; the
# out-of-memory fallback below catches what it misses.
def activation_bytes_per_token(shape: Shape, dtype_bytes: int) -> int:
    width = 4 * shape.hidden + (shape.heads + 2 * shape.kv_heads) * shape.head_dim + 3 * shape.intermediate
    return width * dtype_bytes


def bytes_per_token(shape: Shape, dtype_bytes: int, keeps_cache: bool) -> int:
    """GPU memory one token of a batch needs during a forward: its activations, and its KV cache over all layers
    when the forward keeps one (generate mode, and a batch continuing a shared prefix)."""
    return activation_bytes_per_token(shape, dtype_bytes) + (shape.kv_bytes_per_token(dtype_bytes) if keeps_cache else 0)


def auto_token_budget(free_bytes: int, total_bytes: int, utilisation: float, per_token: int) -> int:
    """Tokens per batch that keep the process within `utilisation` of the device's memory (vLLM's
    `gpu_memory_utilization` sense), given what is free now (the weights already loaded)."""
    spare = free_bytes - (1 - utilisation) * total_bytes
    return max(int(spare // per_token), 1)


def batch_cost(lengths: Sequence[int], packed: bool) -> int:
    return sum(lengths) if packed else len(lengths) * max(lengths, default=0)


def token_batches(lengths: Sequence[int], max_pairs: int, max_tokens: int | None = None,
                  packed: bool = False) -> list[list[int]]:
    """Indices into `lengths`, shortest first, cut into batches of at most `max_pairs` sequences and (when given)
    `max_tokens` tokens. Without a token budget these are exactly the pair-count batches of old."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        grown = [lengths[j] for j in current] + [lengths[i]]
        if current and (len(current) >= max_pairs or (max_tokens is not None and batch_cost(grown, packed) > max_tokens)):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class OutOfMemoryNotice(UserWarning):
    """A batch ran out of memory and the backend went on with smaller ones."""


class TokenBudget:
    """The budget batches are cut to, lowered when a batch runs out of memory. `setting` names the profile key
    that sets it, for the notice."""

    def __init__(self, max_pairs: int, max_tokens: int | None, packed: bool, setting: str):
        self.max_pairs, self.max_tokens, self.packed, self.setting = max_pairs, max_tokens, packed, setting
        self.largest_fitted = 0  # tokens of the largest batch that ran
        self.noticed = False
        self.first_failure: tuple[int, int] | None = None  # (sequences, tokens) of the first batch that did not fit

    def run(self, sequences: Sequence[Sequence[int]], step: Callable[[list[int]], None],
            on_oom: Callable[[], None] = lambda: None) -> None:
        """`step(indices)` over the batches of `sequences`; a batch of several sequences that raises
        torch.OutOfMemoryError is re-cut, with the rest, under a lower budget and tried again; once a batch fits
        after that, one notice names it and the setting to change."""
        lengths = [len(s) for s in sequences]
        pending = token_batches(lengths, self.max_pairs, self.max_tokens, self.packed)
        while pending:
            batch = pending.pop(0)
            cost = batch_cost([lengths[i] for i in batch], self.packed)
            try:
                step(batch)
            except torch.OutOfMemoryError:
                on_oom()
                if len(batch) == 1:
                    raise
                self.first_failure = self.first_failure or (len(batch), cost)
                # the next budget: the largest batch that fitted, or half the one that failed (always below it)
                self.max_tokens = self.largest_fitted if 0 < self.largest_fitted < cost else cost // 2
                rest = [i for b in [batch, *pending] for i in b]
                pending = [[rest[j] for j in b] for b in token_batches(
                    [lengths[i] for i in rest], self.max_pairs, self.max_tokens, self.packed)]
                continue
            self.largest_fitted = max(self.largest_fitted, cost)
            if self.first_failure and not self.noticed:
                self._notice(len(batch), cost)

    def _notice(self, fitted_pairs: int, fitted_cost: int) -> None:
        self.noticed = True
        failed_pairs, failed_cost = self.first_failure
        warnings.warn(f"out of memory on a batch of {failed_pairs} sequences ({failed_cost:,} tokens); a batch of "
                      f"{fitted_pairs} ({fitted_cost:,} tokens) fitted; going on with batches of at most "
                      f"{self.max_tokens:,} tokens. Set {self.setting}: {self.max_tokens} (or lower) to start there",
                      OutOfMemoryNotice, stacklevel=4)
