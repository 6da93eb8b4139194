"""`compile: suffix` (generation/backends/compiled_suffixes.py): a document-first judge's suffix forwards through
torch.compile, its prefix passes eager. The grades are the eager path's (levels and answers equal, digit
probabilities within 1e-4) in both modes; after the first batches, batches of other shapes reuse the compiled graphs
(torch._dynamo's graph count does not grow, and no frame falls back to eager at the recompile limit); the slot layout
padded off size 1 gives the unpadded log-probabilities within its cost. A profile or a model that has no suffix
forwards to compile, and a machine without the compiler torch.compile needs, are refused in one line naming the
setting."""

from typing import get_args

import pytest
import torch
from torch._dynamo.utils import counters

from generation.backends import NotRunnableHere, refuse_unrunnable
from generation.backends.batching import bytes_per_token
from generation.backends.compiled_suffixes import LEAST_SIZE
from generation.backends.document_batches import DocumentBatches, EagerLayoutCache
from generation.backends.hf import TransformersBackend
from generation.backends.slot_steps import slot_logprobs
from generation.judging.judges import LLMJudge
from generation.judging.prompts import get_prompt
from generation.profiles.profile import ProfileError, load_profile, with_overrides
from generation.profiles.sections import DOCUMENT_FIRST_PROMPTS, JudgeConfig
from tests.generation.backends.test_grouped_attention import LiveBytes
from tests.generation.backends.test_prefix_groups import assert_same_grades, grouped_pairs
from tests.generation.backends.test_slot_layout import with_generation_config
from tests.helpers import transformers_judge

DOCUMENT_FIRST = {"prompt": "crux-paper-document-first", "max_model_len": 1024, "batch_size": 8}
# (sub-questions of each document, seed): batches of several documents, one-pair documents (one-token suffixes:
# slots and slot positions of size 1 before padding), a lone document (one row)
WARM_UP = [((3, 4, 2, 5), 1), ((1, 1, 1, 1), 3)]
OTHER_SHAPES = [((2, 6, 3, 3), 2), ((9,), 4), ((1, 1), 5), ((5, 2, 7), 6)]


def judge_of(model_dir, mode, compile):
    config = transformers_judge(model_dir, mode=mode, compile=compile, **DOCUMENT_FIRST)
    backend = TransformersBackend(model_dir, config)
    return LLMJudge(config, backend, backend.tokenizer, "tiny")


