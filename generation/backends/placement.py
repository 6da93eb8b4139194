"""Where the transformers backend puts a model: on one device, spread over the visible GPUs (`device_map` with a
memory budget per GPU), or nowhere, refused before loading with its size in GB and what to use instead. Also the
fp8 load settings. Everything here works from the model's config.json: no weights are read.
"""

from __future__ import annotations

import logging
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from generation.backends.batching import bytes_per_token
from generation.model_shapes import Shape, shape_from_config

GB = 1e9
# Tensor-parallel sizes vLLM can use for these models (the attention heads must divide evenly).
TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)
MAX_UTILISATION = 0.98  # the highest gpu_memory_utilization the refusal suggests (CUDA's own context needs some)


class ModelTooLarge(ValueError):
    pass


@dataclass(frozen=True)
class Placement:
    device_map: dict[str, int | str]  # module -> GPU index (transformers' `device_map`; {"": 0}: all on GPU 0)
    description: str


def dtype_name(dtype: torch.dtype, quantization: str | None) -> str:
    return (
        "fp8" if quantization == "fp8" else {torch.float32: "float32", torch.float16: "float16"}.get(dtype, "bfloat16")
    )


def meta_model(config, dtype: torch.dtype, quantization: str | None):
    """The model on the meta device (shapes and dtypes, no memory), its decoder's linear weights one byte each in
    fp8, as they will be once loaded, so module sizes are what the GPUs will hold."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if quantization == "fp8":
        for layer in model.model.layers:
            for module in layer.modules():
                if isinstance(module, torch.nn.Linear):
                    module.weight = torch.nn.Parameter(
                        torch.empty_like(module.weight, dtype=torch.float8_e4m3fn), requires_grad=False
                    )
    return model


def weight_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def share_needed(size: int, reserve_bytes: int, gpu_total: int) -> float:
    """The gpu_memory_utilization (rounded up to a hundredth) at which `size` bytes of weights and the reserve fit."""
    return math.ceil((size + reserve_bytes) / gpu_total * 100) / 100 if gpu_total else math.inf


def alternatives(
    shape: Shape,
    precision: str,
    gpu_total: int,
    utilisation: float,
    reserve_bytes: int,
    size: int | None = None,
    gpu_free: int | None = None,
) -> str:
    """What would run a model that does not fit: this precision at a higher memory share, fp8 on one GPU (at the
    share that needs), or vLLM with tensor parallelism. A share is suggested only where the GPU's free memory
    holds it."""
    hints = []
    free = gpu_total if gpu_free is None else gpu_free
    size = shape.weight_bytes(precision) if size is None else size
    share = share_needed(size, reserve_bytes, gpu_total)
    if utilisation < share <= MAX_UTILISATION and size + reserve_bytes <= free:
        hints.append(
            f"`gpu_memory_utilization: {share}` ({size / GB:.1f} GB of weights in {precision} and one "
            f"batch's activations fit one GPU at that share)"
        )
    fp8_share = share_needed(shape.weight_bytes("fp8"), reserve_bytes, gpu_total)
    if precision != "fp8" and fp8_share <= MAX_UTILISATION and shape.weight_bytes("fp8") + reserve_bytes <= free:
        hint = f"`quantization: fp8` ({shape.weight_bytes('fp8') / GB:.1f} GB of weights) on one GPU"
        hints.append(hint if fp8_share <= utilisation else f"{hint} with `gpu_memory_utilization: {fp8_share}`")
    budget = min(gpu_total * utilisation, free) - reserve_bytes
    needed = shape.weight_bytes(precision) / budget if budget > 0 else math.inf
    tp = next((n for n in TENSOR_PARALLEL_SIZES if n >= needed and shape.heads % n == 0), None)
    if tp is not None:
        hints.append(f"`backend: vllm` with `tensor_parallel_size: {tp}` ({tp} such GPUs)")
    hints.append("more visible GPUs (CUDA_VISIBLE_DEVICES)")
    return "; or ".join(hints)


def plan_placement(
    config,
    dtype: torch.dtype,
    quantization: str | None,
    gpu_totals: list[int],
    utilisation: float,
    reserve_bytes: int,
    name: str = "",
    gpu_free: list[int] | None = None,
) -> Placement:
    """One GPU when the weights and `reserve_bytes` (one full-length batch's activations) fit within `utilisation`
    of its memory and within what is free on it now (`gpu_free`, torch.cuda.mem_get_info: other processes on a
    shared GPU hold the rest); else a `device_map` over all of `gpu_totals` (transformers' own inference of it, on
    the meta model, with that budget per GPU); else ModelTooLarge naming the size and what to use instead."""
    shape = shape_from_config(config, name)
    precision = dtype_name(dtype, quantization)
    model = meta_model(config, dtype, quantization)
    size = weight_bytes(model)
    gpu_free = list(gpu_totals) if gpu_free is None else gpu_free
    budgets = [min(int(total * utilisation), free) - reserve_bytes for total, free in zip(gpu_totals, gpu_free)]
    if budgets and size <= budgets[0]:
        return Placement({"": 0}, f"on GPU 0: {size / GB:.1f} GB of weights in {precision}")
    if len(budgets) > 1 and size <= sum(budgets):
        from transformers.integrations.accelerate import get_balanced_memory, infer_auto_device_map

        # balanced (what device_map="auto" does), so every GPU keeps room for activations; the GPUs are stated, so
        # accelerate's warning that they are not visible here (`plan` prices them on a machine without) is muted
        with quiet_logger("accelerate.utils.modeling"):
            balanced = get_balanced_memory(
                model,
                max_memory={i: max(b, 0) for i, b in enumerate(budgets)},
                no_split_module_classes=model._no_split_modules,
            )
            device_map = infer_auto_device_map(
                model, max_memory=balanced, no_split_module_classes=model._no_split_modules
            )
        if set(device_map.values()) <= set(range(len(budgets))):
            used = sorted(set(device_map.values()))
            return Placement(
                device_map,
                f"spread over GPUs {', '.join(map(str, used))}: {size / GB:.1f} GB of "
                f"weights in {precision}, at most {max(budgets) / GB:.1f} GB a GPU",
            )
    shared = (
        f" ({gpu_free[0] / GB:.1f} GB of GPU 0 free now: other processes hold the rest)"
        if gpu_totals and gpu_free[0] < gpu_totals[0] * utilisation
        else ""
    )
    visible = (
        f"{len(gpu_totals)} visible GPU(s) of {gpu_totals[0] / GB:.0f} GB{shared}, {max(budgets[0], 0) / GB:.1f} "
        f"GB each for weights after `gpu_memory_utilization: {utilisation}` and one batch's activations"
        if gpu_totals
        else "no visible GPU"
    )
    best = max(range(len(gpu_totals)), key=lambda i: gpu_free[i], default=None)
    hints = alternatives(
        shape,
        precision,
        gpu_totals[best] if best is not None else 0,
        utilisation,
        reserve_bytes,
        size,
        gpu_free[best] if best is not None else 0,
    )
    raise ModelTooLarge(
        f"{name or shape.name}: {size / GB:.1f} GB of weights in {precision} do not fit {visible}. Use {hints}"
    )


@contextmanager
def quiet_logger(name: str):
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def visible_gpu_memory(index: int | None = None) -> tuple[list[int], list[int]]:
    """The total memory of GPU `index` (None: of every visible GPU) and what is free on it now (cudaMemGetInfo:
    after other processes'). Reading it starts a CUDA context on that GPU, so only the GPUs asked for are read."""
    indices = range(torch.cuda.device_count()) if index is None else [index]
    free_total = [torch.cuda.mem_get_info(i) for i in indices]
    return [total for _, total in free_total], [free for free, _ in free_total]


def read_config(model_path: str | Path):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(model_path))


FP8_GRANULARITIES = ("per-tensor", "per-row")  # judge.fp8_granularity: torchao's PerTensor() and PerRow()


def fp8_config(granularity: str = "per-tensor"):
    """torchao's dynamic float8 config at `granularity`: per-tensor, one scale for a whole activation (every row of
    the batch, padding included) and one per weight, as vLLM's online `quantization="fp8"` scales them (vLLM's fp8
    docs, "dynamic per-tensor scale"); per-row, one scale per activation row (a token's own) and one per weight
    output channel, so a row's quantization does not depend on its batch mates. torchao applies the granularity to
    both (torchao/float8/inference.py `_normalize_granularity`)."""
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor

    return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow() if granularity == "per-row" else PerTensor())


