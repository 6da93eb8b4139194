"""Batches by tokens: the transformers backend's batches hold at most `max_batch_tokens` tokens (a pair count only
caps them), their size set from the GPU's free memory when asked (`auto`), and made smaller, with one notice, when
a batch still runs out of memory.

A padded batch costs rows x its longest sequence (what the GPU holds); a packed one the sum of its lengths.
Sequences are sorted by length, so a padded batch wastes little. One sequence longer than the budget goes alone:
it cannot be split, and if it does not fit by itself it fails alone (`isolate_failures` marks that pair).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from generation.errors import without_frames
from generation.model_shapes import Shape
from generation.notices import warn

if TYPE_CHECKING:
    from generation.profiles.sections import JudgeConfig, Rerank


# Bytes of activations per token in flight beyond the KV cache, in units of the model's dtype size: the residual
# stream, the norm's output, q/k/v and the attention output (each ~hidden wide), and the gated MLP's gate, up and
# their product (3 x intermediate) alive at once inside one layer. A rule of thumb, not a measurement; the
# out-of-memory fallback below catches what it misses. It adds the attention's tensors to the MLP's, which are not
# alive at once: that covers the keys and values SDPA attention repeats to every query head over a forward's own
# tokens (2 x heads x head_dim a token: 51k values a token in the attention at the 70B shape, 129k counted). Repeats
# over a cached prefix's keys, once per row, are not per token: the kit's attention folds the heads instead
# (generation/backends/grouped_attention.py), and tests/generation/backends/test_document_batches.py checks a batch's cost against the
# tensors its forwards allocate.
def activation_bytes_per_token(shape: Shape, dtype_bytes: int) -> int:
    width = 4 * shape.hidden + (shape.heads + 2 * shape.kv_heads) * shape.head_dim + 3 * shape.intermediate
    return width * dtype_bytes


def bytes_per_token(shape: Shape, dtype_bytes: int, keeps_cache: bool) -> int:
    """GPU memory one token of a batch needs during a forward: its activations, and its KV cache over all layers
    when the forward keeps one (generate mode, and a batch continuing a shared prefix)."""
    return activation_bytes_per_token(shape, dtype_bytes) + (
        shape.kv_bytes_per_token(dtype_bytes) if keeps_cache else 0
    )


@dataclass(frozen=True)
class TokenCosts:
    """What a batch of several documents holds beside whole tokens, in budget tokens (bytes_per_token):
    `held`, a token of a held prefix in a forward it does not run in (a document's prefix while its sub-questions'
    suffixes run: generation/backends/document_batches.py); `logits`, the logits of one position the LM head runs
    on, in the model's dtype and once in float32 (the digits' log-probabilities, the greedy pick); `mask`, one entry of
    the slot layout's attention mask (query x key, in the model's dtype, and its copy folded over the query heads of
    a key/value head: grouped_attention.py)."""

    held: float = 1.0
    logits: float = 0.0
    mask: float = 0.0


def token_costs(shape: Shape, dtype_bytes: int) -> TokenCosts:
    """A held prefix token: its keys and values in every layer, and once more in the one layer whose attention lays
    the prefixes out for its rows (0.57 of a token at Llama-3.3-70B's shape: a suffix forward holds ~1.8x the
    prefixes a prefix pass computes). A position's logits: the vocabulary x (dtype + 4) bytes (1.3 tokens there). A
    mask entry: (1 + query heads a key/value head serves) x dtype bytes (3e-5 tokens there)."""
    per_token = bytes_per_token(shape, dtype_bytes, keeps_cache=True)
    held = shape.kv_bytes_per_token(dtype_bytes) * (1 + 1 / shape.layers)
    mask = dtype_bytes * (1 + shape.heads // shape.kv_heads)
    return TokenCosts(held / per_token, shape.vocab * (dtype_bytes + 4) / per_token, mask / per_token)


def auto_token_budget(free_bytes: int, total_bytes: int, utilisation: float, per_token: int) -> int:
    """Tokens per batch that keep the process within `utilisation` of the device's memory (vLLM's
    `gpu_memory_utilization` sense), given what is free now (the weights already loaded)."""
    spare = free_bytes - (1 - utilisation) * total_bytes
    return max(int(spare // per_token), 1)


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory as the budget sees it. `free` is the driver's (torch.cuda.mem_get_info, cudaMemGetInfo);
    memory torch's caching allocator holds without a tensor in it (`reserved - allocated`: left over from loading,
    from torchao quantizing each weight as it loads) counts as taken there, yet a batch's tensors reuse it first
    (torch docs, "CUDA memory management": unused cached memory "will still show as if used in nvidia-smi")."""

    free: int
    total: int
    reserved: int  # torch.cuda.memory_reserved: held by the caching allocator
    allocated: int  # torch.cuda.memory_allocated: of which tensors use

    @property
    def usable(self) -> int:
        return self.free + max(self.reserved - self.allocated, 0)


