"""The transformers backend's steps over a batch of several documents in the slot layout (document_batches.py,
`SlotLayout`: a row per document, its sub-questions' suffixes in slots after its prefix), in both judge modes, and
the digits' log-probabilities read on the device.

Distribution mode is the slot forward with the LM head on each slot's last position. Generate mode continues it:
each slot's next token is the argmax of its logits (greedy, as `generate(do_sample=False)` picks it when the model's
generation config asks for no logits processor: `greedy_is_argmax`), fed back one a slot per decode step, each
token seeing its own slot's prefix, suffix and earlier tokens. A slot stops at an end-of-sequence token of the
generation config and is padded with `pad_id` after it, and the steps end when every slot has stopped or after
`max_new_tokens`, as transformers' greedy loop does (generation/utils.py `_sample`): the tokens are the ones
`generate` gives each prompt alone. A document's prefix is laid out once a layer per step for its row, not once per
sub-question (the row-per-suffix layout, which `generate` needs).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch


def digit_logprobs(logits: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
    """log p(token) for each of `wanted` (on the logits' device) at each position of `logits` (..., vocab), as a
    float64 tensor on the host: the digits' logits less the logsumexp over the vocabulary, both taken on the device in
    float32, so a position's full log-softmax (128k floats at Llama-3's vocabulary) never crosses to the host. One
    float32 copy of the logits is made (or none, when they are float32): what TokenCosts.logits counts."""
    scores = logits.float()
    top = scores.amax(dim=-1, keepdim=True)
    picked = scores.index_select(-1, wanted) - top
    shifted = scores.sub_(top) if scores is not logits else scores - top
    total = shifted.exp_().sum(dim=-1, keepdim=True)
    return (picked - total.log()).cpu().double()


def greedy_is_argmax(model) -> bool:
    """Whether `generate(do_sample=False)` picks each token as the argmax of the raw logits for this model: true when
    its generation config asks for no logits processor (transformers builds them from the config in
    GenerationMixin._get_logits_processor; under greedy decoding, those outside its `do_sample` branch: a repetition
    penalty, suppressed or forced tokens, a minimum length...). Llama-3.3-70B-Instruct's config sets only sampling
    settings (temperature, top_p), which greedy decoding leaves out. False when that cannot be told."""
    config = copy.deepcopy(model.generation_config)
    config.do_sample = False
    try:
        return len(model._get_logits_processor(config)) == 0
    except Exception:  # noqa: BLE001 - a transformers without that method: generate() decides, as before
        return False


def end_tokens(model) -> list[int]:
    """The tokens that end a sequence: the generation config's eos_token_id (one or a list), as `generate` reads it."""
    eos = model.generation_config.eos_token_id
    return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)


def slot_forward(backend, ids, mask, positions, cache, keep: torch.Tensor | None = None):
    """One forward of the slot layout (inputs on the input device): its output, logits [rows, kept, vocab]. Compiled
    under `compile: suffix` (compiled_suffixes.py)."""
    return (backend.compiled_suffixes or backend.model)(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
        **({"logits_to_keep": keep.to(backend.hidden_device)} if keep is not None else {}),
    )


def slot_layout_of(backend, chosen: Sequence[int], plan):
    dtype = backend.model.get_input_embeddings().weight.dtype
    return plan.slot_inputs(chosen, backend._prefill_many, backend.pad_id, dtype)


def slot_logprobs(backend, chosen: list[int], plan, wanted: torch.Tensor, out: torch.Tensor) -> None:
    """Distribution mode: `out[chosen]`, each pair's digit log-probabilities from its slot's last position."""
    layout = slot_layout_of(backend, chosen, plan)
    device = backend.input_device
    ids, mask, positions = layout.ids.to(device), layout.mask.to(device), layout.positions.to(device)
    logits = slot_forward(backend, ids, mask, positions, layout.cache, layout.keep).logits
    logprobs = digit_logprobs(logits, wanted.to(logits.device))
    out[chosen] = torch.stack([logprobs[layout.where[i]] for i in chosen])


def slot_generate(backend, chosen: list[int], plan, max_new_tokens: int, texts: list[str]) -> None:
    """Generate mode: `texts[chosen]`, each pair's greedy continuation decoded without special tokens. One step's
    logits are alive at a time: what the token budget counts (document_batches.py)."""
    layout = slot_layout_of(backend, chosen, plan)
    device, on_head = backend.input_device, backend.hidden_device
    mask, positions, keep = (t.to(device) for t in (layout.mask, layout.positions, layout.keep))
    running = torch.zeros((layout.ids.shape[0], layout.slots), dtype=torch.bool)  # a slot with a pair, not ended
    for row, slot in layout.where.values():
        running[row, slot] = True
    running = running.to(on_head)
    ends = torch.tensor(backend.end_tokens, dtype=torch.long, device=on_head)

    def pick(logits: torch.Tensor) -> torch.Tensor:
        tokens = logits.float().argmax(dim=-1)
        if len(ends):  # as generate: an ended slot's next tokens are padding
            tokens = torch.where(running, tokens, backend.pad_id)
            running.logical_and_(~torch.isin(tokens, ends))
        return tokens

    output = slot_forward(backend, layout.ids.to(device), mask, positions, layout.cache, layout.keep)
    cache, chosen_tokens = output.past_key_values, [pick(output.logits)]
    del output
    seen, last = mask[:, :, keep, :], positions[:, keep]
    for step in range(1, max_new_tokens):
        if not bool(running.any()):
            break
        step_positions, step_mask = layout.step_inputs(seen, last, step)
        logits = slot_forward(backend, chosen_tokens[-1].to(device), step_mask, step_positions, cache).logits
        chosen_tokens.append(pick(logits))
        del logits
    generated = torch.stack(chosen_tokens, dim=-1).cpu()
    for i in chosen:
        texts[i] = backend.tokenizer.decode(generated[layout.where[i]], skip_special_tokens=True)
