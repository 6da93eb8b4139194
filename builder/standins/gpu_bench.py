"""The measurements of scripts/bench_gpu.py, and the calibration file `plan` reads made from them: documents of a
corpus's lengths, the raw padded and unpadded forwards the kit is compared with, timing with peak memory, a
matrix-product ceiling, and the per-precision shares of peak (generation/judging/calibration.py)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch


def document_words(corpus: Path, count: int, limit: int, seed: int, read_at_most: int = 20000) -> list[int]:
    """Word counts of `count` documents drawn (with replacement) from the first `read_at_most` documents of `corpus`
    (ClueWeb22 txt or JSONL, read as the corpus stage reads them), each cut at `limit` words as the profile cuts
    them: so batches hold the mix of lengths the kit meets, and packing has padding to remove."""
    import random
    from itertools import islice

    from generation.stages.corpus import input_files, iter_documents
    from generation.storage.rejects import Rejects

    documents = (d for f in input_files([corpus]) for d in iter_documents(f, Rejects(None, stop=False)))
    words = [min(len(d["text"].split()), limit) for d in islice(documents, read_at_most)]
    if not words:
        raise SystemExit(f"--corpus {corpus}: no documents")
    rng = random.Random(seed)
    return [rng.choice(words) for _ in range(count)]


def compiled(model, run):
    """`run` after `model.compile(dynamic=True)` (the backend's `compile: true`), compiled on the first call (the
    benchmark's warm-up); the last rows of a shape, since compiling changes the model in place."""

    def call():
        if getattr(model, "_compiled_call_impl", None) is None:
            model.compile(dynamic=True)
        return run()

    return call


def with_attention(model, attention: str, run):
    """`run` with the model's attention switched to `attention` (the packed path's), then back (the padded path's)."""

    def call():
        before = model.config._attn_implementation
        model.set_attn_implementation(attention)
        try:
            return run()
        finally:
            model.set_attn_implementation(before)

    return call


def raw_padded(backend, sequences, wanted):
    from generation.backends.hf import left_pad

    for _, batch in backend._batches(sequences):
        ids, mask, pos = (t.to(backend.input_device) for t in left_pad(batch, backend.pad_id))
        logits = backend.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits
        torch.log_softmax(logits[:, -1].float(), -1)[:, wanted]


def raw_unpadded(backend, sequences, wanted):
    for seq in sequences:
        logits = backend.model(input_ids=torch.tensor([seq], device=backend.input_device), logits_to_keep=1).logits
        torch.log_softmax(logits[:, -1].float(), -1)[:, wanted]


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(run, device: str, repeats: int) -> tuple[float, float]:
    """(median seconds of `repeats` runs after one warm-up, peak memory GiB: the GPU's allocator, or this process's
    resident high-water mark on a CPU). The warm-up runs under inference mode too: outside it a raw forward keeps its
    autograd activations, which ran an H100 out of memory in the raw padded row (CHANGELOG.md, 2026-11-27)."""
    with torch.inference_mode():
        run()
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        with torch.inference_mode():
            run()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    if device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        peak = next(int(s.split()[1]) for s in open("/proc/self/status") if s.startswith("VmHWM:")) / 2**20
    return statistics.median(seconds), peak


def matmul_ceiling(shape, tokens: int, device: str, dtype: torch.dtype, fp8: bool, repeats: int = 5) -> float:
    """FLOP/s of one matrix product at the MLP's shape (tokens x hidden x intermediate) on this device: bf16 (or
    the run's dtype) by torch.matmul, fp8 by torch._scaled_mm (per-tensor scales) as the fp8 layers run it."""
    a = torch.randn(tokens, shape.hidden, device=device).to(dtype)
    b = torch.randn(shape.intermediate, shape.hidden, device=device).to(dtype).t()
    if fp8:
        a, b = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=device)
        product = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
    else:
        product = lambda: a @ b  # noqa: E731
    product()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        product()
    synchronize(device)
    return 2 * tokens * shape.hidden * shape.intermediate * repeats / (time.perf_counter() - start)


def device_spec_of(device: str):
    from generation.judging.calibration import device_spec

    return device_spec(torch.cuda.get_device_name(torch.device(device))) if device.startswith("cuda") else None


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU ({torch.get_num_threads()} threads)"


def calibration(rows: list[dict], device: str, command: str, bandwidth: float | None):
    """Per precision, the kit's distribution-mode share of peak on the largest judge shape measured (the figure
    `plan` costs prefill with), and the packed reranker's share (else the padded one's)."""
    import transformers

    from generation.judging.calibration import Calibration

    shares: dict = {}
    judge = [r for r in rows if r["run"] == "kit" and r["mode"] == "distribution" and r["share_of_peak"]]
    for row in sorted(judge, key=lambda r: r["tflops"] / r["pairs_per_s"]):  # largest FLOPs per pair last wins
        shares.setdefault("transformers", {})[row["precision"]] = round(row["share_of_peak"], 4)
    # the reranker as the profiles run it (padded; packed is opt-in), each precision its own row: never the best
    # row across precisions, which would file a bf16 figure as fp8
    for row in rows:
        if row["mode"] == "rerank" and row["run"] == "kit" and row["share_of_peak"]:
            shares.setdefault("rerank", {})[row["precision"]] = round(row["share_of_peak"], 4)
    peaks = {r["precision"]: r["tflops"] * 1e12 / r["share_of_peak"] for r in rows if r["share_of_peak"]}
    return Calibration(
        device_name(device),
        command,
        {"torch": torch.__version__, "transformers": transformers.__version__, "measured": time.strftime("%Y-%m-%d")},
        shares,
        peaks,
        bandwidth,
        rows,
    )