def read_gpu_memory(device) -> GpuMemory:
    free, total = torch.cuda.mem_get_info(device)
    return GpuMemory(free, total, torch.cuda.memory_reserved(device), torch.cuda.memory_allocated(device))


def chosen_auto_budget(memory: GpuMemory, utilisation: float, per_token: int, setting: str) -> tuple[int, str]:
    """The automatic budget, and the one line that states it with its inputs (printed once, when the backend
    starts)."""
    tokens = auto_token_budget(memory.usable, memory.total, utilisation, per_token)
    gib = 2**30
    line = (
        f"{setting}: auto = {tokens:,} tokens a batch: {memory.free / gib:.1f} GiB free on the GPU + "
        f"{max(memory.reserved - memory.allocated, 0) / gib:.1f} GiB cached by torch unused - "
        f"{1 - utilisation:.2f} x {memory.total / gib:.1f} GiB kept back (gpu_memory_utilization: {utilisation}), "
        f"at {per_token / 2**20:.2f} MiB a token"
    )
    return tokens, line


def auto_budget_for(
    shape: Shape, dtype_bytes: int, packed: bool, memory: GpuMemory, utilisation: float, setting: str
) -> tuple[int, str]:
    """`max_batch_tokens: auto` for a model of `shape` once loaded (the transformers backend's choice, and what
    `plan` expects it to choose): a packed batch keeps no KV cache, a padded one may (a shared prefix, generate)."""
    return chosen_auto_budget(memory, utilisation, bytes_per_token(shape, dtype_bytes, keeps_cache=not packed), setting)


def batch_cost(lengths: Sequence[int], packed: bool) -> int:
    return sum(lengths) if packed else len(lengths) * max(lengths, default=0)


def token_batches(
    lengths: Sequence[int], max_pairs: int, max_tokens: int | None = None, packed: bool = False
) -> list[list[int]]:
    """Indices into `lengths`, shortest first, cut into batches of at most `max_pairs` sequences and (when given)
    `max_tokens` tokens. Without a token budget these are exactly the pair-count batches of old."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        grown = [lengths[j] for j in current] + [lengths[i]]
        if current and (
            len(current) >= max_pairs or (max_tokens is not None and batch_cost(grown, packed) > max_tokens)
        ):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


# What torch raises, besides torch.OutOfMemoryError, when a CUDA library cannot allocate: a RuntimeError whose text
# names the status (aten/src/ATen/cuda/Exceptions.h: TORCH_CUDABLAS_CHECK -> "CUDA error: CUBLAS_STATUS_ALLOC_FAILED
# when calling `cublasCreate(handle)`"; cuDNN's check -> "cuDNN error: CUDNN_STATUS_ALLOC_FAILED"; C10_CUDA_CHECK on
# cudaErrorMemoryAllocation -> "CUDA error: out of memory").
OUT_OF_MEMORY_MARKS = ("CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED", "CUDA error: out of memory")


def is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and any(mark in str(error) for mark in OUT_OF_MEMORY_MARKS)
    )


class OutOfMemoryNotice(UserWarning):
    """A batch ran out of memory and the backend went on with smaller ones."""


class LengthBatches:
    """Today's batches: sequences sorted by length, a batch costing rows x its longest (padded) or the sum (packed)."""

    def __init__(self, lengths: Sequence[int], packed: bool):
        self.lengths, self.packed = lengths, packed

    def cut(self, indices: Sequence[int], max_pairs: int, max_tokens: int | None) -> list[list[int]]:
        picked = [self.lengths[i] for i in indices]
        return [[indices[j] for j in b] for b in token_batches(picked, max_pairs, max_tokens, self.packed)]

    def cost(self, batch: Sequence[int]) -> int:
        return batch_cost([self.lengths[i] for i in batch], self.packed)


