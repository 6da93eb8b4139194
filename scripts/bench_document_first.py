"""The paper's prompt against its document-first variant on the same pairs: tokens the model computes per pair,
seconds per pair, pairs/s and peak memory, for random-weight Llama-shaped models built in memory (no download).

    python scripts/bench_document_first.py                                  (CPU: two small shapes, the sample's lengths)
    python scripts/bench_document_first.py --device cuda --shape llama-70b llama-8b --layers 16 --words 2048
    python scripts/bench_document_first.py --vllm      (in .venv-vllm: the share of prompt tokens vLLM found cached)

Pairs are the cross product the judge stage makes: `--questions` questions, each with `--documents` documents and
`--subquestions` sub-questions (about 14 in the paper: 1,288,976 sub-questions over ~90k questions). Documents take
the word counts of `--corpus` (the bundled sample by default: short pages) cut at the paper profile's
`context_words` (2,048), or all `--words` long. Both prompts run through the kit's `LLMJudge` and transformers
backend with the Llama-3.3 chat template; `crux-paper` runs each prompt whole (its shared instruction once per batch),
`crux-paper-document-first` runs each document's prefix once and its sub-questions' suffixes against it
(generation/backends/prefix_groups.py). "Tokens computed" counts the positions every forward runs, padding included.
Each (shape, prompt, mode) runs in a process of its own, so its peak memory is its own: the GPU allocator's peak on a
GPU, the process's resident high-water mark on a CPU (the model's weights included in both).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import torch

PROMPTS = ("crux-paper", "crux-paper-document-first")
WORDS = (
    "honey bee colony varroa mite virus pesticide neonicotinoid forage pollen nectar queen drone worker hive "
    "winter loss habitat climate nutrition pathogen fungicide beekeeper apiary swarm brood wax comb"
).split()


def shapes(layers: int) -> dict:
    from generation.model_shapes import LLAMA_31_8B, LLAMA_33_70B, PUBLISHED, TINY, Shape

    return {
        "tiny-llama": TINY["tiny-llama"],
        # a small Llama layout (grouped-query attention, gated MLP) that a CPU runs in seconds per pair
        "small-llama": Shape("small-llama", "llama", 512, 1536, 4, 8, 2, 64, 30600, False, 500000.0, 1e-5),
        "llama-8b": PUBLISHED[LLAMA_31_8B],
        "llama-70b": PUBLISHED[LLAMA_33_70B].with_layers(layers),
    }


def bench_pairs(args):
    """The judge stage's cross product, by sub-question (the paper's layout) or by document (the variant's)."""
    from builder.standins.gpu_bench import document_words
    from generation.judging.judges import Pair

    rng = random.Random(args.seed)
    count = args.questions * args.documents
    lengths = [args.words] * count if args.words else document_words(args.corpus, count, 2048, seed=args.seed)
    questions = []
    for q in range(args.questions):
        docs = [" ".join(rng.choices(WORDS, k=n)) for n in lengths[q * args.documents : (q + 1) * args.documents]]
        subqs = [f"How does {rng.choice(WORDS)} change {rng.choice(WORDS)} in case {q}.{k}?" for k in range(14)]
        questions.append((docs, subqs[: args.subquestions]))
    by_subquestion = [Pair(s, d) for docs, subqs in questions for s in subqs for d in docs]
    by_document = [Pair(s, d) for docs, subqs in questions for d in docs for s in subqs]
    return by_subquestion, by_document


def measure(args) -> dict:
    """One (shape, prompt, mode) in this process."""
    from builder.standins.gpu_bench import device_name, timed
    from builder.standins.models import build_model, chat_tokenizer
    from generation.backends.hf import TransformersBackend
    from generation.judging.judges import LLMJudge
    from generation.profiles.profile import load_profile

    shape = shapes(args.layers)[args.shape]
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    model = build_model(shape, args.device, dtype)
    tokenizer = chat_tokenizer(shape.family)
    config = load_profile("paper").judge.model_copy(
        update={
            "backend": "transformers",
            "model": "in-memory",
            "prompt": args.prompt,
            "mode": args.mode,
            "batch_size": args.batch_size,
        }
    )
    backend = TransformersBackend.wrap(model, tokenizer, config)
    judge = LLMJudge(config, backend, tokenizer, shape.name)
    by_subquestion, by_document = bench_pairs(args)
    pairs = by_document if judge.prompt.document_first else by_subquestion
    computed = []
    model.register_forward_pre_hook(
        lambda _, a, kw: computed.append((kw.get("input_ids") if "input_ids" in kw else a[0]).numel()),
        with_kwargs=True,
    )
    cpu_start = time.process_time()
    seconds, peak = timed(lambda: judge.grade(pairs), args.device, args.repeats)
    cpu = (time.process_time() - cpu_start) / (args.repeats + 1)  # all threads' CPU seconds: steady on a busy machine
    per_run = sum(computed) / (args.repeats + 1)  # the warm-up and each repeat compute the same
    encoding, _ = timed(lambda: judge._encode_all(pairs), "cpu", args.repeats)  # the prompts' tokenization alone
    prompt_tokens = sum(len(judge.encode_pair(p)[0]) for p in pairs)
    return {
        "shape": shape.name,
        "prompt": args.prompt,
        "mode": args.mode,
        "pairs": len(pairs),
        "prompt_tokens_per_pair": prompt_tokens / len(pairs),
        "computed_per_pair": per_run / len(pairs),
        "seconds_per_pair": seconds / len(pairs),
        "cpu_seconds_per_pair": cpu / len(pairs),
        "encode_seconds_per_pair": encoding / len(pairs),
        "pairs_per_s": len(pairs) / seconds,
        "peak_memory_gib": peak,
        "device": device_name(args.device),
    }


def vllm_rows(args) -> list[dict]:
    """Both prompts through the kit's vLLM adapter (a tiny saved Llama: vLLM loads from a folder), with automatic
    prefix caching: the share of prompt tokens each found cached (`RequestOutput.num_cached_tokens`)."""
    import tempfile

    from transformers import AutoTokenizer

    from builder.standins.models import save_vllm_chat_model
    from generation.backends.vllm_adapter import VllmJudgeBackend
    from generation.judging.judges import LLMJudge
    from generation.profiles.profile import load_profile

    folder = Path(tempfile.mkdtemp(prefix="bench-vllm-"))
    save_vllm_chat_model(folder, "llama3", 5, 2048)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    by_subquestion, by_document = bench_pairs(args)
    rows = []
    for mode in args.mode:
        for prompt, pairs in zip(PROMPTS, (by_subquestion, by_document)):
            config = load_profile("paper").judge.model_copy(
                update={"model": str(folder), "prompt": prompt, "mode": mode, "dtype": "float32", "max_model_len": 2048}
            )
            config = config.model_copy(update={"tensor_parallel_size": 1, "engine_args": {"enforce_eager": True}})
            backend = VllmJudgeBackend(str(folder), config)
            judge = LLMJudge(config, backend, tokenizer, "tiny")
            start = time.perf_counter()
            judge.grade(pairs)
            seconds = time.perf_counter() - start
            rows.append(
                {
                    "mode": mode,
                    "prompt": prompt,
                    "pairs": len(pairs),
                    "prompt_tokens": backend.prompt_tokens,
                    "cached_tokens": backend.cached_tokens,
                    "block": backend.llm.llm_engine.vllm_config.cache_config.block_size,
                    "pairs_per_s": len(pairs) / seconds,
                }
            )
            del judge, backend
    return rows


def vllm_table(rows: list[dict], args) -> str:
    import vllm

    lines = [
        f"vLLM {vllm.__version__} ({'CPU build' if not torch.cuda.is_available() else 'GPU'}), a tiny random Llama "
        f"(Llama-3.3 chat template); {args.questions} questions x {args.documents} documents x {args.subquestions} "
        "sub-questions",
        "",
        "| mode | prompt | pairs | prompt tokens | found cached | share cached | block | pairs/s |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['prompt']} | {r['pairs']:,} | {r['prompt_tokens']:,} | {r['cached_tokens']:,} | "
            f"{r['cached_tokens'] / r['prompt_tokens']:.1%} | {r['block']} | {r['pairs_per_s']:.1f} |"
        )
    return "\n".join(lines)


def table(rows: list[dict], args) -> str:
    import transformers

    lines = [
        f"{rows[0]['device']}; torch {torch.__version__}, transformers {transformers.__version__}; "
        f"{args.questions} questions x {args.documents} documents x {args.subquestions} sub-questions; documents "
        + (f"of {args.words} words" if args.words else f"of {args.corpus}'s lengths, cut at 2,048 words"),
        "",
        "| shape | mode | prompt | pairs | prompt tokens / pair | tokens computed / pair | s / pair | CPU s / pair | "
        "of which tokenizing | pairs/s | peak memory GiB | computed: paper / variant | "
        + ("CPU s: paper / variant |" if args.device == "cpu" else "time: paper / variant |"),
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    clock = "cpu_seconds_per_pair" if args.device == "cpu" else "seconds_per_pair"  # a CPU ratio on a CPU
    for row in rows:
        paper = next(r for r in rows if (r["shape"], r["mode"], r["prompt"]) == (row["shape"], row["mode"], PROMPTS[0]))
        ratios = (
            f"{paper['computed_per_pair'] / row['computed_per_pair']:.1f}x | {paper[clock] / row[clock]:.1f}x"
            if row is not paper
            else "- | -"
        )
        lines.append(
            f"| {row['shape']} | {row['mode']} | {row['prompt']} | {row['pairs']:,} | "
            f"{row['prompt_tokens_per_pair']:,.0f} | {row['computed_per_pair']:,.0f} | {row['seconds_per_pair']:.4f} | "
            f"{row['cpu_seconds_per_pair']:.4f} | {row['encode_seconds_per_pair']:.4f} | "
            f"{row['pairs_per_s']:.2f} | {row['peak_memory_gib']:.2f} | {ratios} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", nargs="+", default=["tiny-llama", "small-llama"], choices=sorted(shapes(16)))
    parser.add_argument("--layers", type=int, default=16, help="decoder layers of the 70B shape (of 80)")
    parser.add_argument("--mode", nargs="+", default=["distribution", "generate"], choices=["distribution", "generate"])
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--documents", type=int, default=6, help="pool documents per question (18.9 in the paper)")
    parser.add_argument("--subquestions", type=int, default=14, choices=range(1, 15), metavar="1..14")
    parser.add_argument("--words", type=int, help="every document this many words (default: the corpus's lengths)")
    parser.add_argument("--corpus", type=Path, help="documents whose lengths are taken (default: the bundled sample)")
    parser.add_argument("--batch-size", type=int, default=16, help="pairs per batch (the judge's batch_size)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--vllm", action="store_true", help="vLLM's prefix cache hits instead (needs vllm)")
    parser.add_argument("--one", nargs=3, metavar=("SHAPE", "PROMPT", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.corpus is None:
        from generation.sample import CLUEWEB22

        args.corpus = CLUEWEB22
    if args.vllm:
        print(vllm_table(vllm_rows(args), args))
        return
    if args.one:
        args.shape, args.prompt, args.mode = args.one
        print(json.dumps(measure(args)))
        return
    rows = []
    own = [a for a in (argv if argv is not None else sys.argv[1:])]
    for shape in args.shape:
        for mode in args.mode:
            for prompt in PROMPTS:
                done = subprocess.run(
                    [sys.executable, __file__, *own, "--one", shape, prompt, mode],
                    check=True,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"done: {shape} {mode} {prompt}", file=sys.stderr, flush=True)
    print(table(rows, args))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
