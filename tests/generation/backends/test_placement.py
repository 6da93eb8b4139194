"""Models larger than one GPU, fp8 and packed sequences, on a CPU: the size
comes from the config on the meta device (no weights), the spread is transformers' own device-map inference
(with accelerate) over stated GPU sizes, and the refusals come before any weight is read."""

import shutil

import pytest
import torch

from generation.backends.placement import ModelTooLarge, meta_model, plan_placement, reserve_for, weight_bytes
from generation.model_shapes import LLAMA_31_8B, LLAMA_33_70B, PUBLISHED, shape_from_config
from generation.profiles.profile import ProfileError, load_profile
from tests.helpers import transformers_judge

GIB = 2**30
H100 = 80 * GIB


@pytest.fixture(scope="module")
def llama70b():
    return PUBLISHED[LLAMA_33_70B].transformers_config()


def reserve(config, tokens=8192):
    return reserve_for(shape_from_config(config), tokens, 2)


def test_the_meta_model_weighs_what_the_published_shape_says(llama70b):
    shape = PUBLISHED[LLAMA_33_70B]
    assert weight_bytes(meta_model(llama70b, torch.bfloat16, None)) == shape.weight_bytes("bfloat16") == 141_107_412_992
    fp8 = weight_bytes(meta_model(llama70b, torch.bfloat16, "fp8"))
    assert fp8 == shape.weight_bytes("fp8")
    assert fp8 / GIB == pytest.approx(67.7, abs=0.05), (
        "the H100 run of 2026-11-23: 67.7 GiB of weights with fp8 linear layers"
    )


def test_70b_in_bf16_on_one_h100_is_refused_with_its_size_and_what_to_use(llama70b):
    with pytest.raises(ModelTooLarge) as refused:
        plan_placement(llama70b, torch.bfloat16, None, [H100], 0.9, reserve(llama70b), LLAMA_33_70B)
    message = str(refused.value)
    assert message.startswith(f"{LLAMA_33_70B}: 141.1 GB of weights in bfloat16 do not fit 1 visible GPU(s) of 86 GB")
    assert "`quantization: fp8` (72.7 GB of weights) on one GPU with `gpu_memory_utilization: 0.91`" in message
    assert "`backend: vllm` with `tensor_parallel_size: 2`" in message


def test_70b_in_fp8_fits_one_h100_with_a_batch_of_four_prompts_not_eight(llama70b):
    """The H100 measurement of 2026-11-23 (docs/benchmarks-judge.md) ran the whole 70B shape in fp8 on one H100 at batch 4 (1.49 pairs/s) and at batch 8 under memory
    pressure (75.5 GiB peak, 0.99 pairs/s) with ~3,140-token prompts."""
    four, eight = reserve(llama70b, 4 * 3140), reserve(llama70b, 8 * 3140)
    placed = plan_placement(llama70b, torch.bfloat16, "fp8", [H100], 0.95, four, LLAMA_33_70B)
    assert placed.device_map == {"": 0} and "72.7 GB of weights in fp8" in placed.description
    with pytest.raises(ModelTooLarge, match="72.7 GB of weights in fp8 do not fit"):
        plan_placement(llama70b, torch.bfloat16, "fp8", [H100], 0.95, eight, LLAMA_33_70B)


def test_70b_in_bf16_is_spread_over_four_h100s_within_each_budget(llama70b):
    budget = int(H100 * 0.9) - reserve(llama70b)
    placed = plan_placement(llama70b, torch.bfloat16, None, [H100] * 4, 0.9, reserve(llama70b), LLAMA_33_70B)
    device_map = placed.device_map
    assert set(device_map.values()) == {0, 1, 2, 3}, "balanced over the four, as device_map='auto' does"
    assert placed.description.startswith("spread over GPUs 0, 1, 2, 3: 141.1 GB of weights in bfloat16")
    model = meta_model(llama70b, torch.bfloat16, None)
    held = {gpu: 0 for gpu in range(4)}
    for name, parameter in model.named_parameters():
        owner = max((m for m in device_map if m == "" or name == m or name.startswith(m + ".")), key=len)
        held[device_map[owner]] += parameter.numel() * parameter.element_size()
    assert sum(held.values()) == 141_107_412_992
    assert all(b <= budget for b in held.values()), held
    layers = [m for m in device_map if m.startswith("model.layers.")]
    assert len(layers) == 80, "a decoder layer is never split over two GPUs"


