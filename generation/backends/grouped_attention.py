"""Attention for grouped-query models (Llama-3.3-70B: 64 query heads, 8 key/value heads) that never repeats the keys
and values to every query head.

transformers' SDPA attention (integrations/sdpa_attention.py, 5.23) passes `enable_gqa=True` only without a mask on
CUDA (`use_gqa_in_sdpa`: "CUDA and Ascend NPU require no mask and supported head dims to avoid falling back to the
math kernel"), folds the heads of one key/value head into rows only for a single query token (`pack_gqa`), and
otherwise copies the keys and values to every query head (`repeat_kv`). A left-padded prefix pass, a batch of
suffixes and a slot forward all carry a mask and many query tokens: each layer then held the keys and values 8 times
over (~4.3 GB a layer for 42 rows of ~3,000 tokens at the 70B shape), memory the token budget did not count. torch's
own `enable_gqa` does not help there: with a mask, flash attention is out (sdp_utils.cpp `check_for_attn_mask`), and
the memory-efficient CUDA kernel takes unequal head counts only since pytorch/pytorch#191085 (July 2026), after the
torch 2.11 the GPU machines run; the call falls to the math kernel, which repeats them itself.

`grouped_sdpa` does what `pack_gqa` does, for any number of query tokens: the query heads of one key/value head
become consecutive query rows ([batch, kv_heads, groups x tokens, head_dim]), the mask repeated along them (it is
the same for every head), and SDPA runs with equal head counts, which its memory-efficient kernel takes with a mask.
Each query row meets the same keys, values and mask entries as before: on a CPU the logits are bit-identical
(tests/generation/backends/test_grouped_attention.py). Where that holds less than the repeat (`folds_heads`), it folds; otherwise, and
without a mask (the kit's prefix passes: right-padded, maskless), it is transformers' own function unchanged.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

NAME = "sdpa_grouped"  # holds "sdpa": transformers checks the model can run SDPA before it takes the name


def folds_heads(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, **kwargs):
    """Whether `grouped_sdpa` folds the query heads for this call: a mask shared by the heads, more than one query
    token, several key/value heads each serving several query heads, and the folded mask smaller than the keys and
    values repeated per query head. The mask, one entry per query row and key, is repeated `groups` times (and SDPA turns a boolean
    one into the query's dtype); the repeat costs 2 x heads x head_dim per key and row. At the 70B shape (8 groups,
    64 x 128) folding holds less below ~2,000 query tokens a row: a slot forward, a batch of suffixes, a decode step;
    a whole prompt of ~3,000 tokens with padding keeps the repeat, which the token budget's activation rule counts
    (batching.py)."""
    groups = getattr(module, "num_key_value_groups", 1)
    if (
        mask is None
        or groups == 1
        or query.shape[2] == 1
        or key.shape[1] == 1  # one key/value head: repeat_kv's copies are a view (stride 0), no memory
        or mask.dim() != 4
        or mask.shape[1] != 1  # a mask of its own per head
        or any(kwargs.get(name) is not None for name in ("position_bias", "cache", "softcap"))
        or kwargs.get("output_attentions", False)
    ):
        return False
    mask_bytes = mask.element_size() + (query.element_size() if mask.dtype == torch.bool else 0)
    return groups * query.shape[2] * mask_bytes < 2 * query.shape[1] * key.shape[-1] * key.element_size()


def grouped_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    if attention_mask is None or not folds_heads(module, query, key, attention_mask, **kwargs):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    groups = module.num_key_value_groups
    batch, heads, tokens, head_dim = query.shape
    # query head h uses key/value head h // groups (repeat_kv's order): heads k*groups .. k*groups + groups - 1
    folded = query.reshape(batch, key.shape[1], groups * tokens, head_dim)
    mask = attention_mask[:, :, None].expand(-1, -1, groups, -1, -1)
    mask = mask.reshape(attention_mask.shape[0], 1, groups * tokens, attention_mask.shape[-1])
    out = torch.nn.functional.scaled_dot_product_attention(
        folded, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling
    )
    return out.reshape(batch, heads, tokens, value.shape[-1]).transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, grouped_sdpa)
AttentionMaskInterface.register(NAME, sdpa_mask)  # the masks transformers makes for SDPA: this takes the same


def use_grouped_attention(model) -> bool:
    """The model's SDPA attention switched to `grouped_sdpa`, in place (True); any other attention is left as chosen
    (False)."""
    if model.config._attn_implementation != "sdpa":
        return False
    model.set_attn_implementation(NAME)
    return model.config._attn_implementation == NAME
