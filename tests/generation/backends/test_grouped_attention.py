"""Grouped-query attention without keys and values repeated per query head (generation/backends/grouped_attention.py):
the logits of transformers' own SDPA attention, bit for bit on a CPU; SDPA called with equal head counts where the
fold holds less than the repeat, and the repeat kept where it holds less, measured by the bytes of the tensors each
way allocates (`LiveBytes`, a dispatch mode that follows every tensor storage the operations create until it is
freed)."""

import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from transformers import LlamaConfig, LlamaForCausalLM

from generation.backends.grouped_attention import NAME, folds_heads, grouped_sdpa, use_grouped_attention


class LiveBytes(TorchDispatchMode):
    """The bytes of the tensor storages the operations run inside it create, alive at once: `peak`. A storage an
    operation returns that one of its inputs already had (a view, an in-place result) is not new."""

    def __init__(self):
        super().__init__()
        self.now = self.peak = 0
        self.alive: set[int] = set()

    def _freed(self, key: int, size: int) -> None:
        self.alive.discard(key)
        self.now -= size

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor) or tensor.device.type == "meta":
                continue
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key in given or key in self.alive or not storage.nbytes():
                continue
            self.alive.add(key)
            self.now += storage.nbytes()
            self.peak = max(self.peak, self.now)
            weakref.finalize(storage, self._freed, key, storage.nbytes())
        return out


def grouped_llama(groups=2, head_dim=64):
    """A random Llama of two layers, 4 query heads over 4 // groups key/value heads, in memory."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=500,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4 // groups,
        head_dim=head_dim,
    )
    return LlamaForCausalLM(config).eval()


def left_padded(rows=3, width=12, seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 500, (rows, width), generator=generator)
    mask = torch.ones((rows, width), dtype=torch.long)
    for row in range(rows):
        mask[row, : row * 3] = 0
    return ids, mask


class SdpaCalls:
    """torch's SDPA as the attention calls it, recording each call's query and key head counts and mask."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[int, int, bool]] = []
        real = torch.nn.functional.scaled_dot_product_attention

        def recorded(query, key, value, attn_mask=None, **kwargs):
            self.calls.append((query.shape[1], key.shape[1], attn_mask is not None))
            return real(query, key, value, attn_mask=attn_mask, **kwargs)

        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recorded)


def test_grouped_attention_gives_sdpas_logits_with_the_heads_folded(monkeypatch):
    model = grouped_llama()
    ids, mask = left_padded()
    with torch.inference_mode():
        plain = model(input_ids=ids, attention_mask=mask).logits
        assert model.config._attn_implementation == "sdpa" and use_grouped_attention(model)
        assert model.config._attn_implementation == NAME
        sdpa = SdpaCalls(monkeypatch)
        grouped = model(input_ids=ids, attention_mask=mask).logits
    assert torch.equal(plain, grouped), "the same logits, bit for bit"
    assert sdpa.calls == [(2, 2, True)] * 2, "each layer: SDPA over the 2 key/value heads, the 4 query heads folded"


def test_maskless_and_single_token_calls_are_transformers_own():
    model = grouped_llama()
    attention = model.model.layers[0].self_attn
    query, key = torch.randn(2, 4, 12, 64), torch.randn(2, 2, 12, 64)
    mask = torch.zeros(2, 1, 12, 12)
    assert folds_heads(attention, query, key, mask)
    assert not folds_heads(attention, query, key, None), "no mask: transformers passes enable_gqa itself"
    assert not folds_heads(attention, query[:, :, :1], key, mask[:, :, :1]), "one token: transformers' pack_gqa"
    assert not folds_heads(attention, query, key, torch.zeros(2, 4, 12, 12)), "a mask per head"
    assert not folds_heads(grouped_llama(groups=1).model.layers[0].self_attn, query, query, mask)
    one_head = grouped_llama(groups=4).model.layers[0].self_attn
    assert not folds_heads(one_head, query, key[:, :1], mask), "one key/value head: repeat_kv makes a view, no copy"


@pytest.mark.parametrize("tokens", [8, 600])
def test_the_fold_is_taken_where_it_allocates_less_than_the_repeat(tokens, monkeypatch):
    """One attention call of 3 rows over 600 keys with an additive mask (as the slot layout makes it), measured both
    ways: 8 query tokens a row (a batch of suffixes) fold, 600 (a long padded prompt) keep the repeat, and the way
    taken is the one that allocates less."""
    from generation.backends import grouped_attention

    model = grouped_llama()
    attention = model.model.layers[0].self_attn
    query, key, value = (torch.randn(3, h, n, 64) for h, n in ((4, tokens), (2, 600), (2, 600)))
    seen = torch.ones(3, 1, tokens, 600, dtype=torch.bool).tril(diagonal=600 - tokens)
    mask = torch.zeros(seen.shape).masked_fill_(~seen, torch.finfo(torch.float32).min)

    def peak(fold: bool):
        monkeypatch.setattr(grouped_attention, "folds_heads", lambda *args, **kwargs: fold)
        with torch.inference_mode(), LiveBytes() as live:
            out = grouped_sdpa(attention, query, key, value, mask, scaling=0.125)[0]
        return live.peak, out

    (repeated, expected), (grouped, got) = peak(False), peak(True)
    monkeypatch.undo()
    assert torch.allclose(got, expected, atol=1e-6)
    assert folds_heads(attention, query, key, mask) == (tokens == 8) == (grouped < repeated)
    if tokens == 8:
        assert repeated - grouped >= 2 * 3 * 2 * 600 * 64 * 4, "the keys and values of 2 more heads a row, not made"