def test_no_gpu_no_placement(llama70b):
    with pytest.raises(ModelTooLarge, match="no visible GPU"):
        plan_placement(PUBLISHED[LLAMA_31_8B].transformers_config(), torch.bfloat16, None, [], 0.9, 0, LLAMA_31_8B)


def weightless_copy(model_dir, tmp_path):
    """The model's config and tokenizer without its weights: anything that reads weights fails."""
    target = tmp_path / "no-weights"
    shutil.copytree(model_dir, target, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    return target


def test_fp8_on_a_cpu_is_refused_before_loading(chat_llama, tmp_path):
    from generation.backends.hf import TransformersBackend

    with pytest.raises(ValueError, match=r"quantization: fp8 needs a CUDA GPU of compute capability >= 8.9"):
        TransformersBackend(weightless_copy(chat_llama, tmp_path), transformers_judge(chat_llama, quantization="fp8"))
    with pytest.raises(OSError):  # what reading the missing weights gives: the refusal above came first
        TransformersBackend(weightless_copy(chat_llama, tmp_path / "again"), transformers_judge(chat_llama))


def test_profile_batch_settings_are_validated(tmp_path):
    import json

    import yaml

    data = json.loads(load_profile("paper").model_dump_json())
    path = tmp_path / "settings.yaml"
    for bad, problem in (
        ("lots", "judge.max_batch_tokens"),
        (0, "judge.max_batch_tokens"),
        ("512", "judge.max_batch_tokens"),
    ):
        data["judge"]["max_batch_tokens"] = bad
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(ProfileError, match=problem):
            load_profile(path)
    data["judge"].update(max_batch_tokens="auto", gpu_memory_utilization=1.5)
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match="judge.gpu_memory_utilization"):
        load_profile(path)
    data["judge"]["gpu_memory_utilization"] = 0.95
    data["rerank"].update(packed=True, attention="flash_attention_2", max_batch_tokens=65536)
    path.write_text(yaml.safe_dump(data))
    profile = load_profile(path)
    assert (
        profile.judge.max_batch_tokens == "auto" and profile.rerank.packed and profile.rerank.max_batch_tokens == 65536
    )
    paper = load_profile("paper")
    assert profile.config_hash() == paper.config_hash(), "batching and placement change how fast, not what"
    data["judge"]["quantization"] = "fp8"
    path.write_text(yaml.safe_dump(data))
    assert load_profile(path).config_hash("judge") != paper.config_hash("judge"), "fp8 changes the labels"


def test_packed_reranker_scores_equal_the_padded_ones(tiny_qwen3):
    """Sequences end to end in one row give today's padded P(yes). On a CPU through sdpa with the block-diagonal
    mask transformers builds from the restarting positions (flex attention, which a GPU would use, is compiled by
    transformers, and torch 2.13's CPU template for it fails to build here)."""
    from generation.backends.hf import QwenRerankerScorer

    base = load_profile("demo").rerank
    documents = [" ".join(["bees"] * n) + " varroa mites pesticides" for n in (1, 5, 17, 40, 3, 90, 8, 2, 60)]

    def scorer(**settings):
        config = base.model_copy(
            update={
                "backend": "transformers",
                "model": str(tiny_qwen3),
                "batch_size": 4,
                "max_length": 512,
                "dtype": "float32",
                **settings,
            }
        )
        return QwenRerankerScorer(config, device="cpu")

    padded = scorer().score("Judge relevance.", "why are bees declining", documents)
    packed_scorer = scorer(packed=True, attention="sdpa", max_batch_tokens=400)
    packed = packed_scorer.score("Judge relevance.", "why are bees declining", documents)
    assert packed == pytest.approx(padded, abs=1e-5)
    assert len(set(round(s, 6) for s in packed)) > 1
    batches = list(packed_scorer.backend._batches([[0] * n for n in (100, 150, 200, 90)]))
    assert [len(b) for _, b in batches] == [3, 1], "packed batches are cut by their summed length"
