"""Batches by tokens: the budget holds, the grades are today's, and a batch that runs out of
memory costs one notice and smaller batches, not a silent bisection. The out-of-memory error is torch's own
(`torch.OutOfMemoryError`), raised by a wrapper around the real tiny model above a token count, since a CPU has
no GPU memory to run out of."""

import math
import random
import warnings

import pytest
import torch

from generation.backends.batching import OutOfMemoryNotice, auto_token_budget, batch_cost, token_batches
from generation.backends.document_batches import RowPrefixCache
from generation.backends.hf import TransformersBackend
from generation.backends.prefix_groups import SharedPrefixCache
from generation.judging.judges import LLMJudge, Pair
from generation.model_shapes import LLAMA_33_70B, PUBLISHED
from generation.profiles.profile import load_profile


class TokenLimited(torch.nn.Module):
    """The model, raising torch.OutOfMemoryError when a forward would hold more than `limit` tokens (rows x
    (new + cached) positions, a held prefix's at `held_share`: the backend's own, document_batches.py); records the
    token count of every forward that ran."""

    def __init__(self, model, limit: int, held_share: float = 1.0):
        super().__init__()
        self.inner, self.limit, self.held_share, self.ran = model, limit, held_share, []

    def _check(self, input_ids, past_key_values=None):
        past = past_key_values.get_seq_length() if past_key_values is not None else 0
        # a shared-prefix cache holds its prefix once for all the rows (generation/backends/prefix_groups.py); a
        # row-prefix cache each group's once, the rows' own positions after them (document_batches.py)
        held = input_ids.shape[0] * past
        if isinstance(past_key_values, SharedPrefixCache):
            held = past
        elif isinstance(past_key_values, RowPrefixCache):
            layer = past_key_values.layers[0]
            own = layer.keys.shape[0] * layer.keys.shape[2]
            held = math.ceil(self.held_share * sum(part[1].shape[1] for part in layer.parts)) + own
        tokens = input_ids.shape[0] * input_ids.shape[1] + held
        if tokens > self.limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory (test: {tokens} tokens > {self.limit})")
        self.ran.append(tokens)

    def forward(self, input_ids, past_key_values=None, **kwargs):
        self._check(input_ids, past_key_values)
        return self.inner(input_ids=input_ids, past_key_values=past_key_values, **kwargs)

    def generate(self, input_ids, **kwargs):
        cache = kwargs.get("past_key_values")  # input_ids hold the cached prefix too: only the rest is computed
        self._check(input_ids[:, cache.get_seq_length() if cache is not None else 0 :], cache)
        return self.inner.generate(input_ids=input_ids, **kwargs)

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()


def test_without_a_budget_the_batches_are_the_pair_count_batches_of_old():
    rng = random.Random(0)
    lengths = [rng.randint(5, 300) for _ in range(50)]
    order = sorted(range(50), key=lambda i: lengths[i])
    assert token_batches(lengths, 8) == [order[i : i + 8] for i in range(0, 50, 8)]


def test_a_token_budget_caps_every_batch_and_a_long_sequence_goes_alone():
    rng = random.Random(1)
    lengths = [rng.randint(5, 300) for _ in range(60)] + [900]
    for packed in (False, True):
        batches = token_batches(lengths, 16, max_tokens=800, packed=packed)
        assert sorted(i for b in batches for i in b) == list(range(61))
        assert [60] in batches, "the 900-token sequence cannot be split: it runs alone"
        assert all(batch_cost([lengths[i] for i in b], packed) <= 800 for b in batches if b != [60])
        assert all(len(b) <= 16 for b in batches)
    padded, packed = (len(token_batches(lengths, 64, 800, p)) for p in (False, True))
    assert packed < padded, "a packed batch pays no padding"


