"""The judge and the reranker at real layer shapes, built in memory with random weights (no download), on a GPU or
a CPU: the kit against the raw padded and the raw unpadded forward; pairs/s, TFLOP/s, the share of the device's
dense peak and of a matrix-product ceiling measured here, peak memory; written as a calibration file for `plan`.

    python scripts/bench_gpu.py --device cuda --shape llama-70b --layers 16 --precision bf16 fp8 \\
        --corpus /data/clueweb22/txt/en/en00 --calibration calibration.json
    python scripts/bench_gpu.py --device cuda --shape llama-8b reranker --corpus /data/clueweb22/txt/en/en00
    python scripts/bench_gpu.py --device cpu --shape tiny-llama tiny-qwen3 --prompt-tokens 200 --pairs 8   (the test)

Shapes (generation/model_shapes.py, from each model's config.json): `llama-70b` (Llama-3.3-70B, `--layers` of
its 80), `llama-8b` (Llama-3.1-8B), `reranker` (Qwen3-Reranker-0.6B), `tiny-llama` / `tiny-qwen3`. Judge shapes
run the kit's `LLMJudge` (the `paper` prompt through the Llama-3.3 chat template, documents cut at the profile's
`context_words`, prompts at `--prompt-tokens`) in distribution and generate mode; the reranker shape runs the rerank
path (`next_token_logprobs` over "no"/"yes") padded, with transformers' default attention (sdpa) as the kit loads it,
and packed, with `--packed-attention`. Every prompt is as long as a document drawn from `--corpus` (its length
distribution cut at the profile's limits: the bundled sample's documents are short, a ClueWeb22 copy gives the
paper's), so batches mix lengths as the kit's do and packing has padding to remove. Each row is one precision, and
the calibration takes each precision's figure from its own rows only. Raw padded = one `logits_to_keep=1` forward per
length-sorted left-padded batch of the kit's own token ids; raw unpadded = one sequence at a time. fp8 = torchao's
dynamic float8 on every decoder linear layer (CUDA, compute capability >= 8.9 only). FLOPs per pair are counted as
`plan` counts them (generation/model_shapes.prompt_flops: 2 x non-embedding params per token + causal attention).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from generation.model_shapes import LLAMA_31_8B, LLAMA_33_70B, PUBLISHED, QWEN3_RERANKER_06B, TINY, prompt_flops  # noqa: E402

SHAPES = {"llama-70b": PUBLISHED[LLAMA_33_70B], "llama-8b": PUBLISHED[LLAMA_31_8B],
          "reranker": PUBLISHED[QWEN3_RERANKER_06B], **TINY}
WORDS = ("honey bee colony varroa mite virus pesticide neonicotinoid forage pollen nectar queen drone worker hive "
         "winter loss habitat climate nutrition pathogen fungicide beekeeper apiary swarm brood wax comb").split()


def build_model(shape, device: str, dtype: torch.dtype, attention: str | None = None, fp8: bool = False):
    """Random weights of `shape` on `device`, made layer by layer from the meta device (each decoder layer
    materialised, initialised and, for fp8, quantized before the next), so the whole 70B shape in fp8 never
    needs its bf16 size."""
    import transformers

    config = shape.transformers_config(dtype=str(dtype).removeprefix("torch."))
    if attention:
        config._attn_implementation = attention
    model_class = {"llama": transformers.LlamaForCausalLM, "qwen3": transformers.Qwen3ForCausalLM}[shape.family]
    torch.manual_seed(0)
    with torch.device("meta"):
        model = model_class(config).to(dtype)
    for part in [*model.model.layers, model.model.embed_tokens, model.model.norm, model.lm_head]:
        part.to_empty(device=device)
        for module in part.modules():
            model._init_weights(module)
        if fp8 and part in model.model.layers:
            to_fp8(part)
    if shape.tied_embeddings:
        model.tie_weights()
    # the rotary embedding's frequencies are a buffer computed at construction, not a weight: compute them here
    with torch.device(device):
        model.model.rotary_emb = type(model.model.rotary_emb)(config)
    return model.eval()


def to_fp8(module) -> None:
    """torchao's dynamic float8 (per-tensor scales) on a decoder layer's linear layers: the transformers backend's
    fp8 (generation/backends/placement.fp8_load_settings)."""
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerTensor, quantize_

    quantize_(module, Float8DynamicActivationFloat8WeightConfig(granularity=PerTensor()))


def chat_tokenizer(family: str):
    from conftest import tiny_tokenizer

    tokenizer = tiny_tokenizer("llama3" if family == "llama" else "qwen3")
    tokenizer.model_max_length = 1 << 20  # MiniLM's 512 is not the model's limit here
    return tokenizer


def document_words(corpus: Path, count: int, limit: int, seed: int, read_at_most: int = 20000) -> list[int]:
    """Word counts of `count` documents drawn (with replacement) from the first `read_at_most` documents of `corpus`
    (ClueWeb22 txt or JSONL, read as the corpus stage reads them), each cut at `limit` words as the profile cuts
    them: so batches hold the mix of lengths the kit meets, and packing has padding to remove."""
    import random
    from itertools import islice

    from generation.errors import Rejects
    from generation.stages.corpus import input_files, iter_documents

    documents = (d for f in input_files([corpus]) for d in iter_documents(f, Rejects(None, stop=False)))
    words = [min(len(d["text"].split()), limit) for d in islice(documents, read_at_most)]
    if not words:
        raise SystemExit(f"--corpus {corpus}: no documents")
    rng = random.Random(seed)
    return [rng.choice(words) for _ in range(count)]


def judge_sequences(args, pairs: int):
    """The kit's judge (the paper profile's `context_words` cut) and `pairs` pairs over documents of the corpus's
    lengths; prompts longer than `--prompt-tokens` are cut by tokens there, as max_model_len cuts them."""
    import random

    from generation.judging.judges import Pair
    from generation.profiles import load_profile

    rng = random.Random(0)
    config = load_profile("paper").judge.model_copy(update={
        "backend": "transformers", "model": "in-memory", "max_model_len": args.prompt_tokens + 3, "mode": "distribution"})
    words = document_words(args.corpus, pairs, config.context_words, seed=0)
    questions = [f"Why does {rng.choice(WORDS)} affect {rng.choice(WORDS)} number {i}?" for i in range(max(pairs // 8, 1))]
    return config, [Pair(questions[i % len(questions)], " ".join(rng.choices(WORDS, k=n))) for i, n in enumerate(words)]


def rerank_sequences(tokenizer, args, pairs: int):
    """Documents of the corpus's lengths, cut at the paper profile's `rerank.max_doc_words` (null there: the whole
    document) and at `--rerank-tokens`."""
    import random

    from generation.judging.reranker_input import RerankEncoder
    from generation.profiles import load_profile

    rng = random.Random(1)
    encoder = RerankEncoder(tokenizer, max_length=args.rerank_tokens)
    query = "why are honey bee populations declining"
    limit = load_profile("paper").rerank.max_doc_words or 10 * args.rerank_tokens  # no word cut: tokens cut it
    docs = [" ".join(rng.choices(WORDS, k=n)) for n in document_words(args.corpus, pairs, limit, seed=1)]
    return [encoder.encode("Given the list of questions as query, retrieve relevant passages that answer the "
                           "questions.", query, d) for d in docs]


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
    resident high-water mark on a CPU)."""
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
        peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 2**20
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


