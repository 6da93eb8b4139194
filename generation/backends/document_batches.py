"""Several documents a forward: the transformers backend's batches when prompts come with group keys (a
document-first prompt's documents).

A batch holds the suffixes of several groups. The prefixes of its groups not yet computed run first, together, in
one left-padded forward; their keys and values are kept once per group (a view of that forward's cache, no copy).
Then all the batch's suffixes run in one forward, each row against its own group's prefix: `RowPrefixLayer` lays
each group's prefix out for its rows, left-padded to the batch's longest prefix, and joins the suffixes' own keys
after it, for one layer at a time (the joined tensor lives only while that layer runs). The attention mask hides
the padding of shorter prefixes and of shorter suffixes; each suffix's positions continue from its own prefix's
length. A group cut by a batch boundary keeps its prefix for the next batch: it is computed once.

A group of one prompt has a prefix too: the prompt less its last token, so it runs with the other prefixes and its
row costs one suffix token. The cost a batch is cut to (generation/backends/batching.py) is what its forwards hold:
its groups' prefixes (padded to the longest) plus its rows x its longest suffix.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer, get_layer_types_and_kwargs

from generation.backends.prefix_groups import shared_prefix_length


def full_attention_only(config) -> bool:
    """Every layer attends to all earlier positions (no sliding window, no chunked attention): the layers whose cache
    a padded prefix can stand in for. transformers decides a model's cache layers the same way
    (cache_utils.get_layer_types_and_kwargs, used by DynamicCache(config=...))."""
    layer_types, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    return all(kind == "full_attention" for kind in layer_types)


class RowPrefixLayer(DynamicLayer):
    """One layer's cache for a batch whose rows continue from different prefixes: each group's prefix once
    (`parts`: its keys and values, [heads, length, head_dim]) with the batch rows it serves, the suffixes' own keys and
    values after them."""

    def __init__(self, parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], rows: int, width: int):
        super().__init__()
        self.parts, self.width = parts, width
        keys = parts[0][1]
        self.dtype, self.device = keys.dtype, keys.device
        self.keys = keys.new_empty((rows, keys.shape[0], 0, keys.shape[2]))
        self.values = keys.new_empty((rows, parts[0][2].shape[0], 0, parts[0][2].shape[2]))
        self.is_initialized = True

    def _joined(self, own: torch.Tensor, which: int) -> torch.Tensor:
        joined = own.new_zeros((own.shape[0], own.shape[1], self.width + own.shape[2], own.shape[3]))
        for rows, *prefix in self.parts:
            part = prefix[which]
            joined[rows.to(own.device), :, self.width - part.shape[1] : self.width] = part
        joined[:, :, self.width :] = own
        return joined

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self.keys = torch.cat([self.keys, key_states], dim=-2)
        self.values = torch.cat([self.values, value_states], dim=-2)
        return self._joined(self.keys, 0), self._joined(self.values, 1)

    def get_seq_length(self) -> int:
        return self.width + self.keys.shape[-2]

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("a row-prefix cache is built for its batch of suffixes")


class RowPrefixCache(DynamicCache):
    """A DynamicCache (what `generate` expects) whose rows continue from their own groups' prefixes."""

    def __init__(self, layers: list[RowPrefixLayer]):
        Cache.__init__(self, layers=layers)


