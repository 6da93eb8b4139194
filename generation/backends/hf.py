"""transformers backend: batched, left-padded causal LM forward passes on CPU or GPU."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from pathlib import Path

import torch

from generation.backends import placement
from generation.backends.batching import (
    TokenBudget,
    auto_budget_for,
    read_gpu_memory,
    token_batches,
    token_costs,
)
from generation.backends.compiled_suffixes import compiled_suffixes
from generation.backends.document_batches import DocumentBatches, full_attention_only
from generation.backends.grouped_attention import NAME as GROUPED_SDPA
from generation.backends.grouped_attention import use_grouped_attention
from generation.backends.prefix_groups import (
    MIN_SHARED_PREFIX,
    GroupBatches,
    SharedPrefixCache,
    shared_prefix_length,
    shares_layers,
)
from generation.backends.slot_steps import (
    digit_logprobs,
    end_tokens,
    greedy_is_argmax,
    slot_generate,
    slot_logprobs,
)
from generation.errors import PartlyFailed
from generation.judging.judges import LLMJudge
from generation.judging.reranker_input import make_encoder
from generation.model_shapes import shape_from_config
from generation.profiles.model_paths import resolve_model
from generation.profiles.profile import JudgeConfig
from generation.profiles.profile import Rerank as RerankConfig
from generation.progress import console

Section = JudgeConfig | RerankConfig  # the profile sections the backend runs as (both TransformersSettings)

DTYPES = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

__all__ = ["MIN_SHARED_PREFIX", "TransformersBackend", "shared_prefix_length"]  # the prefix helpers' old home


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
        ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
        mask[row, width - len(seq) :] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return ids, mask, positions


def hidden_states_device(model) -> torch.device:
    """Where the final hidden states are: the device of the decoder's last module with weights (its final norm);
    under a `device_map` over several GPUs, the last GPU, not the one the input embeddings are on."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    last = next((p for p in reversed(list(decoder.parameters()))), None)
    return last.device if last is not None else model.get_input_embeddings().weight.device


ATTENTION_FOR_PACKING = ("flex_attention", "flash_attention_2", "flash_attention_3")


