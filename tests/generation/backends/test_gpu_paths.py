"""The GPU paths read against the APIs they call, run on a CPU: a stand-in for the GPU's memory
readings, wrappers around the real tiny model that raise torch's own out-of-memory error or the RuntimeError a
cuBLAS allocation failure gives above a token count, placement over stated free memory, and the plan's decode batch
against the budget the backend would choose."""

import gc
import weakref

import pytest
import torch

from generation.backends.batching import (
    GpuMemory,
    OutOfMemoryNotice,
    TokenBudget,
    bytes_per_token,
    chosen_auto_budget,
    is_out_of_memory,
)
from generation.judging.judges import Pair, isolate_failures
from generation.model_shapes import LLAMA_33_70B, PUBLISHED
from tests.generation.backends.test_batching import TokenLimited, judge, judge_pairs
from tests.helpers import transformers_judge

GIB = 2**30
H100 = 80 * GIB
# cuBLAS's allocation failure as torch raises it (aten/src/ATen/cuda/Exceptions.h, TORCH_CUDABLAS_CHECK)
CUBLAS_ALLOC_FAILED = "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"


# --- 1. the automatic budget counts what torch's cache holds unused as free -------------------------------------


def test_auto_budget_counts_the_allocators_unused_cache_as_free():
    """The 70B shape in fp8 on one H100 at gpu_memory_utilization 0.95: 67.7 GiB of weights allocated, 74.2 GiB
    reserved by the caching allocator after torchao quantized each weight as it loaded, 0.5 GiB of CUDA context, so
    the driver reports 5.3 GiB free. Counting only that leaves room for fewer tokens than one ~3,140-token prompt
    (a batch of one); counting the 6.5 GiB cached unused gives the batch of four the 2026-11-23 H100 run used (CHANGELOG.md)."""
    per_token = bytes_per_token(PUBLISHED[LLAMA_33_70B], 2, keeps_cache=True)
    allocated, reserved = int(67.7 * GIB), int(74.2 * GIB)
    memory = GpuMemory(free=H100 - reserved - GIB // 2, total=H100, reserved=reserved, allocated=allocated)
    driver_only, _ = chosen_auto_budget(GpuMemory(memory.free, H100, 0, 0), 0.95, per_token, "judge.max_batch_tokens")
    tokens, line = chosen_auto_budget(memory, 0.95, per_token, "judge.max_batch_tokens")
    assert driver_only // 3140 <= 1, "the reading of old: one prompt a batch"
    assert tokens // 3140 == 4
    assert tokens == int((memory.free + reserved - allocated - 0.05 * H100) // per_token)
    assert line.startswith(
        f"judge.max_batch_tokens: auto = {tokens:,} tokens a batch: 5.3 GiB free on the GPU + "
        "6.5 GiB cached by torch unused - 0.05 x 80.0 GiB kept back (gpu_memory_utilization: 0.95)"
    )


# --- 2. out of memory: finished batches kept, frames dropped, cuBLAS failures are out of memory too -------------


class CublasLimited(TokenLimited):
    """The model, raising what torch raises when cuBLAS cannot allocate its workspace above `limit` tokens."""

    def _check(self, input_ids, past_key_values=None):
        try:
            super()._check(input_ids, past_key_values)
        except torch.OutOfMemoryError:
            raise RuntimeError(CUBLAS_ALLOC_FAILED) from None


def limited_judge(model_dir, wrapper, limit, mode="distribution", batch_size=64):
    graded, backend = judge(model_dir, mode, batch_size=batch_size)
    backend.model = wrapper(backend.model, limit)
    return graded, backend


def test_cublas_allocation_failures_are_out_of_memory():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError(CUBLAS_ALLOC_FAILED))
    assert is_out_of_memory(RuntimeError("CUDA error: out of memory"))
    assert not is_out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasSgemm`"))
    assert not is_out_of_memory(ValueError(CUBLAS_ALLOC_FAILED))


@pytest.mark.parametrize("wrapper", [TokenLimited, CublasLimited])
def test_a_pair_out_of_memory_alone_keeps_the_finished_batches(chat_llama, wrapper):
    """Six pairs that fit and one that does not fit alone: the notice, the six graded once each (no second pass
    over the call by bisection), the seventh an engine error naming the failure. A cuBLAS allocation failure gets
    the same notice and the same handling as torch.OutOfMemoryError."""
    pairs = judge_pairs(1, 6) + [Pair("why do bees swarm?", "swarm " * 600)]
    expected, _ = judge(chat_llama, "distribution", batch_size=8)
    expected = expected.grade(pairs[:6])
    limited, backend = limited_judge(chat_llama, wrapper, 500)
    with pytest.warns(OutOfMemoryNotice) as notices:
        grades = limited.grade(pairs)
    assert [g.status for g in grades] == ["ok"] * 6 + ["engine_error"]
    assert [g.level for g in grades[:6]] == [g.level for g in expected]
    name = "OutOfMemoryError" if wrapper is TokenLimited else "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED"
    assert name in grades[-1].raw
    assert any("out of memory on 1 sequence(s) alone" in str(n.message) for n in notices)
    rows = sum(backend.model.ran)
    lengths = sorted(len(limited.encode_pair(p)[0]) for p in pairs[:6])
    assert rows <= 6 * lengths[-1], "each pair that fits ran once"


def test_the_cache_is_emptied_once_the_failed_forward_is_unreferenced():
    """`on_oom` (torch.cuda.empty_cache on a GPU) runs after the except block, when nothing holds the failed
    forward's tensors: inside it, the error's traceback kept the forward's frame, and its tensors, alive."""
    held = []

    def step(chosen):
        activations = torch.zeros(4)  # stands in for a forward's GPU tensors
        held.append(weakref.ref(activations))
        if len(chosen) > 1:
            raise torch.OutOfMemoryError("CUDA out of memory (test)")

    alive_at_empty = []
    budget = TokenBudget(transformers_judge("in-memory", batch_size=4), max_tokens=None)
    with pytest.warns(OutOfMemoryNotice):
        assert budget.run([[1] * 5] * 4, step, lambda: alive_at_empty.append(held[-1]() is not None)) == {}
    assert alive_at_empty and not any(alive_at_empty)


def test_a_stored_failure_does_not_keep_its_forwards_tensors():
    """A pair that fails for good is stored as its exception until the chunk is graded; its traceback's frames
    (and the tensors in them) are dropped before the other halves are tried."""
    held = []

    def call(items):
        activations = torch.zeros(4)
        held.append(weakref.ref(activations))
        if "bad" in items:
            raise RuntimeError("engine failed on this prompt")
        return [f"ok {i}" for i in items]

    results = isolate_failures(call, ["a", "bad", "c", "d"])
    assert results[0] == "ok a" and isinstance(results[1], RuntimeError)
    assert results[1].__traceback__ is None
    gc.disable()  # what frees them is the reference count, not a later collection
    try:
        assert all(ref() is None for ref in held)
    finally:
        gc.enable()


# --- 3. placement reads free memory; the fp8 refusal names the share that fits; the packed index's device -------


def test_placement_on_a_shared_gpu_counts_what_is_free_not_the_total():
    """Llama-3.1-8B in bf16 (16.1 GB) on an 80 GB H100 that other processes fill to 10 GiB free: placing it by the
    total (as before) would load it and fail; by the free memory it is refused before loading, saying so."""
    from generation.backends.placement import ModelTooLarge, plan_placement, reserve_for
    from generation.model_shapes import LLAMA_31_8B, shape_from_config

    config = PUBLISHED[LLAMA_31_8B].transformers_config()
    reserve = reserve_for(shape_from_config(config), 8192, 2)
    assert plan_placement(config, torch.bfloat16, None, [H100], 0.9, reserve, LLAMA_31_8B).device_map == {"": 0}
    with pytest.raises(ModelTooLarge) as refused:
        plan_placement(config, torch.bfloat16, None, [H100], 0.9, reserve, LLAMA_31_8B, gpu_free=[10 * GIB])
    assert "(10.7 GB of GPU 0 free now: other processes hold the rest)" in str(refused.value)
    two = plan_placement(
        config, torch.bfloat16, None, [H100, H100], 0.9, reserve, LLAMA_31_8B, gpu_free=[10 * GIB, H100]
    )
    assert set(two.device_map.values()) == {0, 1}, "spread by what each GPU has free"


def test_the_fp8_refusal_names_the_memory_share_that_fits():
    """The 70B shape in fp8 (72.7 GB) with room for a batch of four ~3,140-token prompts (7.4 GB) needs 80.0 GB of
    an H100's 85.9: refused at 0.9, the refusal says 0.94 would fit; at 0.94 it is placed. On a GPU with less
    free than that, no share is suggested."""
    from generation.backends.placement import ModelTooLarge, plan_placement, reserve_for

    config = PUBLISHED[LLAMA_33_70B].transformers_config()
    reserve = reserve_for(PUBLISHED[LLAMA_33_70B], 4 * 3140, 2)
    with pytest.raises(ModelTooLarge) as refused:
        plan_placement(config, torch.bfloat16, "fp8", [H100], 0.9, reserve, LLAMA_33_70B)
    assert "Use `gpu_memory_utilization: 0.94` (72.7 GB of weights in fp8" in str(refused.value)
    assert plan_placement(config, torch.bfloat16, "fp8", [H100], 0.94, reserve, LLAMA_33_70B).device_map == {"": 0}
    with pytest.raises(ModelTooLarge) as shared:
        plan_placement(config, torch.bfloat16, "fp8", [H100], 0.9, reserve, LLAMA_33_70B, gpu_free=[70 * GIB])
    assert "gpu_memory_utilization: 0.94" not in str(shared.value)


def test_the_packed_index_is_made_where_the_hidden_states_are(tiny_qwen3):
    """transformers' slice_logits_to_keep indexes the final hidden states (`hidden_states[:, logits_to_keep, :]`):
    under a device_map those are on the device of the decoder's final norm, not of the input embeddings. Here the
    norm is moved to the meta device to stand for another GPU."""
    from transformers import AutoModelForCausalLM

    from generation.backends.hf import hidden_states_device

    model = AutoModelForCausalLM.from_pretrained(str(tiny_qwen3))
    assert hidden_states_device(model) == torch.device("cpu")
    model.model.norm.to("meta")
    assert model.get_input_embeddings().weight.device == torch.device("cpu")
    assert hidden_states_device(model) == torch.device("meta")
    from transformers import AutoTokenizer

    from generation.backends.hf import TransformersBackend

    section = transformers_judge(tiny_qwen3, packed=True)
    backend = TransformersBackend.wrap(model, AutoTokenizer.from_pretrained(str(tiny_qwen3)), section)
    assert (backend.input_device, backend.hidden_device) == (torch.device("cpu"), torch.device("meta")), (
        "the packed step makes its index on the hidden states' device"
    )


# --- 4. the plan prices the batches and GPU spans the backend would use, and nothing it would refuse ------------


def transformers_profile(**judge):
    from generation.profiles.profile import load_profile

    profile = load_profile("paper")
    return profile.model_copy(update={"judge": profile.judge.model_copy(update={"backend": "transformers", **judge})})


def test_plan_decode_batch_is_the_budget_the_backend_would_choose():
    """The paper's judge on transformers, `max_batch_tokens: auto`, at gpu_memory_utilization 0.95 on the reference
    H100: fp8 goes on one GPU and its decode batch is what the backend's auto budget holds of ~3,140-token prompts
    once the 72.7 GB of weights are loaded (4, the 2026-11-23 H100 run's batch; not the profile's 256); bf16 is a device_map over
    the node's four GPUs, so its GPU-hours are four times one copy's."""
    from generation.backends.batching import auto_budget_for
    from generation.judging.calibration import device_spec
    from generation.planning.costing import costing_for, judge_rows
    from generation.planning.execution import CUDA_CONTEXT_BYTES
    from generation.planning.plan import Plan

    profile = transformers_profile(gpu_memory_utilization=0.95)
    costing, _ = costing_for(profile)
    shape, device = PUBLISHED[LLAMA_33_70B], device_spec(costing.calibration.device)
    weights = shape.weight_bytes("fp8")
    after_loading = GpuMemory(device.memory - weights - CUDA_CONTEXT_BYTES, device.memory, weights, weights)
    backend_tokens, _ = auto_budget_for(shape, 2, False, after_loading, 0.95, "judge.max_batch_tokens")
    fp8 = costing.execution("fp8")
    assert fp8.gpus == 1 and fp8.budget_tokens == backend_tokens
    assert fp8.decode_batch(3140) == backend_tokens // 3140 == 4
    bf16 = costing.execution("bf16")
    assert bf16.gpus == 4 and "one working at a time" in bf16.how

    plan = Plan(
        pairs=1000,
        subquestions=50,
        sampled=10,
        mean_prompt_tokens=3140,
        mean_overhead_tokens=200,
        mean_shared_prefix_tokens=150,
        new_tokens=3,
        tokenizer="t",
        stand_in=False,
        context_words=2048,
        tokens_per_word_here=1.4,
        long_documents=30,
        mean_context_tokens=2940,
    )
    rows, notes = judge_rows(plan, costing)
    row = {(r.label, r.precision): r for r in rows}
    assert row[("these pairs", "fp8")].decode_batch == 4 and row[("these pairs", "fp8")].gpus == 1
    assert row[("these pairs", "bf16")].gpus == 4
    one_copy = costing.__class__(**{**costing.__dict__, "judge_config": None, "decode_batch": 4})
    single, _ = judge_rows(plan, one_copy)
    single = {(r.label, r.precision): r for r in single}
    spread = row[("these pairs", "bf16")]
    assert spread.prefill_hours == pytest.approx(4 * single[("these pairs", "bf16")].prefill_hours)
    assert any("fp8: one GPU; " in n and "at most 256 pairs" in n for n in notes)


def test_plan_shows_no_figure_for_a_configuration_the_backend_refuses():
    """bf16 70B at gpu_memory_utilization 0.3: four H100s hold 4 x 21 GB of weights, not 141 GB; the backend would
    refuse it before loading, so the plan has no bf16 row and says why; fp8 (spread over the four) keeps its rows."""
    from generation.planning.costing import costing_for, judge_rows
    from generation.planning.plan import Plan

    costing, _ = costing_for(transformers_profile(gpu_memory_utilization=0.3))
    plan = Plan(1000, 50, 10, 3140, 200, 150, 3, "t", False, 2048, 1.4, 30, 2940)
    rows, notes = judge_rows(plan, costing)
    assert {r.precision for r in rows} == {"fp8"}
    assert any(
        n.startswith(
            "Judge as the transformers backend would run it: bf16: the transformers backend refuses it on 4 H100 SXM"
        )
        and "rows left out" in n
        for n in notes
    )


# --- 5. the GPU benchmark measures the paths as the kit runs them ------------------------------------------------


def test_bench_documents_take_the_corpus_lengths_cut_at_the_limit():
    from builder.standins.gpu_bench import document_words
    from generation.sample import CLUEWEB22

    words = document_words(CLUEWEB22, 200, 100, seed=0)
    assert max(words) == 100, "cut at the profile's limit"
    assert len(set(words)) > 20 and min(words) < 60, "lengths vary as the corpus's do"


def test_bench_packed_rows_switch_attention_and_padded_rows_keep_the_default():
    from builder.standins.gpu_bench import with_attention
    from builder.standins.models import build_model
    from generation.model_shapes import TINY

    model = build_model(TINY["tiny-qwen3"], "cpu", torch.float32)
    default = model.config._attn_implementation
    assert default == "sdpa", "the kit loads a model without `attention:`: transformers' default"
    seen = with_attention(model, "eager", lambda: model.config._attn_implementation)()
    assert seen == "eager" and model.config._attn_implementation == default


def test_bench_calibration_keeps_each_precision_to_its_own_rows():
    """A bf16 rerank row faster than the fp8 one is not filed as fp8; the packed row (opt-in) is not the figure."""
    from builder.standins.gpu_bench import calibration as calibration_of

    row = {"shape": "Qwen3-Reranker-0.6B", "mode": "rerank", "batch": 16, "pairs_per_s": 1, "tflops": 100}
    rows = [
        {**row, "run": "kit", "precision": "bf16", "share_of_peak": 0.2},
        {**row, "run": "kit packed", "precision": "bf16", "share_of_peak": 0.3, "tflops": 150},
        {**row, "run": "kit", "precision": "fp8", "share_of_peak": 0.05, "tflops": 50},
    ]
    calibration = calibration_of(rows, "cpu", "test", None)
    assert calibration.utilisation["rerank"] == {"bf16": 0.2, "fp8": 0.05}


# --- 6. `compile: true`: the same answers through torch.compile ---------------------------------------------------


@pytest.mark.slow
def test_compiled_backend_gives_the_uncompiled_log_probabilities(chat_llama):
    """`compile: true` compiles the forward in place with dynamic shapes: batches of other lengths reuse it, and the
    log-probabilities are today's (inductor's CPU kernels round differently: to 1e-4)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from generation.backends.hf import TransformersBackend

    tokenizer = AutoTokenizer.from_pretrained(str(chat_llama))
    sequences = [[5 + (i * 7 + j) % 90 for j in range(n)] for i, n in enumerate((9, 14, 23, 11, 30))]

    def logprobs(compile):
        model = AutoModelForCausalLM.from_pretrained(str(chat_llama), dtype=torch.float32)
        backend = TransformersBackend.wrap(
            model, tokenizer, transformers_judge(chat_llama, batch_size=2, compile=compile)
        )
        assert (getattr(model, "_compiled_call_impl", None) is not None) == compile
        return backend.next_token_logprobs(sequences, [3, 4, 5])

    assert torch.allclose(logprobs(True), logprobs(False), atol=1e-4)


def test_compile_is_a_profile_setting_outside_the_config_hash(tmp_path):
    import json

    import yaml

    from generation.profiles.profile import load_profile

    data = json.loads(load_profile("paper").model_dump_json())
    data["judge"]["compile"] = True
    path = tmp_path / "compiled.yaml"
    path.write_text(yaml.safe_dump(data))
    profile = load_profile(path)
    assert profile.judge.compile and not load_profile("paper").judge.compile
    assert profile.config_hash() == load_profile("paper").config_hash(), "compiling changes how fast, not what"


# --- 7. a budget lowered by one failure climbs back; the shared prefix's pass is inside the handling ----------------


def test_a_budget_lowered_by_one_failure_climbs_back_towards_what_fits():
    """Small prompts first (batches of 8 x 40 = 320 tokens run), then a batch of 8 x 150 = 1,200 tokens fails
    against a limit of 1,100. The budget of old fell to the largest batch that had run (320: two prompts a batch
    from then on, for the rest of the call); now it halves the failed batch (600) and climbs halfway back towards
    1,200 after each batch that runs, settling on seven prompts (1,050 tokens) a batch."""
    sequences = [[1] * 40] * 8 + [[1] * 150] * 56
    ran, failed = [], []

    def step(chosen):
        cost = len(chosen) * max(len(sequences[i]) for i in chosen)
        if cost > 1100:
            failed.append(cost)
            raise torch.OutOfMemoryError("CUDA out of memory (test)")
        ran.append(len(chosen))

    budget = TokenBudget(transformers_judge("in-memory", batch_size=8), max_tokens=None)
    with pytest.warns(OutOfMemoryNotice) as notices:
        assert budget.run(sequences, step) == {}
    assert ran == [8, 4, 6, *[7] * 6, 4] and failed == [1200], "one failure, then batches of seven"
    assert budget.max_tokens < budget.smallest_failed == 1200
    message = str(notices[0].message)
    assert "batches of up to 1,050 tokens fitted after it" in message and message.endswith(": 1050 to start there")


class PrefixPassFailsOnce(torch.nn.Module):
    """The model, running out of memory on the first prefix pass it is asked for (a forward that starts a cache):
    memory another batch left fragmented, say."""

    def __init__(self, model):
        super().__init__()
        self.inner, self.failures = model, 0

    def forward(self, input_ids, past_key_values=None, use_cache=False, **kwargs):
        if use_cache and past_key_values is None and self.failures == 0:
            self.failures += 1
            raise torch.OutOfMemoryError("CUDA out of memory (test: the prefix pass)")
        return self.inner(input_ids=input_ids, past_key_values=past_key_values, use_cache=use_cache, **kwargs)

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()


@pytest.mark.parametrize("prompt", ["crux-paper", "crux-paper-document-first"])
def test_an_out_of_memory_prefix_pass_is_a_smaller_batch_not_an_error(chat_llama, prompt):
    """The prefix pass (the instruction every prompt shares, or a document's prefix) runs inside the batch it serves:
    its out-of-memory error gives the notice and a smaller batch, and the call ends with every pair graded and no
    bisection (the backend is called once)."""
    from tests.generation.backends.test_prefix_groups import grouped_pairs, judge_of

    pairs = grouped_pairs()
    expected, _ = judge_of(chat_llama, "distribution", prompt=prompt, batch_size=8)
    limited, backend = judge_of(chat_llama, "distribution", prompt=prompt, batch_size=8)
    backend.model = PrefixPassFailsOnce(backend.model)
    calls = []
    inner = backend.next_token_logprobs
    backend.next_token_logprobs = lambda *args, **kwargs: calls.append(1) or inner(*args, **kwargs)
    with pytest.warns(OutOfMemoryNotice):
        grades = limited.grade(pairs)
    assert backend.model.failures == 1 and len(calls) == 1
    assert [g.status for g in grades] == ["ok"] * len(pairs)
    assert [g.level for g in grades] == [g.level for g in expected.grade(pairs)]