def bench_shape(name: str, args, precision: str) -> list[dict]:
    from generation.backends.hf import TransformersBackend
    from generation.judging.judges import LLMJudge

    shape = SHAPES[name]
    if name == "llama-70b" and args.layers:
        shape = shape.with_layers(args.layers)
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    reranker = shape.family == "qwen3" and name != "tiny-llama"
    # transformers' default attention (sdpa), as the kit loads a model without `attention:`; the packed rows switch
    # to --packed-attention, as a profile with `packed: true` must
    model = build_model(shape, args.device, dtype, None, fp8=precision == "fp8")
    padded_attention = model.config._attn_implementation
    tokenizer = chat_tokenizer(shape.family)
    rows = []
    common = {"shape": shape.name, "precision": precision if args.device.startswith("cuda") else "float32"}
    if reranker:
        sequences = rerank_sequences(tokenizer, args, args.pairs)
        wanted = [tokenizer.convert_tokens_to_ids("no"), tokenizer.convert_tokens_to_ids("yes")]
        padded = TransformersBackend.wrap(model, tokenizer, batch_size=args.batch_size)
        packed = TransformersBackend.wrap(model, tokenizer, batch_size=args.pairs,
                                          max_batch_tokens=args.batch_size * args.rerank_tokens, packed=True)
        runs = {("kit", "rerank"): lambda: padded.next_token_logprobs(sequences, wanted),
                ("kit packed", "rerank"): with_attention(model, args.packed_attention,
                                                         lambda: packed.next_token_logprobs(sequences, wanted)),
                ("raw padded", "rerank"): lambda: raw_padded(padded, sequences, torch.tensor(wanted)),
                ("raw unpadded", "rerank"): lambda: raw_unpadded(padded, sequences, torch.tensor(wanted))}
        if args.compile:
            runs[("kit compiled", "rerank")] = compiled(model, lambda: padded.next_token_logprobs(sequences, wanted))
    else:
        backend = TransformersBackend.wrap(model, tokenizer, batch_size=args.batch_size)
        config, pairs = judge_sequences(args, args.pairs)
        judges = {mode: LLMJudge(config.model_copy(update={"mode": mode}), backend, tokenizer, shape.name)
                  for mode in ("distribution", "generate")}
        sequences = [judges["distribution"].encode_pair(p)[0] for p in pairs]
        wanted = torch.tensor(judges["distribution"].digit_ids)
        runs = {("kit", "distribution"): lambda: judges["distribution"].grade(pairs),
                ("kit", "generate"): lambda: judges["generate"].grade(pairs),
                ("raw padded", "distribution"): lambda: raw_padded(backend, sequences, wanted),
                ("raw unpadded", "distribution"): lambda: raw_unpadded(backend, sequences, wanted)}
        if args.compile:
            runs[("kit compiled", "distribution")] = compiled(model, lambda: judges["distribution"].grade(pairs))
    tokens = statistics.mean(len(s) for s in sequences)
    shortest, longest = min(len(s) for s in sequences), max(len(s) for s in sequences)
    flops = sum(prompt_flops(shape, len(s)) for s in sequences) / len(sequences)  # each prompt its own length
    ceiling = matmul_ceiling(shape, min(args.batch_size * int(tokens), 65536), args.device, dtype, precision == "fp8")
    spec = device_spec_of(args.device)
    peak = args.peak_tflops * 1e12 if args.peak_tflops else spec.peak_flops[precision] if spec else None
    for (run, mode), call in runs.items():
        seconds, memory = timed(call, args.device, args.repeats)
        rate = len(sequences) / seconds
        achieved = rate * flops
        attention = args.packed_attention if run == "kit packed" else padded_attention
        rows.append({**common, "run": run, "mode": mode, "batch": 1 if run == "raw unpadded" else args.batch_size,
                     "attention": attention, "prompt_tokens": round(tokens), "tokens_min": shortest,
                     "tokens_max": longest, "pairs_per_s": rate, "tflops": achieved / 1e12,
                     "share_of_peak": achieved / peak if peak else None, "share_of_ceiling": achieved / ceiling,
                     "ceiling_tflops": ceiling / 1e12, "peak_memory_gib": memory})
    del model
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return rows


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
    return Calibration(device_name(device), command, {"torch": torch.__version__, "transformers": transformers.__version__,
                                                       "measured": time.strftime("%Y-%m-%d")}, shares, peaks,
                       bandwidth, rows)