def check_fp8_device(device: str, granularity: str = "per-tensor") -> None:
    """Refuses a device torchao's float8 cannot run at `granularity`: its rule (torchao/float8/inference.py
    `_check_hardware_support`) is CUDA compute capability >= 8.9 (or an MI300) for per-tensor and per-row alike."""
    if granularity not in FP8_GRANULARITIES:
        raise ValueError(f"judge.fp8_granularity: {granularity!r} is not one of {', '.join(FP8_GRANULARITIES)}")
    if not device.startswith("cuda"):
        raise ValueError(
            f"quantization: fp8 needs a CUDA GPU of compute capability >= 8.9 (torchao's float8 "
            f"kernels); this backend runs on {device!r}. Remove `quantization` to run in "
            "bfloat16/float32 here"
        )
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    if (major, minor) < (8, 9):
        raise ValueError(
            f"judge.fp8_granularity: {granularity} fp8 needs compute capability >= 8.9 (torchao's rule); "
            f"{device} is {major}.{minor}"
        )


def fp8_load_settings(device: str, granularity: str = "per-tensor") -> dict:
    """`from_pretrained` settings for fp8 weights and activations: torchao's dynamic float8 (`fp8_config`),
    applied by transformers as each weight loads, so a model is never held in bf16 whole. Refused where it cannot
    run (`check_fp8_device`)."""
    check_fp8_device(device, granularity)
    try:
        config = fp8_config(granularity)
    except ImportError:
        raise ValueError(
            "quantization: fp8 on the transformers backend needs torchao: pip install 'researchy-subq-judgments[fp8]'"
        ) from None
    from transformers import TorchAoConfig

    return {"quantization_config": TorchAoConfig(config)}


def reserve_for(shape: Shape, tokens: int, dtype_bytes: int) -> int:
    """GPU memory kept free of weights: one batch of `tokens` tokens' activations and KV cache."""
    return math.ceil(tokens * bytes_per_token(shape, dtype_bytes, keeps_cache=True))