class DocumentBatches:
    """Batches of several groups' suffixes, cut to a pair count and a token budget, and each batch's prefix cache.

    Groups are taken shortest prefix first (little padding in a prefix pass), held ones first after an out-of-memory
    re-cut (their prefixes are already computed); a group's members shortest suffix first."""

    def __init__(self, sequences: Sequence[Sequence[int]], keys: Sequence[Hashable]):
        members: dict[Hashable, list[int]] = {}
        for i, key in enumerate(keys):
            members.setdefault(key, []).append(i)
        self.group_of: dict[int, int] = {}
        self.prefix_lengths: list[int] = []
        for g, indices in enumerate(members.values()):
            self.prefix_lengths.append(shared_prefix_length([sequences[i] for i in indices]))
            self.group_of.update(dict.fromkeys(indices, g))
        self.first_member = [indices[0] for indices in members.values()]
        self.sequences = sequences
        self.held: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # group -> its prefix, layer by layer
        self.prefix_passes = 0

    def prefix_of(self, index: int) -> int:
        return self.prefix_lengths[self.group_of[index]]

    def suffix_length(self, index: int) -> int:
        return len(self.sequences[index]) - self.prefix_of(index)

    def groups(self, batch: Sequence[int]) -> list[int]:
        return list(dict.fromkeys(self.group_of[i] for i in batch))

    def cost(self, batch: Sequence[int]) -> int:
        """Tokens the batch's forwards hold: its groups' prefixes padded to the longest, and its suffixes as the slot
        layout lays them (a row per group, as many slots as the largest group's members, each as wide as the longest
        suffix); the row-per-suffix layout of generate mode holds no more."""
        groups = self.groups(batch)
        slots = max(sum(self.group_of[i] == g for i in batch) for g in groups)
        widest_suffix = max(self.suffix_length(i) for i in batch)
        return len(groups) * (max(self.prefix_lengths[g] for g in groups) + slots * widest_suffix)

    def cut(self, indices: Sequence[int], max_pairs: int, max_tokens: int | None) -> list[list[int]]:
        by_group: dict[int, list[int]] = {}
        for i in indices:
            by_group.setdefault(self.group_of[i], []).append(i)
        order = sorted(by_group, key=lambda g: (g not in self.held, self.prefix_lengths[g], g))
        batches: list[list[int]] = []
        current: list[int] = []
        n_groups = widest_prefix = slots = widest_suffix = 0  # of the batch being filled
        for g in order:
            in_group = 0
            for i in sorted(by_group[g], key=self.suffix_length):
                groups = n_groups + (in_group == 0)
                prefix = max(widest_prefix, self.prefix_lengths[g])
                grown = groups * (prefix + max(slots, in_group + 1) * max(widest_suffix, self.suffix_length(i)))
                if current and (len(current) >= max_pairs or (max_tokens and grown > max_tokens)):
                    batches.append(current)
                    current, in_group = [], 0
                    n_groups = widest_prefix = slots = widest_suffix = 0
                n_groups += in_group == 0
                current.append(i)
                in_group += 1
                widest_prefix = max(widest_prefix, self.prefix_lengths[g])
                widest_suffix = max(widest_suffix, self.suffix_length(i))
                slots = max(slots, in_group)
        if current:
            batches.append(current)
        return batches

    def hold_prefixes(self, batch: Sequence[int], prefill: Callable[[list[Sequence[int]]], DynamicCache]) -> list[int]:
        """The batch's groups, their prefixes held: those held for other groups are dropped first; those of the
        batch's groups not held run in one forward (`prefill`: left-padded prefixes -> their cache). Called inside the
        batch's step, so an out-of-memory error of the prefix pass is the batch's, handled like any other."""
        groups = self.groups(batch)
        self.held = {g: kv for g, kv in self.held.items() if g in groups}
        new = [g for g in groups if g not in self.held and self.prefix_lengths[g]]
        if new:
            cache = prefill([self.sequences[self.first_member[g]][: self.prefix_lengths[g]] for g in new])
            self.prefix_passes += 1
            width = max(self.prefix_lengths[g] for g in new)
            for row, g in enumerate(new):
                start = width - self.prefix_lengths[g]
                self.held[g] = [(layer.keys[row, :, start:], layer.values[row, :, start:]) for layer in cache.layers]
        return groups

    def prefix_cache(self, batch: Sequence[int], prefill: Callable[[list[Sequence[int]]], DynamicCache]):
        """The batch's prefix width (its longest prefix), each row's prefix length, and the cache its rows continue
        from, one row per suffix (None when no row has a prefix)."""
        groups = self.hold_prefixes(batch, prefill)
        lengths = [self.prefix_of(i) for i in batch]
        width = max(lengths)
        if not width:
            return 0, lengths, None
        parts = []
        for g in groups:
            if self.prefix_lengths[g]:
                rows = torch.tensor([r for r, i in enumerate(batch) if self.group_of[i] == g])
                parts.append((rows, self.held[g]))
        layers = [
            RowPrefixLayer([(rows, *kv[layer]) for rows, kv in parts], len(batch), width)
            for layer in range(len(parts[0][1]))
        ]
        return width, lengths, RowPrefixCache(layers)

    def slot_inputs(self, batch: Sequence[int], prefill, pad_id: int, dtype: torch.dtype):
        """One row per group, its suffixes in slots after its prefix (a suffix right-aligned in its slot): input ids,
        positions, a 4D additive attention mask, the cache of the groups' prefixes (left-padded to the longest) and,
        for each of `batch`, its (row, slot). Each suffix sees its own group's prefix and itself, causally; a padding
        position sees itself alone (a query that sees nothing would give NaN). The last position of slot j is
        (j + 1) x the slot width - 1 in every row, so one `logits_to_keep` serves all rows."""
        groups = self.hold_prefixes(batch, prefill)
        members = {g: [i for i in batch if self.group_of[i] == g] for g in groups}
        slots, slot = max(len(m) for m in members.values()), max(self.suffix_length(i) for i in batch)
        width = max(self.prefix_lengths[g] for g in groups)
        rows, length = len(groups), slots * slot
        ids = torch.full((rows, length), pad_id, dtype=torch.long)
        positions = torch.zeros((rows, length), dtype=torch.long)
        seen = torch.zeros((rows, length, width + length), dtype=torch.bool)
        seen[:, torch.arange(length), width + torch.arange(length)] = True
        where = {}
        for row, g in enumerate(groups):
            prefix = self.prefix_lengths[g]
            for j, i in enumerate(members[g]):
                suffix = self.sequences[i][prefix:]
                start, end = j * slot + slot - len(suffix), (j + 1) * slot
                ids[row, start:end] = torch.tensor(suffix, dtype=torch.long)
                positions[row, start:end] = torch.arange(prefix, prefix + len(suffix))
                seen[row, start:end, width - prefix : width] = True
                seen[row, start:end, width + start : width + end] = torch.ones(end - start, end - start).tril().bool()
                where[i] = (row, j)
        mask = torch.zeros(seen.shape, dtype=dtype).masked_fill_(~seen, torch.finfo(dtype).min).unsqueeze(1)
        cache = None
        if width:
            cache = DynamicCache()
            some = next(iter(self.held.values()))
            for layer, (keys, values) in enumerate(some):
                padded_keys = keys.new_zeros((rows, keys.shape[0], width, keys.shape[2]))
                padded_values = values.new_zeros((rows, values.shape[0], width, values.shape[2]))
                for row, g in enumerate(groups):
                    if self.prefix_lengths[g]:
                        held_keys, held_values = self.held[g][layer]
                        padded_keys[row, :, width - held_keys.shape[1] :] = held_keys
                        padded_values[row, :, width - held_values.shape[1] :] = held_values
                cache.update(padded_keys, padded_values, layer)
        keep = torch.arange(1, slots + 1) * slot - 1
        return ids, positions, mask, cache, keep, where
