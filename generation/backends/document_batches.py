"""Several documents a forward: the transformers backend's batches when prompts come with group keys (a
document-first prompt's documents).

A batch holds the suffixes of several groups. The prefixes of its groups not yet computed run first, in prefix
passes: right-padded forwards without a mask (causal attention alone is right for a prefix that starts at position
0), as many documents a pass as the token budget holds; their keys and values are kept once per group (a view of
that pass's cache, no copy). Then all the batch's suffixes run in one forward, in either layout:
- the slot layout (SDPA or eager attention, both modes): a row per group, its suffixes in slots after its prefix,
  a 4D mask letting each suffix see its prefix and itself (`SlotLayout`); generate mode decodes on from there
  (slot_steps.py);
- a row per suffix (flash attention, which takes no 4D mask): each row's prefix, then its suffix.
Either way `RowPrefixLayer` lays each group's prefix out for its rows, right-aligned in the batch's longest prefix,
and joins the rows' own keys after it, for one layer at a time (the joined tensor lives only while that layer runs):
the held prefixes are never copied into a padded cache. The mask hides the padding of shorter prefixes and of
shorter suffixes; each suffix's positions continue from its own prefix's length. A group cut by a batch boundary
keeps its prefix for the next batch (copied out of its pass, so the pass's cache is freed): it is computed once.

A group of one prompt has a prefix too: the prompt less its last token, so it runs with the other prefixes and its
row costs one suffix token. The cost a batch is cut to (generation/backends/batching.py) is what its forwards hold,
the most of its prefix passes and its slot forward (`DocumentBatches._cost`); a held prefix costs its keys and
values alone (batching.TokenCosts), so a suffix forward holds more documents than a prefix pass computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer, get_layer_types_and_kwargs

from generation.backends.batching import TokenCosts
from generation.backends.compiled_suffixes import LEAST_SIZE
from generation.backends.prefix_groups import shared_prefix_length


def full_attention_only(config) -> bool:
    """Every layer attends to all earlier positions (no sliding window, no chunked attention): the layers whose cache
    a padded prefix can stand in for. transformers decides a model's cache layers the same way
    (cache_utils.get_layer_types_and_kwargs, used by DynamicCache(config=...))."""
    layer_types, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    return all(kind == "full_attention" for kind in layer_types)


class RowPrefixLayer(DynamicLayer):
    """One layer's cache for a batch whose rows continue from different prefixes: each group's prefix once
    (`parts`: the rows it serves, a slice or an index already on the layer's device, and its keys and values,
    [kv_heads, length, head_dim]), the rows' own keys and values after them. Attention gets, for this layer alone, the
    prefixes right-aligned in `width` columns joined to the own keys: one copy of a prefix per row it serves (a row
    per group in the slot layout), alive while the layer runs."""

    def __init__(self, parts: list[tuple[slice | torch.Tensor, torch.Tensor, torch.Tensor]], rows: int, width: int):
        super().__init__()
        self.parts, self.width = parts, width
        keys, values = parts[0][1], parts[0][2]
        self.dtype, self.device = keys.dtype, keys.device
        self.keys = keys.new_empty((rows, keys.shape[0], 0, keys.shape[2]))
        self.values = values.new_empty((rows, values.shape[0], 0, values.shape[2]))
        self.is_initialized = True

    def _joined(self, own: torch.Tensor, which: int) -> torch.Tensor:
        joined = own.new_zeros((own.shape[0], own.shape[1], self.width + own.shape[2], own.shape[3]))
        for rows, *prefix in self.parts:
            part = prefix[which]
            joined[rows, :, self.width - part.shape[1] : self.width] = part
        joined[:, :, self.width :] = own
        return joined

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self.keys = torch.cat([self.keys, key_states], dim=-2)
        self.values = torch.cat([self.values, value_states], dim=-2)
        return self._joined(self.keys, 0), self._joined(self.values, 1)

    def get_seq_length(self) -> int:
        return self.width + self.keys.shape[-2]

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("a row-prefix cache is built for its batch of rows")


class RowPrefixCache(DynamicCache):
    """A DynamicCache (what `generate` expects) whose rows continue from their own groups' prefixes."""

    def __init__(self, layers: list[RowPrefixLayer]):
        Cache.__init__(self, layers=layers)


