"""The order the document-first prompt reaches vLLM in: each document's requests together, so that automatic prefix
caching serves the document to every sub-question after its first (docs/judging.md, "The document-first prompt on
vLLM"). The engine itself runs it under `make test-vllm` (tests/generation/backends/test_vllm_prefix_groups.py); here, on a CPU, the two
steps before it: the judge stage's layout and the backend's request order, on the pipeline's real pairs."""

import random

from generation.backends.request_order import grouped_order, leaders
from generation.corpus.docstore import DocStore
from generation.profiles.profile import load_profile
from generation.stages.judge import plan_pairs
from generation.storage.shards import Shard


def runs(keys: list) -> int:
    """How many stretches of equal consecutive keys."""
    return sum(1 for i, key in enumerate(keys) if i == 0 or keys[i - 1] != key)


def test_the_backend_sends_each_documents_requests_together_in_first_appearance_order():
    keys = ["b", "a", "b", "c", "a", "b"]
    order = grouped_order(keys)
    assert [keys[i] for i in order] == ["b", "b", "b", "a", "a", "c"]
    assert order == [0, 2, 5, 1, 4, 3], "members keep their given order"
    assert leaders([keys[i] for i in order]) == [True, False, False, True, False, True]


def test_the_stages_pairs_reach_the_engine_a_document_at_a_time(small_pipeline):
    """paper-document-first's pairs as the judge stage lays them out, keyed as the judge keys them for the backend
    (each pair's document): already one stretch per document, so the vLLM backend sends them as laid out; shuffled,
    the backend's order still puts each document's requests together."""
    judge = load_profile("paper-document-first").judge  # vllm, the document-first prompt
    profile = small_pipeline["profile"].model_copy(update={"judge": judge})
    pairs = plan_pairs(small_pipeline["questions"], small_pipeline["candidates"], Shard(), profile)
    docs = DocStore(small_pipeline["index"])
    keys = [docs.text(p["docid"]) for p in pairs]
    assert len(set(keys)) > 20 and runs(keys) == len(set(keys))
    assert grouped_order(keys) == list(range(len(keys)))
    shuffled = keys[:]
    random.Random(0).shuffle(shuffled)
    sent = [shuffled[i] for i in grouped_order(shuffled)]
    assert runs(sent) == len(set(keys)) and sorted(sent) == sorted(keys)
    assert sum(leaders(sent)) == len(set(keys)), "one request a document computes it; the others find it cached"
