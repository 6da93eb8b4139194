"""A document-first prompt's document computed once: the transformers backend runs each document's prefix once and
its sub-questions' suffixes against that cache, and gets what whole prompts of the same prompt get (the same levels,
digit log-probabilities within 1e-4 in fp32), in both modes, on tiny random Llama and Qwen3 models carrying the
published chat templates, with groups that cross a batch boundary."""

import random

import pytest
import torch

from generation.backends.document_batches import DocumentBatches
from generation.backends.prefix_groups import GroupBatches, SharedPrefixCache, shared_prefix_length
from generation.judging.judges import Pair
from generation.profiles.profile import load_profile
from tests.generation.backends.test_batching import judge

WORDS = "bee hive varroa mite pollen nectar queen drone colony winter loss forage comb brood swarm".split()


def grouped_pairs(documents=4, subquestions=(5, 1, 7, 3), seed=5):
    """Pairs in judging order for a document-first prompt: by document, its sub-questions inside."""
    rng = random.Random(seed)
    docs = [" ".join(rng.choices(WORDS, k=rng.randint(60, 160))) for _ in range(documents)]
    questions = [f"how does the {rng.choice(WORDS)} affect the {rng.choice(WORDS)} {k}?" for k in range(8)]
    return [Pair(questions[(d + k) % 8], doc) for d, doc in enumerate(docs) for k in range(subquestions[d])]


def assert_same_grades(got, expected, mode):
    """What whole prompts give: the same statuses, levels and answers; digit probabilities within 1e-4."""
    assert not {g.status for g in got} & {"engine_error", "request_failed"}
    assert [g.status for g in got] == [g.status for g in expected]
    assert [g.level for g in got] == [g.level for g in expected]
    assert [g.raw for g in got] == [g.raw for g in expected]
    if mode == "distribution":
        for a, b in zip(got, expected):
            assert max(abs(x - y) for x, y in zip(a.probs, b.probs)) < 1e-4


def judge_of(model_dir, mode, prompt="crux-paper-document-first", batch_size=4):
    return judge(model_dir, mode, batch_size, prompt=prompt)


class CountingForwards(torch.nn.Module):
    """The model, recording the tokens each forward computes (its input ids) and the cache it continued from."""

    def __init__(self, model):
        super().__init__()
        self.inner, self.computed, self.caches = model, [], []

    def forward(self, input_ids, past_key_values=None, **kwargs):
        self.computed.append(input_ids.numel())
        self.caches.append(type(past_key_values).__name__)
        return self.inner(input_ids=input_ids, past_key_values=past_key_values, **kwargs)

    def generate(self, input_ids, **kwargs):
        return self.inner.generate(input_ids=input_ids, **kwargs)

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()


@pytest.mark.parametrize("model", ["chat_llama", "chat_qwen3"])
@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_a_documents_prefix_once_gives_what_whole_prompts_give(request, model, mode):
    model_dir = request.getfixturevalue(model)
    pairs = grouped_pairs()
    grouped, backend = judge_of(model_dir, mode, batch_size=4)  # 5 and 7 sub-questions: groups cross a batch
    assert grouped.groups_documents
    whole, _ = judge_of(model_dir, mode, batch_size=1)  # one prompt a batch: nothing shared, nothing padded
    whole.groups_documents = False
    assert_same_grades(grouped.grade(pairs), whole.grade(pairs), mode)


def test_each_document_is_computed_once_and_its_suffixes_continue_from_their_own_prefix(chat_llama):
    """Several documents a forward (generation/backends/document_batches.py): each document's prefix runs once, in a
    prefix pass with other documents', and every suffix row continues from its own document's cache."""
    pairs = grouped_pairs()
    judge, backend = judge_of(chat_llama, "distribution", batch_size=4)
    backend.model = counting = CountingForwards(backend.model)
    judge.grade(pairs)
    sequences = [judge.encode_pair(p)[0] for p in pairs]
    plan = DocumentBatches(sequences, [p.document for p in pairs])
    batches = plan.cut(list(range(len(pairs))), 4, None)
    assert len(batches) == 4 and sorted(i for b in batches for i in b) == list(range(len(pairs)))
    # one suffix forward a batch (a row per document, its suffixes in slots after its prefix's cache, the held
    # prefixes laid out by each layer, not copied into a padded cache); a prefix pass before each batch that brings a
    # new document (the 1-pair document's prefix is its prompt less its last token)
    assert counting.caches.count("RowPrefixCache") == 4
    brings_new = [set(plan.groups(b)) - set(plan.groups(batches[k - 1]) if k else ()) for k, b in enumerate(batches)]
    assert counting.caches.count("NoneType") == sum(map(bool, brings_new)) <= 4
    assert sum(len(new) for new in brings_new) == 4, "each of the 4 documents' prefixes computed once"
    whole_tokens = sum(len(s) for s in sequences)
    assert sum(counting.computed) < whole_tokens / 2, "each document's tokens computed once, not per sub-question"