def test_auto_budget_from_free_memory():
    """70B shape in bf16 (activations and KV cache per token from its config), an 80 GB GPU with 67.7 GiB taken
    by weights: at 0.9 utilisation, what is left over the bytes a token needs."""
    shape = PUBLISHED[LLAMA_33_70B]
    from generation.backends.batching import bytes_per_token

    per_token = bytes_per_token(shape, 2, keeps_cache=True)
    assert per_token == (4 * 8192 + (64 + 16) * 128 + 3 * 28672) * 2 + 2 * 80 * 8 * 128 * 2
    total, free = 80 * 2**30, 80 * 2**30 - int(67.7 * 2**30)
    assert auto_token_budget(free, total, 0.9, per_token) == int((free - 0.1 * total) // per_token)
    assert auto_token_budget(1, total, 0.9, per_token) == 1


def judge_pairs(n_questions=3, n_documents=7):
    rng = random.Random(3)
    words = "bee hive varroa mite pollen nectar queen drone colony winter loss forage".split()
    docs = [" ".join(rng.choices(words, k=rng.randint(5, 120))) for _ in range(n_documents)]
    return [Pair(f"why do bees {rng.choice(words)} number {q}?", d) for q in range(n_questions) for d in docs]


def judge(model_dir, mode, batch_size, max_batch_tokens=None, limit=None, prompt="crux-paper"):
    config = load_profile("paper").judge.model_copy(
        update={
            "backend": "transformers",
            "model": str(model_dir),
            "prompt": prompt,
            "mode": mode,
            "dtype": "float32",
            "device": "cpu",
            "max_model_len": 1024,
            "batch_size": batch_size,
            "max_batch_tokens": max_batch_tokens,
        }
    )
    backend = TransformersBackend(model_dir, config)
    if limit is not None:
        backend.model = TokenLimited(backend.model, limit, backend.token_costs.held)
    return LLMJudge(config, backend, backend.tokenizer, "tiny"), backend


@pytest.mark.parametrize("mode", ["distribution", "generate"])
@pytest.mark.slow
def test_out_of_memory_gives_one_notice_smaller_batches_and_todays_grades(chat_llama, mode):
    pairs = judge_pairs()
    today, _ = judge(chat_llama, mode, batch_size=8)
    expected = today.grade(pairs)
    limited, backend = judge(chat_llama, mode, batch_size=64, limit=1500)
    with pytest.warns(OutOfMemoryNotice) as notices:
        got = limited.grade(pairs)
    assert len(notices) == 1
    message = str(notices[0].message)
    assert "out of memory on a batch of 21 sequences" in message and " fitted after it" in message
    budget = backend.budget
    assert budget.fitted_after_failure <= 1500 and message.endswith(
        f"judge.max_batch_tokens: {budget.fitted_after_failure} to start there"
    )
    assert budget.max_tokens < budget.smallest_failed, "a cost that failed is not tried again"
    assert all(tokens <= 1500 for tokens in backend.model.ran)
    assert [g.status for g in got] == ["ok"] * len(pairs)
    assert [g.level for g in got] == [g.level for g in expected]
    assert [g.raw for g in got] == [g.raw for g in expected]
    if mode == "distribution":
        assert [g.probs for g in got] == [pytest.approx(g.probs, abs=1e-5) for g in expected]
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutOfMemoryNotice)  # the lowered budget holds: no second notice
        assert [g.level for g in limited.grade(pairs)] == [g.level for g in expected]


@pytest.mark.slow
def test_a_budget_in_the_profile_gives_todays_grades_in_smaller_batches(chat_llama):
    pairs = judge_pairs()
    today, _ = judge(chat_llama, "distribution", batch_size=8)
    budgeted, backend = judge(chat_llama, "distribution", batch_size=64, max_batch_tokens=600, limit=600)
    assert [g.probs for g in budgeted.grade(pairs)] == [pytest.approx(g.probs, abs=1e-5) for g in today.grade(pairs)]
    assert backend.model.ran and max(backend.model.ran) <= 600


def test_a_pair_too_large_alone_fails_alone(chat_llama):
    """One prompt over the limit by itself: the notice, then that pair as an engine error; the others graded."""
    pairs = judge_pairs(1, 6) + [Pair("why do bees swarm?", "swarm " * 600)]
    limited, _ = judge(chat_llama, "distribution", batch_size=64, limit=500)
    with pytest.warns(OutOfMemoryNotice):
        grades = limited.grade(pairs)
    assert [g.status for g in grades] == ["ok"] * 6 + ["engine_error"]
    assert "OutOfMemoryError" in grades[-1].raw


def test_auto_budget_on_a_cpu_is_the_pair_count_alone(chat_llama):
    _, backend = judge(chat_llama, "distribution", batch_size=8, max_batch_tokens="auto")
    assert backend.budget.max_tokens is None and backend.budget.max_pairs == 8
