"""The document-first prompt on vLLM's real engine (vllm-cpu, `make test-vllm`): each document's sub-questions are
sent together, every one after a group's first finds the document's full KV blocks in the prefix cache
(`RequestOutput.num_cached_tokens`), and the answers equal those of an engine with prefix caching off."""

import os

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
vllm = pytest.importorskip("vllm", reason="vLLM tests run under `make test-vllm` (.venv-vllm)")

from builder.standins.models import save_vllm_chat_model  # noqa: E402
from generation.backends.prefix_groups import shared_prefix_length  # noqa: E402
from generation.backends.vllm_adapter import VllmJudgeBackend  # noqa: E402
from generation.judging.judges import LLMJudge  # noqa: E402
from tests.generation.backends.test_prefix_groups import grouped_pairs  # noqa: E402
from tests.generation.backends.test_vllm_backends import ENGINE_ARGS, MAX_MODEL_LEN, judge_config  # noqa: E402

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def chat_llama_32(tmp_path_factory):
    """A tiny Llama with the Llama-3.3 chat template and a head size vLLM's CPU attention takes (32)."""
    return save_vllm_chat_model(tmp_path_factory.mktemp("vllm-prefix-llama"), "llama3", 5, MAX_MODEL_LEN)


def config(model, mode, caching):
    """test_vllm_backends' judge under the document-first prompt, prefix caching on or off."""
    return judge_config(model, mode).model_copy(
        update={"prompt": "crux-paper-document-first", "enable_prefix_caching": caching, "engine_args": ENGINE_ARGS}
    )


@pytest.fixture(scope="module")
def engines(chat_llama_32):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(chat_llama_32))
    return {
        caching: VllmJudgeBackend(str(chat_llama_32), config(chat_llama_32, "generate", caching))
        for caching in (True, False)
    }, tokenizer


@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_each_sub_question_after_the_first_finds_its_documents_blocks_cached(engines, chat_llama_32, mode):
    backends, tokenizer = engines
    pairs = grouped_pairs()
    judges = {
        caching: LLMJudge(config(chat_llama_32, mode, caching), backend, tokenizer, "tiny")
        for caching, backend in backends.items()
    }
    assert judges[True].groups_documents
    got = judges[True].grade(pairs)
    cached = backends[True].last_cached
    block = backends[True].llm.llm_engine.vllm_config.cache_config.block_size
    sequences = [judges[True].encode_pair(p)[0] for p in pairs]
    for document in dict.fromkeys(p.document for p in pairs):
        members = [i for i, p in enumerate(pairs) if p.document == document]
        if len(members) == 1:
            continue
        full_blocks = shared_prefix_length([sequences[i] for i in members]) // block * block
        assert full_blocks >= 2 * block, "the document spans several full blocks"
        assert all(cached[i] >= full_blocks for i in members[1:]), (full_blocks, [cached[i] for i in members])
    expected = judges[False].grade(pairs)
    assert backends[False].last_cached == [0] * len(pairs)
    assert [g.level for g in got] == [g.level for g in expected]
    assert [g.raw for g in got] == [g.raw for g in expected]
    if mode == "distribution":
        for a, b in zip(got, expected):
            assert max(abs(x - y) for x, y in zip(a.probs, b.probs)) < 1e-4