def test_the_shared_cache_holds_the_prefix_once_and_the_suffixes_after_it():
    prefix_keys = torch.randn(1, 2, 10, 4)
    from transformers.cache_utils import DynamicCache

    prefix = DynamicCache()
    prefix.update(prefix_keys, prefix_keys + 1, 0)
    shared = SharedPrefixCache(prefix, rows=3)
    keys, values = shared.update(torch.zeros(3, 2, 2, 4), torch.ones(3, 2, 2, 4), 0)
    assert keys.shape == (3, 2, 12, 4) and shared.get_seq_length() == 12
    assert torch.equal(keys[2, :, :10], prefix_keys[0]) and torch.equal(values[1, :, 10:], torch.ones(2, 2, 4))
    assert shared.layers[0].prefix_keys.data_ptr() == prefix.layers[0].keys.data_ptr(), "the prefix is not copied"


def test_group_batches_count_the_prefix_once_and_never_mix_groups():
    sequences = [[1] * 40 + [2, k] for k in range(5)] + [[3] * 40 + [4] * (k + 1) for k in range(3)] + [[9, 9]]
    keys = ["a"] * 5 + ["b"] * 3 + ["c"]
    plan = GroupBatches(sequences, keys)
    assert [plan.prefix_of(i) for i in (0, 5, 8)] == [41, 40, 0]
    batches = plan.cut(list(range(9)), max_pairs=8, max_tokens=41 + 3 * 1)
    assert batches == [[0, 1, 2], [3, 4], [5, 6], [7], [8]]
    assert plan.cost([0, 1, 2]) == 41 + 3 and plan.cost([5, 6, 7]) == 40 + 3 * 3
    assert shared_prefix_length([s for s, k in zip(sequences, keys) if k == "a"]) == 41


def test_a_document_first_judge_lays_out_pairs_by_document_and_its_shard_equals_whole_prompts(
    small_pipeline, chat_llama, tmp_path
):
    """The judge stage under the document-first prompt: the same pairs as the paper's layout, each document's
    sub-questions together, a question's pairs in one shard; chunks that cut a group in two and a resumed run change
    nothing: the shard equals one judged with whole prompts."""
    import pyarrow.parquet as pq

    from generation.stages.judge import JudgeStage, plan_pairs
    from generation.storage.shards import Shard

    paper = load_profile("paper-document-first")
    profile = small_pipeline["profile"].model_copy(
        update={
            "judge": paper.judge.model_copy(
                update={
                    "backend": "transformers",
                    "model": str(chat_llama),
                    "mode": "distribution",
                    "dtype": "float32",
                    "device": "cpu",
                    "context_words": 40,
                    "max_model_len": 1024,
                    "batch_size": 8,
                    "max_batch_tokens": None,
                    "chunk_size": 37,
                }
            )
        }
    )
    inputs = small_pipeline["questions"], small_pipeline["candidates"]
    faithful = plan_pairs(*inputs, Shard())
    pairs = plan_pairs(*inputs, Shard(), profile)
    assert sorted((p["subq_id"], p["docid"]) for p in pairs) == sorted((p["subq_id"], p["docid"]) for p in faithful)
    groups = [(p["qid"], p["docid"]) for p in pairs]
    runs = [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g]
    assert len(runs) == len(set(groups)), "each (question, document)'s pairs are contiguous"

    def shard_rows(out, judge=None):
        JudgeStage(profile, out, *inputs, small_pipeline["index"], judge=judge).run()
        table = pq.read_table(next(out.glob("judgments-*.parquet")))
        return {(r["subq_id"], r["docid"]): r for r in table.to_pylist()}

    grouped = shard_rows(tmp_path / "grouped")
    whole, _ = judge_of(chat_llama, "distribution", batch_size=1)
    whole.config = profile.judge.model_copy(update={"batch_size": 1})
    whole.groups_documents = False
    expected = shard_rows(tmp_path / "whole", whole)
    assert grouped.keys() == expected.keys() and len(grouped) == len(pairs) > 100
    for key, row in grouped.items():
        assert row["level"] == expected[key]["level"]
        assert max(abs(a - b) for a, b in zip(row["probs"], expected[key]["probs"])) < 1e-4