def graphs() -> int:
    return counters["stats"]["unique_graphs"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_compiled_suffix_forwards_give_the_eager_grades_and_reuse_their_graphs(chat_llama, mode):
    torch._dynamo.reset()  # the recompile limit counts per code object: other tests' compiles of the same model class
    eager, compiled = judge_of(chat_llama, mode, False), judge_of(chat_llama, mode, "suffix")
    backend = compiled.backend
    assert getattr(backend.model, "_compiled_call_impl", None) is None, "the model itself (its prefix passes) eager"
    caches = []
    call = backend.compiled_suffixes.compiled
    backend.compiled_suffixes.compiled = lambda **inputs: (
        caches.append(type(inputs["past_key_values"])) or call(**inputs)
    )
    with torch.compiler.config.patch(fail_on_recompile_limit_hit=True):
        for subquestions, seed in WARM_UP:
            pairs = grouped_pairs(documents=len(subquestions), subquestions=subquestions, seed=seed)
            assert_same_grades(compiled.grade(pairs), eager.grade(pairs), mode)
        warm = graphs()
        for subquestions, seed in OTHER_SHAPES:
            pairs = grouped_pairs(documents=len(subquestions), subquestions=subquestions, seed=seed)
            assert_same_grades(compiled.grade(pairs), eager.grade(pairs), mode)
    assert warm > 0 and graphs() == warm, "batches of other shapes reuse the compiled graphs"
    assert caches and set(caches) == {EagerLayoutCache}, "only suffix forwards, each continuing from held prefixes"


def test_a_slot_layout_padded_off_size_one_gives_the_unpadded_log_probabilities_within_its_cost(chat_llama):
    """One document of one sub-question (a one-token suffix), then three: the slot layout at least LEAST_SIZE rows,
    slots and slot positions wide gives each pair what the unpadded layout gives, and allocates no more than the
    padded batch's cost."""
    config = transformers_judge(chat_llama, mode="distribution", **DOCUMENT_FIRST)
    backend = TransformersBackend(chat_llama, config)
    judge = LLMJudge(config, backend, backend.tokenizer, "tiny")
    wanted = torch.tensor(judge.digit_ids)
    per_token = bytes_per_token(backend.shape, 4, keeps_cache=True)
    for subquestions in [(1,), (3,)]:
        pairs = grouped_pairs(documents=1, subquestions=subquestions, seed=7)
        sequences = [judge.encode_pair(p)[0] for p in pairs]
        keys = [p.document for p in pairs]
        got = {}
        for least, compiled in ((1, False), (LEAST_SIZE, True)):
            plan = DocumentBatches(sequences, keys, backend.token_costs, compiled)
            out = torch.empty(len(pairs), len(wanted), dtype=torch.float64)
            batch = list(range(len(pairs)))
            with torch.inference_mode(), LiveBytes() as live:
                slot_logprobs(backend, batch, plan, wanted, out)
            got[least] = out
            assert live.peak <= plan.cost(batch) * per_token
        layout = DocumentBatches(sequences, keys, backend.token_costs, compiled=True).slot_inputs(
            batch, backend._prefill_many, backend.pad_id, torch.float32
        )
        assert min(layout.ids.shape[0], layout.slots, layout.ids.shape[1] // layout.slots) >= LEAST_SIZE
        assert torch.allclose(got[1], got[LEAST_SIZE], atol=1e-6)


@pytest.mark.parametrize(
    ("judge", "problem"),
    [
        ({"prompt": "crux-paper"}, "prompt crux-paper puts no document first"),
        ({"backend": "vllm"}, "this judge's backend is vllm"),
        ({"packed": True}, "packed: true runs whole prompts, no suffix forwards"),
        ({"attention": "flash_attention_2"}, "attention flash_attention_2 takes no 4D mask"),
    ],
)
def test_a_judge_without_suffix_forwards_is_refused_compile_suffix(judge, problem):
    settings = {**DOCUMENT_FIRST, "backend": "transformers", "compile": "suffix", **judge}
    with pytest.raises(ProfileError) as refused:
        with_overrides(load_profile("paper"), [f"judge.{key}={value}" for key, value in settings.items()])
    message = str(refused.value)
    assert "key judge" in message and "compile: suffix compiles a document-first judge's suffix forwards" in message
    assert problem in message and "Set compile: true (every forward) or false" in message


def test_the_profiles_document_first_prompts_are_the_prompts_that_put_the_document_first():
    offered = get_args(JudgeConfig.model_fields["prompt"].annotation)
    assert set(DOCUMENT_FIRST_PROMPTS) == {p for p in offered if get_prompt(p).document_first}
    assert set(DOCUMENT_FIRST_PROMPTS) <= set(offered)


def test_the_reranker_is_refused_compile_suffix_and_both_sections_keep_true_and_false():
    with pytest.raises(ProfileError, match="key rerank: .*compile: suffix .* the reranker runs none"):
        with_overrides(load_profile("paper"), ["rerank.compile=suffix"])
    for value in ("true", "false"):
        profile = with_overrides(load_profile("paper"), [f"rerank.compile={value}", f"judge.compile={value}"])
        assert profile.rerank.compile is profile.judge.compile is (value == "true")
    with pytest.raises(ProfileError, match="key judge.compile"):
        with_overrides(load_profile("paper"), ["judge.compile=prefix"])


def test_a_model_whose_generate_mode_runs_no_slot_steps_is_refused_compile_suffix(chat_llama, tmp_path):
    """A repetition penalty sends generate mode through generate() (test_slot_layout.py): nothing to compile, refused
    when the backend loads, before anything is compiled."""
    model_dir = with_generation_config(chat_llama, tmp_path, repetition_penalty=1.3)
    config = transformers_judge(model_dir, mode="generate", compile="suffix", **DOCUMENT_FIRST)
    with pytest.raises(ValueError, match=r"^judge.compile: suffix compiles .* its generation config asks for logits"):
        TransformersBackend(model_dir, config)
    assert TransformersBackend(model_dir, config.model_copy(update={"mode": "distribution"})).compiled_suffixes


def test_compile_without_a_cpp_compiler_is_refused_before_anything_runs(monkeypatch):
    """torch.compile's inductor builds C++ kernels on a CPU with the compiler CXX names (else g++)."""
    config = transformers_judge("in-memory", compile="suffix", **DOCUMENT_FIRST)
    refuse_unrunnable(config)  # this machine has g++
    monkeypatch.setenv("CXX", "no-such-c++")
    for value, said in (("suffix", "suffix"), (True, "true")):
        with pytest.raises(NotRunnableHere) as refused:
            refuse_unrunnable(config.model_copy(update={"compile": value}))
        assert str(refused.value) == (
            f"judge.compile: {said} needs a C++ compiler (no-such-c++ not found; set CXX) on cpu (torch.compile's "
            "inductor backend builds its kernels with it); or set judge.compile: false"
        )
    refuse_unrunnable(config.model_copy(update={"compile": False}))
