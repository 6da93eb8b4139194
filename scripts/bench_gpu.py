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
import statistics
import sys
from pathlib import Path

import torch

from builder.standins.gpu_bench import (
    calibration,
    compiled,
    device_name,
    device_spec_of,
    document_words,
    matmul_ceiling,
    raw_padded,
    raw_unpadded,
    timed,
    with_attention,
)
from builder.standins.models import build_model, chat_tokenizer
from generation.model_shapes import LLAMA_31_8B, LLAMA_33_70B, PUBLISHED, QWEN3_RERANKER_06B, TINY, prompt_flops
from generation.sample import CLUEWEB22

SHAPES = {
    "llama-70b": PUBLISHED[LLAMA_33_70B],
    "llama-8b": PUBLISHED[LLAMA_31_8B],
    "reranker": PUBLISHED[QWEN3_RERANKER_06B],
    **TINY,
}
WORDS = (
    "honey bee colony varroa mite virus pesticide neonicotinoid forage pollen nectar queen drone worker hive "
    "winter loss habitat climate nutrition pathogen fungicide beekeeper apiary swarm brood wax comb"
).split()


def judge_sequences(args, pairs: int):
    """The kit's judge (the paper profile's `context_words` cut) and `pairs` pairs over documents of the corpus's
    lengths; prompts longer than `--prompt-tokens` are cut by tokens there, as max_model_len cuts them."""
    import random

    from generation.judging.judges import Pair
    from generation.profiles.profile import load_profile

    rng = random.Random(0)
    config = load_profile("paper").judge.model_copy(
        update={
            "backend": "transformers",
            "model": "in-memory",
            "max_model_len": args.prompt_tokens + 3,
            "mode": "distribution",
        }
    )
    words = document_words(args.corpus, pairs, config.context_words, seed=0)
    questions = [
        f"Why does {rng.choice(WORDS)} affect {rng.choice(WORDS)} number {i}?" for i in range(max(pairs // 8, 1))
    ]
    return config, [Pair(questions[i % len(questions)], " ".join(rng.choices(WORDS, k=n))) for i, n in enumerate(words)]


def rerank_sequences(tokenizer, args, pairs: int):
    """Documents of the corpus's lengths, cut at the paper profile's `rerank.max_doc_words` (null there: the whole
    document) and at `--rerank-tokens`."""
    import random

    from generation.judging.reranker_input import RerankEncoder
    from generation.profiles.profile import load_profile

    rng = random.Random(1)
    encoder = RerankEncoder(tokenizer, max_length=args.rerank_tokens)
    query = "why are honey bee populations declining"
    limit = load_profile("paper").rerank.max_doc_words or 10 * args.rerank_tokens  # no word cut: tokens cut it
    docs = [" ".join(rng.choices(WORDS, k=n)) for n in document_words(args.corpus, pairs, limit, seed=1)]
    return [
        encoder.encode(
            "Given the list of questions as query, retrieve relevant passages that answer the questions.", query, d
        )
        for d in docs
    ]


def bench_shape(name: str, args, precision: str) -> list[dict]:
    from generation.backends.hf import TransformersBackend
    from generation.judging.judges import LLMJudge
    from generation.profiles.profile import load_profile

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
        rerank = load_profile("paper").rerank
        padded = TransformersBackend.wrap(model, tokenizer, rerank.model_copy(update={"batch_size": args.batch_size}))
        packed_section = {"batch_size": args.pairs, "max_batch_tokens": args.batch_size * args.rerank_tokens}
        packed = TransformersBackend.wrap(
            model, tokenizer, rerank.model_copy(update={**packed_section, "packed": True})
        )
        runs = {
            ("kit", "rerank"): lambda: padded.next_token_logprobs(sequences, wanted),
            ("kit packed", "rerank"): with_attention(
                model, args.packed_attention, lambda: packed.next_token_logprobs(sequences, wanted)
            ),
            ("raw padded", "rerank"): lambda: raw_padded(padded, sequences, torch.tensor(wanted)),
            ("raw unpadded", "rerank"): lambda: raw_unpadded(padded, sequences, torch.tensor(wanted)),
        }
        if args.compile:
            runs[("kit compiled", "rerank")] = compiled(model, lambda: padded.next_token_logprobs(sequences, wanted))
    else:
        config, pairs = judge_sequences(args, args.pairs)
        backend = TransformersBackend.wrap(model, tokenizer, config.model_copy(update={"batch_size": args.batch_size}))
        judges = {
            mode: LLMJudge(config.model_copy(update={"mode": mode}), backend, tokenizer, shape.name)
            for mode in ("distribution", "generate")
        }
        sequences = [judges["distribution"].encode_pair(p)[0] for p in pairs]
        wanted = torch.tensor(judges["distribution"].digit_ids)
        runs = {
            ("kit", "distribution"): lambda: judges["distribution"].grade(pairs),
            ("kit", "generate"): lambda: judges["generate"].grade(pairs),
            ("raw padded", "distribution"): lambda: raw_padded(backend, sequences, wanted),
            ("raw unpadded", "distribution"): lambda: raw_unpadded(backend, sequences, wanted),
        }
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
        rows.append(
            {
                **common,
                "run": run,
                "mode": mode,
                "batch": 1 if run == "raw unpadded" else args.batch_size,
                "attention": attention,
                "prompt_tokens": round(tokens),
                "tokens_min": shortest,
                "tokens_max": longest,
                "pairs_per_s": rate,
                "tflops": achieved / 1e12,
                "share_of_peak": achieved / peak if peak else None,
                "share_of_ceiling": achieved / ceiling,
                "ceiling_tflops": ceiling / 1e12,
                "peak_memory_gib": memory,
            }
        )
    del model
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return rows


def print_table(rows: list[dict], device: str) -> None:
    import transformers

    print(f"\n{device_name(device)}; torch {torch.__version__}, transformers {transformers.__version__}")
    print(
        "| shape | run | mode | precision | attention | batch | tokens: mean (min-max) | pairs/s | TFLOP/s | "
        "share of peak | share of ceiling (TFLOP/s) | peak memory GiB |"
    )
    print("| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        peak = f"{r['share_of_peak']:.1%}" if r["share_of_peak"] is not None else "n/a"
        print(
            f"| {r['shape']} | {r['run']} | {r['mode']} | {r['precision']} | {r['attention']} | {r['batch']} | "
            f"{r['prompt_tokens']:,} ({r['tokens_min']:,}-{r['tokens_max']:,}) | "
            f"{r['pairs_per_s']:.2f} | {r['tflops']:.3g} | {peak} | {r['share_of_ceiling']:.1%} "
            f"({r['ceiling_tflops']:.3g}) | {r['peak_memory_gib']:.2f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", nargs="+", choices=sorted(SHAPES), default=["llama-70b", "llama-8b", "reranker"])
    parser.add_argument("--layers", type=int, default=16, help="decoder layers of the 70B shape (of 80)")
    parser.add_argument("--precision", nargs="+", choices=["bf16", "fp8"], default=["bf16"])
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8, help="pairs per batch (the reranker: docs per batch)")
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=8189,
        help="judge prompts are cut to this many tokens (the paper profile's max_model_len - 3)",
    )
    parser.add_argument(
        "--rerank-tokens",
        type=int,
        default=8192,
        help="reranker inputs are cut to this many tokens (the profiles' rerank max_length)",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=CLUEWEB22,
        help="documents whose lengths the prompts take (ClueWeb22 txt or JSONL; default: the bundled "
        "sample, whose documents are short: pass your ClueWeb22-B copy for the paper's lengths)",
    )
    parser.add_argument(
        "--packed-attention",
        default=None,
        help="attn_implementation of the reranker shape (packed runs need flash_attention_2 or "
        "flex_attention on a GPU; default: sdpa on a CPU, flex_attention on a GPU)",
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also run the kit with `compile: true` "
        "(torch.compile, dynamic shapes; compiled during the warm-up run, which is not timed)",
    )
    parser.add_argument(
        "--peak-tflops",
        type=float,
        help="the device's dense peak for this precision, where the built-in table (H100, H200) does not know it",
    )
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