def print_table(rows: list[dict], device: str) -> None:
    import transformers

    print(f"\n{device_name(device)}; torch {torch.__version__}, transformers {transformers.__version__}")
    print("| shape | run | mode | precision | attention | batch | tokens: mean (min-max) | pairs/s | TFLOP/s | "
          "share of peak | share of ceiling (TFLOP/s) | peak memory GiB |")
    print("| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        peak = f"{r['share_of_peak']:.1%}" if r["share_of_peak"] is not None else "n/a"
        print(f"| {r['shape']} | {r['run']} | {r['mode']} | {r['precision']} | {r['attention']} | {r['batch']} | "
              f"{r['prompt_tokens']:,} ({r['tokens_min']:,}-{r['tokens_max']:,}) | "
              f"{r['pairs_per_s']:.2f} | {r['tflops']:.3g} | {peak} | {r['share_of_ceiling']:.1%} "
              f"({r['ceiling_tflops']:.3g}) | {r['peak_memory_gib']:.2f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", nargs="+", choices=sorted(SHAPES), default=["llama-70b", "llama-8b", "reranker"])
    parser.add_argument("--layers", type=int, default=16, help="decoder layers of the 70B shape (of 80)")
    parser.add_argument("--precision", nargs="+", choices=["bf16", "fp8"], default=["bf16"])
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8, help="pairs per batch (the reranker: docs per batch)")
    parser.add_argument("--prompt-tokens", type=int, default=8189,
                        help="judge prompts are cut to this many tokens (the paper profile's max_model_len - 3)")
    parser.add_argument("--rerank-tokens", type=int, default=8192, help="reranker inputs are cut to this many "
                        "tokens (the profiles' rerank max_length)")
    parser.add_argument("--corpus", type=Path, default=ROOT / "generation" / "sample" / "clueweb22",
                        help="documents whose lengths the prompts take (ClueWeb22 txt or JSONL; default: the bundled "
                        "sample, whose documents are short: pass your ClueWeb22-B copy for the paper's lengths)")
    parser.add_argument("--packed-attention", default=None,
                        help="attn_implementation of the reranker shape (packed runs need flash_attention_2 or "
                             "flex_attention on a GPU; default: sdpa on a CPU, flex_attention on a GPU)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="also run the kit with `compile: true` "
                        "(torch.compile, dynamic shapes; compiled during the warm-up run, which is not timed)")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense peak for this precision, where the "
                        "built-in table (H100, H200) does not know it")
    parser.add_argument("--bandwidth-tbs", type=float, help="the device's memory bandwidth in TB/s, likewise")
    parser.add_argument("--calibration", type=Path, help="write the figures here as a calibration file for `plan`")
    args = parser.parse_args(argv)
    if args.packed_attention is None:
        args.packed_attention = "flex_attention" if args.device.startswith("cuda") else "sdpa"
    if "fp8" in args.precision and not args.device.startswith("cuda"):
        parser.error("fp8 runs on CUDA only (torchao's float8 needs compute capability >= 8.9)")
    rows = []
    for precision in args.precision:
        for name in args.shape:
            rows += bench_shape(name, args, precision)
            print(f"done: {name} {precision}", file=sys.stderr)
    print_table(rows, args.device)
    if args.calibration:
        spec = device_spec_of(args.device)
        bandwidth = args.bandwidth_tbs * 1e12 if args.bandwidth_tbs else spec.bandwidth if spec else None
        command = "scripts/bench_gpu.py " + " ".join(argv if argv is not None else sys.argv[1:])
        calibration(rows, args.device, command, bandwidth).save(args.calibration)
        print(f"calibration -> {args.calibration}", file=sys.stderr)


if __name__ == "__main__":
    main()
