"""The transformers backend's one-step log-probabilities: the shared-prefix KV reuse and logits_to_keep=1 give what a
plain full forward of each sequence alone gives."""

import random

import pytest
import torch

from generation.backends.hf import MIN_SHARED_PREFIX, TransformersBackend, shared_prefix_length
from tests.helpers import transformers_judge


def test_shared_prefix_leaves_each_sequence_a_token_of_its_own():
    assert shared_prefix_length([[1, 2, 3, 4], [1, 2, 3, 5, 6]]) == 3
    assert shared_prefix_length([[1, 2, 3], [1, 2, 3, 4]]) == 2
    assert shared_prefix_length([[7, 8, 9]]) == 2
    assert shared_prefix_length([[1, 2], [3, 4]]) == 0


@pytest.mark.parametrize("head", [MIN_SHARED_PREFIX + 40, 3], ids=["shared-prefix", "no-shared-prefix"])
def test_next_token_logprobs_equal_a_full_forward_of_each_sequence(chat_llama, head):
    backend = TransformersBackend(chat_llama, transformers_judge(chat_llama, batch_size=4))
    rng = random.Random(0)
    prefix = [rng.randrange(1000, 20000) for _ in range(head)]
    sequences = [prefix + [rng.randrange(1000, 20000) for _ in range(rng.randint(1, 90))] for _ in range(9)]
    wanted = [1014, 1015, 1016, 1017, 1018, 1019]
    got = backend.next_token_logprobs(sequences, wanted)
    with torch.inference_mode():  # the log-softmax in float64: float32's own is off by up to 6e-5 here
        alone = torch.stack(
            [torch.log_softmax(backend.model(torch.tensor([s])).logits[0, -1].double(), -1)[wanted] for s in sequences]
        )
    assert got.shape == (9, 6)
    assert torch.allclose(got, alone, atol=1e-5)
    assert backend.next_token_logprobs([], wanted).shape == (0, 6)
