"""How a judge backend would run a profile's judge on a calibration's device, for `plan` to price: where the
transformers backend places the model (generation/backends/placement.py, the functions the backend itself calls),
how many prompts its batches hold (the budget batching.py would choose after loading), how many GPUs one model
copy spans, or that the backend would refuse the configuration (no figure then).

On a `device_map` spread the decoder layers run one GPU after the other, so one model copy keeps every GPU it spans
for the whole of each forward: its GPU-hours are the copy's hours times those GPUs. vLLM's tensor parallelism splits
each layer over its GPUs instead, so the calibrated share already prices its GPU-hours.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from generation.backends.batching import GpuMemory, auto_budget_for
from generation.backends.placement import ModelTooLarge, plan_placement, reserve_for
from generation.judging.calibration import Device
from generation.model_shapes import Shape

# ASSUMED: what the CUDA context and torch's own start take on each GPU before the weights (not measured here; the
# order of a few hundred MiB on an H100). It lowers the automatic budget the plan expects, as it lowers the real one.
CUDA_CONTEXT_BYTES = 2**29
NODE_GPUS = 4  # the GPUs a transformers model may be spread over: one node's


@dataclass(frozen=True)
class Execution:
    """One precision of the judge as the backend would run it."""

    max_pairs: int  # batch_size
    budget_tokens: int | None  # tokens a batch (rows x longest prompt); None: batch_size alone
    gpus: int  # GPUs one model copy holds while it works
    hours_per_copy_gpu: int  # multiplier from a copy's compute hours to GPU-hours (the span on a device_map)
    how: str  # one line for the plan's notes

    def decode_batch(self, prompt_tokens: float) -> int:
        if self.budget_tokens is None:
            return self.max_pairs
        return max(1, min(self.max_pairs, int(self.budget_tokens // max(prompt_tokens, 1))))


class Refused(str):
    """Why the backend would refuse this precision: the plan leaves its rows out and says this."""


def transformers_execution(
    judge, shape: Shape, precision: str, device: Device, gpus: int = NODE_GPUS
) -> Execution | Refused:
    """The transformers backend's placement and batch budget for `judge` (a JudgeConfig) at `precision` on `gpus`
    GPUs like `device`, as TransformersBackend.__init__ and _adopt compute them on a GPU."""
    quantization = "fp8" if precision == "fp8" else None
    dtype = {"float32": torch.float32, "float16": torch.float16}.get(judge.dtype, torch.bfloat16)
    dtype_bytes = dtype.itemsize
    budget = judge.max_batch_tokens
    reserve = reserve_for(shape, budget if isinstance(budget, int) else judge.max_model_len, dtype_bytes)
    try:
        placed = plan_placement(
            shape.transformers_config(),
            dtype,
            quantization,
            [device.memory] * gpus,
            judge.gpu_memory_utilization,
            reserve,
            shape.name,
        )
    except ModelTooLarge as refused:
        return Refused(
            f"{precision}: the transformers backend refuses it on {gpus} {device.name} ({refused}); rows left out"
        )
    span = len(set(placed.device_map.values()))
    if budget == "auto":
        # GPU 0 after loading its share of the weights (get_balanced_memory spreads them about evenly), the
        # allocator's cache emptied: what `_adopt` reads (batching.read_gpu_memory)
        on_first = shape.weight_bytes(precision) // span
        memory = GpuMemory(device.memory - on_first - CUDA_CONTEXT_BYTES, device.memory, on_first, on_first)
        budget, _ = auto_budget_for(
            shape, dtype_bytes, judge.packed, memory, judge.gpu_memory_utilization, "judge.max_batch_tokens"
        )
    where = "one GPU" if span == 1 else f"a device_map over {span} GPUs, one working at a time (GPU-hours x {span})"
    tokens = f"{budget:,} tokens a batch" if budget else "no token budget"
    return Execution(
        judge.batch_size,
        budget,
        span,
        span,
        f"{precision}: {where}; {tokens} ({judge.max_batch_tokens or 'batch_size'}), at most {judge.batch_size} pairs",
    )


def vllm_execution(judge, shape: Shape, precision: str, device: Device | None) -> Execution | Refused:
    """vLLM schedules its own batches (up to `max_num_seqs` sequences, engine_args): the plan takes the pairs of one
    engine call, capped by max_num_seqs when the profile sets it. Refused when the weights alone overflow the
    tensor-parallel group's share of memory."""
    tp = judge.tensor_parallel_size
    utilisation = judge.engine_args.get("gpu_memory_utilization", 0.9)
    if device is not None and shape.weight_bytes(precision) / tp > device.memory * utilisation:
        return Refused(
            f"{precision}: {shape.weight_bytes(precision) / 1e9:.1f} GB of weights do not fit "
            f"tensor_parallel_size {tp} x {device.name} at gpu_memory_utilization {utilisation}; "
            "rows left out"
        )
    pairs = min(judge.batch_size, judge.engine_args.get("max_num_seqs", judge.batch_size))
    return Execution(
        pairs,
        None,
        tp,
        1,
        f"{precision}: vLLM, tensor_parallel_size {tp}; decode batch = the "
        f"{pairs} pairs of an engine call (vLLM's scheduler decides; not measured)",
    )


def execution_for(
    judge, backend: str, shape: Shape, precision: str, device: Device | None, device_name: str = ""
) -> Execution | Refused:
    """`device`: the calibration's GPU from the device table; None for a CPU or a GPU the table does not know
    (`device_name` tells which)."""
    if backend == "transformers":
        if device is None and device_name.startswith("CPU"):  # scripts/bench_gpu.py names a CPU "CPU (N threads)"
            budget = judge.max_batch_tokens if isinstance(judge.max_batch_tokens, int) else None  # auto: pairs alone
            tokens = f" and {budget:,} tokens" if budget else ""
            return Execution(
                judge.batch_size,
                budget,
                1,
                1,
                f"{precision}: on the CPU, batches of at most {judge.batch_size} pairs{tokens}",
            )
        if device is None:
            return Refused(
                f"{precision}: the calibration's device is not in the device table: the transformers "
                "backend's placement and batches cannot be priced; rows left out"
            )
        return transformers_execution(judge, shape, precision, device)
    if backend == "vllm":
        return vllm_execution(judge, shape, precision, device)
    pairs = judge.batch_size
    return Execution(pairs, None, 1, 1, f"{precision}: {backend}: decode batch = batch_size {pairs} (assumed)")