class TokenBudget:
    """The budget batches are cut to, lowered when a batch runs out of memory and raised again as batches succeed.
    It starts at `max_tokens` (the section's `max_batch_tokens`, auto resolved), cuts batches of at most the section's
    `batch_size` pairs, padded or `packed` as the section says, and names the section's key in its notices.

    After a batch of cost C runs out of memory the budget is the larger of C / 2 and the largest batch that ran
    (below C); each batch that then runs moves it halfway back up towards the smallest cost that failed, so a budget
    lowered by one failure finds the largest batch that fits in a few steps instead of staying low (a binary search
    between what ran and what failed). The smallest failed cost is kept for later calls: it is never tried again."""

    def __init__(self, section: JudgeConfig | Rerank, max_tokens: int | None):
        self.section, self.max_tokens = section, max_tokens
        self.largest_fitted = 0  # tokens of the largest batch that ran
        self.smallest_failed: int | None = None  # tokens of the smallest batch of several that ran out of memory
        self.fitted_after_failure = 0  # tokens of the largest batch that ran after the first failure
        self.noticed = False
        self.first_failure: tuple[int, int] | None = None  # (sequences, tokens) of the first batch that did not fit
        self.checked_alone = False  # whether a call's prompts were checked against the budget (once a backend)

    @property
    def max_pairs(self) -> int:
        return self.section.batch_size

    @property
    def setting(self) -> str:
        return f"{self.section.SECTION}.max_batch_tokens"

    def run(
        self,
        sequences: Sequence[Sequence[int]],
        step: Callable[[list[int]], None],
        on_oom: Callable[[], None] = lambda: None,
        batches: LengthBatches | None = None,
    ) -> dict[int, BaseException]:
        """`step(indices)` over the batches of `sequences` (cut by `batches`: by length unless given); a batch of
        several sequences that runs out of memory (is_out_of_memory) is re-cut, with the rest, under a lower budget
        and tried again; once a batch fits after that, one notice names it and the setting to change. A sequence
        that runs out of memory alone is given up with one notice; the others go on. Returns the errors of those
        given up, by index (empty when all ran). `on_oom` (emptying the allocator's cache) runs after the `except`
        block, once the failed forward's tensors are no longer referenced by the error being handled."""
        batches = batches or LengthBatches([len(s) for s in sequences], self.section.packed)
        pending = batches.cut(list(range(len(sequences))), self.max_pairs, self.max_tokens)
        if not self.checked_alone and self.max_tokens is not None and sequences:
            self.checked_alone = True
            self._say_what_runs_alone([batches.cost([i]) for i in range(len(sequences))], self.max_tokens)
        given_up: dict[int, BaseException] = {}
        while pending:
            batch = pending.pop(0)
            cost = batches.cost(batch)
            error = None
            try:
                step(batch)
            except Exception as caught:  # noqa: BLE001 - torch's OOM and CUDA libraries' allocation RuntimeErrors
                if not is_out_of_memory(caught):
                    raise
                error = without_frames(caught)
            if error is not None:
                on_oom()
                if len(batch) == 1:
                    given_up[batch[0]] = error
                    continue
                self.first_failure = self.first_failure or (len(batch), cost)
                self.smallest_failed = min(cost, self.smallest_failed or cost)
                self.max_tokens = max(cost // 2, self.largest_fitted if self.largest_fitted < cost else 0)
                pending = batches.cut([i for b in [batch, *pending] for i in b], self.max_pairs, self.max_tokens)
                continue
            self.largest_fitted = max(self.largest_fitted, cost)
            if self.first_failure:
                self.fitted_after_failure = max(self.fitted_after_failure, cost)
            if self._recover() and pending:
                pending = batches.cut([i for b in pending for i in b], self.max_pairs, self.max_tokens)
        if self.first_failure and self.fitted_after_failure and not self.noticed:
            self._notice(*self.first_failure)
        if given_up:
            longest = max(len(sequences[i]) for i in given_up)
            warnings.warn(
                f"out of memory on {len(given_up)} sequence(s) alone (the longest {longest:,} tokens): "
                f"those pairs are marked engine_error, the other {len(sequences) - len(given_up)} went on. "
                f"First error: {next(iter(given_up.values()))}",
                OutOfMemoryNotice,
                stacklevel=3,
            )
        return given_up

    def _say_what_runs_alone(self, alone: list[int], budget: int) -> None:
        """One warning, the first time prompts come, when some cost more than the budget by themselves (`alone`:
        each prompt's cost in a batch of its own): those run one a batch, whatever batch_size says."""
        over = sorted(cost for cost in alone if cost > budget)
        if not over:
            return
        which = "every one" if len(over) == len(alone) else f"{len(over):,}"
        warn(
            f"{self.setting}: {budget:,} tokens is less than {which} of the {len(alone):,} prompts costs alone "
            f"({over[0]:,} to {over[-1]:,} tokens): each of those runs in a batch of its own, whatever batch_size "
            f"says. A budget several times {over[-1]:,} batches them; auto sizes it from the GPU's free memory"
        )

    def _recover(self) -> bool:
        """After a batch ran under a lowered budget: the budget halfway back up towards the smallest failed cost."""
        if self.smallest_failed is None or self.max_tokens is None or self.max_tokens >= self.smallest_failed - 1:
            return False
        self.max_tokens = (self.max_tokens + self.smallest_failed) // 2
        return True

    def _notice(self, failed_pairs: int, failed_cost: int) -> None:
        """Once, at the end of the first call that ran out of memory: what failed (`failed_pairs` sequences of
        `failed_cost` tokens) and the largest batch that ran after it (a budget that is known to fit)."""
        self.noticed = True
        warnings.warn(
            f"out of memory on a batch of {failed_pairs} sequences ({failed_cost:,} tokens); batches of up to "
            f"{self.fitted_after_failure:,} tokens fitted after it, and batches stay under "
            f"{self.smallest_failed:,} tokens (the smallest that failed). Set {self.setting}: "
            f"{self.fitted_after_failure} to start there",
            OutOfMemoryNotice,
            stacklevel=3,
        )
