"""Prompts that share a prefix, computed once: the transformers backend's groups.

A group is the prompts of one key (the judge gives each pair's document as its key when the prompt puts the
document first: generation/judging/prompts.py, `Prompt.document_first`). The tokens every prompt of a group starts
with run once, as one sequence; the rest of each prompt (its suffix: the sub-question and the answer's header) then
runs against that prefix's KV cache, a batch of suffixes at a time. Without keys, all the prompts are one group and
the prefix is the one they all share (the chat template's head and the instruction of a prompt that puts the
question first).

The prefix's keys and values are held once, not once per suffix: `SharedPrefixLayer` hands attention a view of
them expanded along the batch (`Tensor.expand`, no copy) joined to the suffixes' own keys, so a layer's joined
tensor lives only while that layer runs. A batch therefore costs the prefix once plus its suffixes' tokens, which is
how `GroupBatches` counts it for the token budget (generation/backends/batching.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

MIN_SHARED_PREFIX = 16  # tokens; below it a separate prefix pass costs more than it saves


def shared_prefix_length(sequences: Sequence[Sequence[int]]) -> int:
    """Tokens every sequence starts with, leaving each at least one token of its own (the position scored)."""
    first, limit = sequences[0], min(len(s) for s in sequences) - 1
    length = 0
    while length < limit and all(s[length] == first[length] for s in sequences):
        length += 1
    return length


class SharedPrefixLayer(DynamicLayer):
    """One layer's cache: the prefix's keys and values once (batch 1), the suffixes' own (batch `rows`) after it."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, rows: int):
        super().__init__()
        self.prefix_keys, self.prefix_values, self.rows = keys, values, rows
        self.dtype, self.device = keys.dtype, keys.device
        self.keys = keys.new_empty((rows, keys.shape[1], 0, keys.shape[3]))
        self.values = values.new_empty((rows, values.shape[1], 0, values.shape[3]))
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self.keys = torch.cat([self.keys, key_states], dim=-2)
        self.values = torch.cat([self.values, value_states], dim=-2)
        expand = (self.rows, -1, -1, -1)
        return (
            torch.cat([self.prefix_keys.expand(*expand), self.keys], dim=-2),
            torch.cat([self.prefix_values.expand(*expand), self.values], dim=-2),
        )

    def get_seq_length(self) -> int:
        return self.prefix_keys.shape[-2] + self.keys.shape[-2]

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("a shared-prefix cache is built for its batch of suffixes")


class SharedPrefixCache(DynamicCache):
    """A DynamicCache (what `generate` expects) whose layers share one prefix among `rows` suffixes."""

    def __init__(self, prefix: DynamicCache, rows: int):
        Cache.__init__(self, layers=[SharedPrefixLayer(layer.keys, layer.values, rows) for layer in prefix.layers])
        self.rows = rows


def shares_layers(cache) -> bool:
    """Only plain full-attention layers can be shared this way (a sliding window's layer cuts its own keys)."""
    return isinstance(cache, DynamicCache) and all(type(layer) is DynamicLayer for layer in cache.layers)


class GroupBatches:
    """Batches of one group's suffixes at a time (never two groups in one batch), shortest first, and what each
    costs: the group's prefix once plus rows x its longest suffix (padded). A group whose prompts share fewer than
    MIN_SHARED_PREFIX tokens has no prefix: its prompts run whole."""

    def __init__(self, sequences: Sequence[Sequence[int]], keys: Sequence[Hashable] | None):
        members: dict[Hashable, list[int]] = {}
        for i, key in enumerate(keys if keys is not None else [None] * len(sequences)):
            members.setdefault(key, []).append(i)
        self.group_of: dict[int, int] = {}
        self.prefix_lengths: list[int] = []
        for g, indices in enumerate(members.values()):
            shared = shared_prefix_length([sequences[i] for i in indices]) if len(indices) > 1 else 0
            self.prefix_lengths.append(shared if shared >= MIN_SHARED_PREFIX else 0)
            self.group_of.update(dict.fromkeys(indices, g))
        self.sequences = sequences
        self._cached: tuple[int, object] | None = None  # (group, its prefix's cache): one group's at a time

    def prefix_of(self, index: int) -> int:
        return self.prefix_lengths[self.group_of[index]]

    def suffix_length(self, index: int) -> int:
        return len(self.sequences[index]) - self.prefix_of(index)

    def cut(self, indices: Sequence[int], max_pairs: int, max_tokens: int | None) -> list[list[int]]:
        by_group: dict[int, list[int]] = {}
        for i in indices:
            by_group.setdefault(self.group_of[i], []).append(i)
        batches: list[list[int]] = []
        for members in by_group.values():
            current: list[int] = []
            for i in sorted(members, key=self.suffix_length):
                if current and (len(current) >= max_pairs or (max_tokens and self.cost([*current, i]) > max_tokens)):
                    batches.append(current)
                    current = []
                current.append(i)
            batches.append(current)
        return batches

    def cost(self, batch: Sequence[int]) -> int:
        return self.prefix_of(batch[0]) + len(batch) * max(self.suffix_length(i) for i in batch)

    def prefix_cache(self, batch: Sequence[int], prefill: Callable[[Sequence[int]], object]):
        """The batch's prefix length and its cache (None without a prefix), computed once per group: the cache of
        the group before is dropped first, so one prefix is held at a time. Called inside the batch's step, so an
        out-of-memory error of the prefix pass is the batch's, handled like any other."""
        group, shared = self.group_of[batch[0]], self.prefix_of(batch[0])
        if not shared:
            return 0, None
        if self._cached is None or self._cached[0] != group:
            self._cached = None
            self._cached = (group, prefill(self.sequences[batch[0]][:shared]))
        return shared, self._cached[1]