class EagerLayoutCache(RowPrefixCache):
    """The row-prefix cache of a compiled suffix forward: its update runs eagerly, a break in the compiled graphs (the
    layout is a Python loop over the batch's documents: compiled_suffixes.py)."""

    @torch.compiler.disable
    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)


def rows_selector(rows: list[int]) -> slice | None:
    """The rows as a slice when they are consecutive (a batch's members of one group are: `DocumentBatches.cut`),
    else None."""
    return slice(rows[0], rows[-1] + 1) if rows == list(range(rows[0], rows[-1] + 1)) else None


@dataclass(frozen=True)
class SlotLayout:
    """A batch of several groups in one forward: a row per group, its members' suffixes in `slots` slots of `slot`
    positions after its prefix's cache (`width` columns, right-aligned). `ids`, `positions` and the additive `mask`
    ([rows, 1, positions, width + positions]) are the slot forward's; `keep` the last position of each slot (where
    its next token is read); `where` each batch index's (row, slot)."""

    ids: torch.Tensor
    positions: torch.Tensor
    mask: torch.Tensor
    cache: RowPrefixCache | None
    keep: torch.Tensor
    where: dict[int, tuple[int, int]]
    slots: int
    width: int

    def step_inputs(self, seen: torch.Tensor, last: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions and mask of decode step `step` (1, 2, ...: the step's input is the token chosen at the step
        before, one a slot). `seen` is the slot forward's mask at each slot's last position ([rows, 1, slots, keys])
        and `last` that position ([rows, slots]), both on the device: each slot's new token sees what its slot's last
        position saw (its prefix and its suffix) and the tokens its slot chose before and now, and sits at
        last + step."""
        rows, slots = seen.shape[0], self.slots
        own = torch.eye(slots, dtype=torch.bool, device=seen.device).repeat(1, step)
        chosen = torch.zeros(own.shape, dtype=seen.dtype, device=seen.device)
        chosen.masked_fill_(~own, torch.finfo(seen.dtype).min)
        return last + step, torch.cat([seen, chosen.expand(rows, 1, slots, slots * step)], dim=-1)


class DocumentBatches:
    """Batches of several groups' suffixes, cut to a pair count and a token budget, and each batch's prefix cache.

    Groups are taken shortest prefix first (little padding in a prefix pass), held ones first after an out-of-memory
    re-cut (their prefixes are already computed); a group's members shortest suffix first. `costs`: the budget tokens
    a held prefix token and a position's logits cost (batching.token_costs); by default a held prefix token is a
    whole token and logits are not counted. `compiled`: for compiled suffix forwards (compiled_suffixes.py), a slot
    layout at least LEAST_SIZE rows, slots and slot positions wide (its cost counting the padding) whose cache lays
    the prefixes out eagerly (EagerLayoutCache)."""

    def __init__(
        self,
        sequences: Sequence[Sequence[int]],
        keys: Sequence[Hashable],
        costs: TokenCosts | None = None,
        compiled: bool = False,
    ):
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
        self.costs = costs or TokenCosts()
        self.least_size = LEAST_SIZE if compiled else 1
        self.cache_type = EagerLayoutCache if compiled else RowPrefixCache
        self.max_tokens: int | None = None  # the budget of the last cut: the prefix passes are cut to it too
        self.held: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # group -> its prefix, layer by layer
        self.prefix_passes = 0

    def prefix_of(self, index: int) -> int:
        return self.prefix_lengths[self.group_of[index]]

    def suffix_length(self, index: int) -> int:
        return len(self.sequences[index]) - self.prefix_of(index)

    def groups(self, batch: Sequence[int]) -> list[int]:
        return list(dict.fromkeys(self.group_of[i] for i in batch))

    def passes(self, lengths: Sequence[int], held: float = 0) -> list[tuple[list[int], float]]:
        """Prefixes of `lengths` tokens (in the order they run) cut into prefix passes, each with its cost: a pass
        grows while its rows x (its longest prefix + a position's logits), plus the prefixes held before it at
        `costs.held`, stays within the budget (`held`: tokens held before the first; a pass then holds its rows x
        its longest)."""
        out: list[tuple[list[int], float]] = []
        current: list[int] = []
        width = 0

        def cost(rows: int, width: int) -> float:
            return held * self.costs.held + rows * (width + self.costs.logits)

        for k, n in enumerate(lengths):
            if current and self.max_tokens and cost(len(current) + 1, max(width, n)) > self.max_tokens:
                out.append((current, cost(len(current), width)))
                held, current, width = held + len(current) * width, [], 0
            current.append(k)
            width = max(width, n)
        if current:
            out.append((current, cost(len(current), width)))
        return out

    def _cost(self, lengths: Sequence[int], slots: int, widest_suffix: int) -> int:
        """Tokens held by a batch of groups with prefixes of `lengths` tokens: the most of its prefix passes and
        of its slot forward (the prefixes held at `costs.held`, each pass's as wide as its longest, and the suffixes
        as the slot layout lays them: a row per group, `slots` slots of the longest suffix, each slot's logits, the
        attention mask over the row)."""
        passes = self.passes([n for n in lengths if n])
        prefixes = [n for n in lengths if n]
        held = sum(len(rows) * max(prefixes[k] for k in rows) for rows, _ in passes)
        rows, slots, widest_suffix = (max(n, self.least_size) for n in (len(lengths), slots, widest_suffix))
        positions, width = slots * widest_suffix, max(lengths, default=0)
        slot_forward = (
            held * self.costs.held
            + rows * slots * (widest_suffix + self.costs.logits)
            + rows * positions * (width + positions) * self.costs.mask
        )
        return math.ceil(max([slot_forward, *(cost for _, cost in passes)]))

    def cost(self, batch: Sequence[int]) -> int:
        """Tokens the batch's forwards hold (`_cost`); the row-per-suffix layout (flash attention) holds no more
        prefix tokens than the slot layout and as many suffix tokens as it has rows."""
        groups = self.groups(batch)
        slots = max(sum(self.group_of[i] == g for i in batch) for g in groups)
        widest_suffix = max(self.suffix_length(i) for i in batch)
        return self._cost([self.prefix_lengths[g] for g in groups], slots, widest_suffix)

    def cut(self, indices: Sequence[int], max_pairs: int, max_tokens: int | None) -> list[list[int]]:
        self.max_tokens = max_tokens
        by_group: dict[int, list[int]] = {}
        for i in indices:
            by_group.setdefault(self.group_of[i], []).append(i)
        order = sorted(by_group, key=lambda g: (g not in self.held, self.prefix_lengths[g], g))
        batches: list[list[int]] = []
        current: list[int] = []
        lengths: list[int] = []  # the prefix lengths of the batch being filled
        slots = widest_suffix = 0
        for g in order:
            in_group = 0
            for i in sorted(by_group[g], key=self.suffix_length):
                grown = [*lengths, self.prefix_lengths[g]] if in_group == 0 else lengths
                cost = self._cost(grown, max(slots, in_group + 1), max(widest_suffix, self.suffix_length(i)))
                if current and (len(current) >= max_pairs or (max_tokens and cost > max_tokens)):
                    batches.append(current)
                    current, lengths, in_group, slots, widest_suffix = [], [], 0, 0, 0
                if in_group == 0:
                    lengths.append(self.prefix_lengths[g])
                current.append(i)
                in_group += 1
                widest_suffix = max(widest_suffix, self.suffix_length(i))
                slots = max(slots, in_group)
        if current:
            batches.append(current)
        return batches

    def hold_prefixes(self, batch: Sequence[int], prefill: Callable[[list[Sequence[int]]], DynamicCache]) -> list[int]:
        """The batch's groups, their prefixes held: those held for other groups are dropped first, and a group held
        on from the batch before is copied out of that batch's prefix pass (a view of it would keep the whole pass's
        cache, its other rows and padding, alive); those of the batch's groups not held run in prefix passes within the budget
        (`passes`; one without a budget), each a forward (`prefill`: prefixes -> their cache, row r holding prefix r
        from position 0, right-padded), each prefix then held as a view of its pass's cache (no copy). Called inside the batch's
        step, so an out-of-memory error of the prefix pass is the batch's, handled like any other."""
        groups = self.groups(batch)
        self.held = {g: [compact(k, v) for k, v in kv] for g, kv in self.held.items() if g in groups}
        new = [g for g in groups if g not in self.held and self.prefix_lengths[g]]
        carried = sum(self.prefix_lengths[g] for g in self.held)
        for rows, _ in self.passes([self.prefix_lengths[g] for g in new], carried):
            cache = prefill([self.sequences[self.first_member[new[k]]][: self.prefix_lengths[new[k]]] for k in rows])
            self.prefix_passes += 1
            for row, k in enumerate(rows):
                length = self.prefix_lengths[new[k]]
                self.held[new[k]] = [
                    (layer.keys[row, :, :length], layer.values[row, :, :length]) for layer in cache.layers
                ]
        return groups

    def _cache(self, groups: list[int], rows_of: dict[int, list[int]], rows: int, width: int) -> RowPrefixCache:
        """The cache `rows` rows continue from: each group's held prefix, once a layer, serving its rows
        (`rows_of`). The rows' index is made once a batch, on each layer's device; consecutive rows need none."""
        with_prefix = [g for g in groups if self.prefix_lengths[g]]
        on_device: dict[tuple[int, torch.device], slice | torch.Tensor] = {}

        def selector(g: int, device: torch.device) -> slice | torch.Tensor:
            if (g, device) not in on_device:
                consecutive = rows_selector(rows_of[g])
                on_device[g, device] = consecutive or torch.tensor(rows_of[g], device=device)
            return on_device[g, device]

        layers = []
        for layer in range(len(self.held[with_prefix[0]])):
            parts = [(selector(g, self.held[g][layer][0].device), *self.held[g][layer]) for g in with_prefix]
            layers.append(RowPrefixLayer(parts, rows, width))
        return self.cache_type(layers)

    def prefix_cache(self, batch: Sequence[int], prefill: Callable[[list[Sequence[int]]], DynamicCache]):
        """The batch's prefix width (its longest prefix), each row's prefix length, and the cache its rows continue
        from, one row per suffix (None when no row has a prefix)."""
        groups = self.hold_prefixes(batch, prefill)
        lengths = [self.prefix_of(i) for i in batch]
        width = max(lengths)
        if not width:
            return 0, lengths, None
        rows_of = {g: [r for r, i in enumerate(batch) if self.group_of[i] == g] for g in groups}
        return width, lengths, self._cache(groups, rows_of, len(batch), width)

    def slot_inputs(self, batch: Sequence[int], prefill, pad_id: int, dtype: torch.dtype) -> SlotLayout:
        """One row per group, its suffixes in slots after its prefix (a suffix right-aligned in its slot): the
        `SlotLayout`. Each suffix sees its own group's prefix and itself, causally; a padding position sees itself
        alone (a query that sees nothing would give NaN). The last position of slot j is (j + 1) x the slot width - 1
        in every row, so one `logits_to_keep` serves all rows. The prefixes are the held ones, not copied into a
        padded cache: each layer lays them out while it runs (RowPrefixLayer). Rows, slots and slot positions are
        padded up to `least_size` (a padding row has no prefix)."""
        groups = self.hold_prefixes(batch, prefill)
        members = {g: [i for i in batch if self.group_of[i] == g] for g in groups}
        slots, slot = max(len(m) for m in members.values()), max(self.suffix_length(i) for i in batch)
        rows, slots, slot = (max(n, self.least_size) for n in (len(groups), slots, slot))
        width = max(self.prefix_lengths[g] for g in groups)
        length = slots * slot
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
        cache = self._cache(groups, {g: [row] for row, g in enumerate(groups)}, rows, width) if width else None
        keep = torch.arange(1, slots + 1) * slot - 1
        return SlotLayout(ids, positions, mask, cache, keep, where, slots, width)


def compact(keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A held prefix's keys and values in storage of their own (copied when they are a view of a larger cache)."""
    if keys.untyped_storage().nbytes() > keys.nbytes or values.untyped_storage().nbytes() > values.nbytes:
        return keys.clone(), values.clone()
    return keys, values