class TransformersBackend:
    """A causal LM through transformers, run as its profile section (`judge` or `rerank`) says; the backend keeps the
    section and reads each key where it is used. Batches are cut by `max_batch_tokens` (an int, "auto": from the GPU's
    free memory after loading, or None: `batch_size` pairs alone, as "auto" is on a CPU), lowered with one notice when
    a batch runs out of memory. `packed` lays a batch's sequences end to end in one row without padding (on a GPU
    `attention` must be one of ATTENTION_FOR_PACKING; a CPU runs it with any). A model larger than one GPU is spread
    over the visible GPUs, or refused before loading (generation/backends/placement.py), keeping room on each GPU for a
    batch of `max_batch_tokens` tokens, or of one longest sequence (`max_model_len`, the reranker's `max_length`)
    when the budget is auto or unset. `device` (default: the judge section's; the rerank section has none: auto)."""

    def __init__(self, model_path: str | Path, section: Section, device: str | None = None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        judge = section if isinstance(section, JudgeConfig) else None  # device and fp8: the judge section's keys
        self.device = pick_device(device or (judge.device if judge else "auto"))
        if section.packed and self.device != "cpu" and section.attention not in ATTENTION_FOR_PACKING:
            # sdpa and eager would get a block-diagonal mask over the whole packed row: right, but quadratic in it
            raise ValueError(
                f"{section.SECTION}.packed: true on {self.device} needs variable-length attention: "
                f"`{section.SECTION}.attention:` one of {', '.join(ATTENTION_FOR_PACKING)}, not {section.attention!r}"
            )
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        torch_dtype = DTYPES[section.dtype]
        if torch_dtype == "auto":
            torch_dtype = torch.float32 if self.device == "cpu" else torch.bfloat16
        config = placement.read_config(model_path)
        self.shape = shape_from_config(config, str(model_path))
        load = {"dtype": torch_dtype, **({"attn_implementation": section.attention} if section.attention else {})}
        quantization = judge.quantization if judge else None
        if judge and quantization == "fp8":
            load.update(placement.fp8_load_settings(self.device, judge.fp8_granularity))
        self.placement = None
        if self.device.startswith("cuda"):
            longest = section.max_model_len if isinstance(section, JudgeConfig) else section.max_length
            budget = section.max_batch_tokens
            reserve = placement.reserve_for(
                self.shape, budget if isinstance(budget, int) else longest, torch_dtype.itemsize
            )
            index = torch.device(self.device).index  # "cuda:N": that GPU alone; "cuda": all the visible ones
            totals, free = placement.visible_gpu_memory(index)
            self.placement = placement.plan_placement(
                config,
                torch_dtype,
                quantization,
                totals,
                section.gpu_memory_utilization,
                reserve,
                str(model_path),
                free,
            )
            load["device_map"] = (
                {module: index for module in self.placement.device_map}
                if index is not None
                else self.placement.device_map
            )
        self.model = AutoModelForCausalLM.from_pretrained(str(model_path), **load)
        if self.placement is None:
            self.model.to(self.device)
        self._adopt(self.model, self.tokenizer, section)

    @classmethod
    def wrap(cls, model, tokenizer, section: Section):
        """The backend around a model already in memory (the GPU benchmark builds random-weight ones): the section's
        batching keys apply; those that load a model (dtype, attention, quantization, device) do not."""
        self = cls.__new__(cls)
        self.shape, self.placement = shape_from_config(model.config), None
        self._adopt(model, tokenizer, section)
        self.device = str(self.input_device)
        return self

    def _adopt(self, model, tokenizer, section: Section) -> None:
        self.section = section
        self.model, self.tokenizer = model.eval(), tokenizer
        use_grouped_attention(self.model)  # SDPA without keys and values repeated per query head (grouped_attention.py)
        if section.compile is True:
            # the forward compiled in place (nn.Module.compile), shapes marked dynamic so batches of new lengths reuse
            # the graph; torchao's float8 config sets inductor up for this (set_inductor_config=True)
            self.model.compile(dynamic=True)
        self.input_device = self.model.get_input_embeddings().weight.device
        self.hidden_device = hidden_states_device(self.model)
        max_batch_tokens = section.max_batch_tokens
        if max_batch_tokens == "auto" and self.input_device.type != "cuda":
            max_batch_tokens = None  # a CPU's memory is the machine's: the pair count alone, as before
        elif max_batch_tokens == "auto":
            max_batch_tokens, line = auto_budget_for(
                self.shape,
                self.model.dtype.itemsize,
                section.packed,
                read_gpu_memory(self.input_device),
                section.gpu_memory_utilization,
                f"{section.SECTION}.max_batch_tokens",
            )
            console.print(f"notice: {line}", highlight=False, markup=False, soft_wrap=True)
        self.budget = TokenBudget(section, max_batch_tokens)
        # groups of several keys share forwards (document_batches.py) where a padded prefix stands in for a cache
        self.several_groups = full_attention_only(self.model.config)
        # a document a row, its suffixes in slots, needs an attention that takes a 4D mask as it is (masking_utils:
        # "If the mask is already 4D, simply return as-is"); flash attention gets a row per suffix instead
        self.slot_layout = self.model.config._attn_implementation in (GROUPED_SDPA, "sdpa", "eager")
        # generate mode in the slot layout decodes greedily itself (slot_steps.py): where that is what generate() does
        self.slot_generate = self.slot_layout and greedy_is_argmax(self.model)
        self.end_tokens = end_tokens(self.model)
        self.compiled_suffixes = compiled_suffixes(self, section)  # compile: suffix (compiled_suffixes.py)
        self.token_costs = token_costs(self.shape, self.model.dtype.itemsize)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)

    def _batches(self, sequences: Sequence[Sequence[int]]):
        """Length-sorted batches within the budget, yielded with the original positions (no out-of-memory
        fallback: the benchmark's raw loops use it)."""
        lengths, section = [len(s) for s in sequences], self.section
        for chosen in token_batches(lengths, section.batch_size, self.budget.max_tokens, section.packed):
            yield chosen, [sequences[i] for i in chosen]

    @staticmethod
    def _answers(answers, given_up: dict):
        """The answers, or PartlyFailed keeping them when some sequences ran out of memory alone."""
        if given_up:
            raise PartlyFailed(answers, given_up)
        return answers

    def _free_cache(self) -> None:
        if self.input_device.type == "cuda":
            torch.cuda.empty_cache()

    prefix_groups = True  # takes `groups`: prompts of one key share a prefix computed once (prefix_groups.py)
    prepared_ahead = True  # with `groups`, the judge builds the next piece's prompts while this one runs

    def _prefill(self, prefix: Sequence[int]):
        """The KV cache of one prefix, run as one sequence."""
        ids = torch.tensor([list(prefix)], device=self.input_device)
        return self.model(input_ids=ids, use_cache=True, logits_to_keep=1).past_key_values

    def _prefill_many(self, prefixes: Sequence[Sequence[int]]):
        """The KV cache of several prefixes in one forward, right-padded (row r: prefixes[r] at positions 0, 1, ...)
        and without a mask: each real token sees only the tokens before it, all of its own prefix, so causal
        attention alone is right, and SDPA runs its maskless kernels (flash attention, grouped heads as they are).
        The padding after a shorter prefix is never read: its row is held up to its prefix's length
        (document_batches.DocumentBatches.hold_prefixes)."""
        width = max(len(prefix) for prefix in prefixes)
        ids = torch.full((len(prefixes), width), self.pad_id, dtype=torch.long)
        for row, prefix in enumerate(prefixes):
            ids[row, : len(prefix)] = torch.tensor(list(prefix), dtype=torch.long)
        positions = torch.arange(width).repeat(len(prefixes), 1)
        return self.model(
            input_ids=ids.to(self.input_device),
            position_ids=positions.to(self.input_device),
            use_cache=True,
            logits_to_keep=1,
        ).past_key_values

    def _plan(self, sequences, groups):
        """How a call's batches are cut: several groups a batch (document_batches.py) when the prompts come with
        keys and the model's layers allow it, else one group's prefix at a time (prefix_groups.py)."""
        if groups is not None and self.several_groups:
            return DocumentBatches(sequences, groups, self.token_costs, compiled=self.compiled_suffixes is not None)
        return GroupBatches(sequences, groups)

    def _document_inputs(self, sequences, chosen: list[int], plan: DocumentBatches):
        """A batch's suffixes, left-padded after their own groups' prefixes: ids, mask (the batch's prefix width
        included, each row's shorter prefix masked), positions continuing from each row's prefix, the cache, the
        prefix width and each row's prefix length."""
        width, lengths, cache = plan.prefix_cache(chosen, self._prefill_many)
        ids, mask, pos = left_pad([sequences[i][n:] for i, n in zip(chosen, lengths)], self.pad_id)
        if width:
            prefix_mask = torch.tensor([[0] * (width - n) + [1] * n for n in lengths], dtype=mask.dtype)
            mask = torch.cat([prefix_mask, mask], 1)
            pos = pos + torch.tensor(lengths).unsqueeze(1)
        return ids.to(self.input_device), mask.to(self.input_device), pos.to(self.input_device), cache, width, lengths

    def _suffix_inputs(self, sequences, chosen: list[int], plan: GroupBatches):
        """A batch's suffixes, left-padded after its group's prefix: ids, mask (prefix included), positions, the
        cache the suffixes continue from (None without a prefix) and the prefix length."""
        shared, prefix = plan.prefix_cache(chosen, self._prefill)
        ids, mask, pos = (
            t.to(self.input_device) for t in left_pad([sequences[i][shared:] for i in chosen], self.pad_id)
        )
        cache = None
        if prefix is not None:
            if shares_layers(prefix):
                cache = SharedPrefixCache(prefix, len(chosen))
            else:  # a layer that cannot be shared (a sliding window's): copied for each suffix
                cache = copy.deepcopy(prefix)
                cache.batch_repeat_interleave(len(chosen))
            mask = torch.cat([torch.ones((len(chosen), shared), dtype=mask.dtype, device=mask.device), mask], 1)
        return ids, mask, pos + shared, cache, shared

    @torch.inference_mode()
    def next_token_logprobs(
        self, sequences: Sequence[Sequence[int]], token_ids: Sequence[int], groups: Sequence | None = None
    ) -> torch.Tensor:
        """log p(token | sequence) over the full vocabulary at the last position, for each of `token_ids`.

        One forward per batch with `logits_to_keep=1` (the LM head on the last position only). Prompts of one
        group (`groups`: a key per sequence; without it, all of them) share their common prefix, which runs once;
        each batch of their suffixes continues from its KV cache (generation/backends/prefix_groups.py)."""
        out = torch.empty((len(sequences), len(token_ids)), dtype=torch.float64)
        wanted = torch.tensor(list(token_ids), dtype=torch.long, device=self.hidden_device)
        if not sequences:
            return out
        if self.section.packed:
            return self._answers(
                out,
                self.budget.run(
                    sequences, lambda chosen: self._packed_step(sequences, chosen, wanted, out), self._free_cache
                ),
            )
        plan = self._plan(sequences, groups)

        def step(chosen: list[int]) -> None:
            if isinstance(plan, DocumentBatches) and self.slot_layout:
                return self._slot_step(chosen, plan, wanted, out)
            if isinstance(plan, DocumentBatches):
                ids, mask, pos, cache, _, _ = self._document_inputs(sequences, chosen, plan)
            else:
                ids, mask, pos, cache, _ = self._suffix_inputs(sequences, chosen, plan)
            logits = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=pos,
                past_key_values=cache,
                use_cache=cache is not None,
                logits_to_keep=1,
            ).logits[:, -1, :]
            out[chosen] = digit_logprobs(logits, wanted)

        return self._answers(out, self.budget.run(sequences, step, self._free_cache, plan))

    def _slot_step(self, chosen: list[int], plan: DocumentBatches, *into) -> None:
        """A batch of several documents in one forward, a row per document, its sub-questions in slots
        (slot_steps.py): distribution mode given (wanted, out), generate mode (max_new_tokens, texts)."""
        if isinstance(into[0], torch.Tensor):
            return slot_logprobs(self, chosen, plan, *into)
        return slot_generate(self, chosen, plan, *into)

    def _packed_step(self, sequences, chosen: list[int], wanted: torch.Tensor, out: torch.Tensor) -> None:
        """The chosen sequences end to end in one row, no padding: positions restart at 0 for each, which is how
        transformers tells packed sequences apart (masking_utils.find_packed_sequence_indices: a new sequence where
        the position does not grow by 1) when there is no attention mask and no cache; the LM head runs on each
        sequence's last position only (`logits_to_keep` as indices)."""
        lengths = [len(sequences[i]) for i in chosen]
        ids = torch.tensor([[t for i in chosen for t in sequences[i]]], device=self.input_device)
        positions = torch.tensor([[p for n in lengths for p in range(n)]], device=self.input_device)
        # the LM head indexes the final hidden states with `last`: on a device_map spread those are on the last
        # GPU, and a CUDA index must be on the indexed tensor's device
        last = torch.tensor(lengths, device=self.hidden_device).cumsum(0) - 1
        logits = self.model(input_ids=ids, position_ids=positions, logits_to_keep=last, use_cache=False).logits[0]
        out[chosen] = digit_logprobs(logits, wanted)

    @torch.inference_mode()
    def generate(
        self, sequences: Sequence[Sequence[int]], max_new_tokens: int, groups: Sequence | None = None
    ) -> list[str]:
        """Greedy continuation of each sequence, decoded without special tokens. With `groups`, the prompts of one
        group continue from their shared prefix's cache (its ids stay in `input_ids`, so `generate` starts after
        the cached positions, and positions come from the mask: the padding between prefix and suffix is skipped)."""
        texts: list[str] = [""] * len(sequences)
        plan = self._plan(sequences, groups) if groups is not None else None

        def step(chosen: list[int]) -> None:
            if isinstance(plan, DocumentBatches) and self.slot_generate:
                return self._slot_step(chosen, plan, max_new_tokens, texts)
            if plan is None:
                ids, mask, _ = (t.to(self.input_device) for t in left_pad([sequences[i] for i in chosen], self.pad_id))
                cache = None
            elif isinstance(plan, DocumentBatches):
                ids, mask, _, cache, width, lengths = self._document_inputs(sequences, chosen, plan)
                heads = [[self.pad_id] * (width - n) + list(sequences[i][:n]) for i, n in zip(chosen, lengths)]
                ids = torch.cat([torch.tensor(heads, dtype=torch.long, device=self.input_device), ids], dim=1)
            else:
                ids, mask, _, cache, shared = self._suffix_inputs(sequences, chosen, plan)
                head = torch.tensor([list(sequences[chosen[0]][:shared])], dtype=torch.long, device=self.input_device)
                ids = torch.cat([head.expand(len(chosen), -1), ids], dim=1)
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                past_key_values=cache,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.pad_id,
            )
            for row, position in enumerate(chosen):
                texts[position] = self.tokenizer.decode(out[row, ids.shape[1] :], skip_special_tokens=True)

        return self._answers(texts, self.budget.run(sequences, step, self._free_cache, plan))


class QwenRerankerScorer:
    """P(yes) of a Qwen3-Reranker-style causal LM through the transformers backend (CPU or GPU)."""

    def __init__(self, config: RerankConfig, device: str = "auto"):
        path = resolve_model(config.model)
        self.backend = TransformersBackend(path, config, device)
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
    backend = TransformersBackend(resolve_model(config.model), config)
    return LLMJudge(config, backend, backend.tokenizer, f"{config.model} (transformers)")
