"""A document-first judge eager, with `compile: suffix` (its suffix forwards compiled) and with `compile: true`
(every forward compiled), on a random-weight Llama shape built in memory (no download): seconds of the first grade
(the compile included), of a grade of other documents (new batch shapes: what recompiles), and of a repeat of the
first (steady); the graphs torch.compile made after each; the largest difference of a digit probability (or the
answers that differ, in generate mode) from eager.

    python scripts/bench_compiled_suffixes.py --threads 1                       (CPU: tiny-llama, distribution)
    python scripts/bench_compiled_suffixes.py --device cuda --shape llama-70b --layers 16 --words 2048 --fp8

Each setting runs in a process of its own (its own model, its own torch.compile caches). The first pairs are
`--documents` documents x `--subquestions` sub-questions; the other pairs are as many documents of other lengths,
each with 1 to `--subquestions` sub-questions. The judge is the paper profile's with `prompt:
crux-paper-document-first` on the transformers backend (`generation/backends/compiled_suffixes.py`).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time

import torch

SETTINGS = ("false", "suffix", "true")
WORDS = "honey bee colony varroa mite virus pesticide forage pollen nectar queen drone worker hive winter".split()


def pairs_of(args, seed: int, varied: bool):
    from generation.judging.judges import Pair

    rng = random.Random(seed)
    pairs = []
    for d in range(args.documents):
        document = " ".join(
            rng.choices(WORDS, k=args.words if not varied else rng.randint(args.words // 2, args.words))
        )
        count = rng.randint(1, args.subquestions) if varied else args.subquestions
        pairs += [
            Pair(f"How does {rng.choice(WORDS)} change {rng.choice(WORDS)} in {d}.{k}?", document) for k in range(count)
        ]
    return pairs


def measure(args, setting: str) -> dict:
    """One setting in this process."""
    from torch._dynamo.utils import counters

    from builder.standins.gpu_bench import synchronize
    from builder.standins.models import build_model, chat_tokenizer
    from generation.backends.hf import TransformersBackend
    from generation.judging.judges import LLMJudge
    from generation.model_shapes import LLAMA_31_8B, LLAMA_33_70B, PUBLISHED, TINY
    from generation.profiles.profile import load_profile

    shape = {
        "tiny-llama": TINY["tiny-llama"],
        "llama-8b": PUBLISHED[LLAMA_31_8B],
        "llama-70b": PUBLISHED[LLAMA_33_70B].with_layers(args.layers),
    }[args.shape]
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    model = build_model(shape, args.device, dtype, fp8=args.fp8)
    compile = {"false": False, "true": True, "suffix": "suffix"}[setting]
    update = {"backend": "transformers", "model": "in-memory", "prompt": "crux-paper-document-first", "mode": args.mode}
    config = load_profile("paper").judge.model_copy(
        update={**update, "batch_size": args.batch_size, "compile": compile}
    )
    tokenizer = chat_tokenizer(shape.family)
    judge = LLMJudge(config, TransformersBackend.wrap(model, tokenizer, config), tokenizer, shape.name)
    first, other = pairs_of(args, 0, False), pairs_of(args, 1, True)

    def seconds(pairs):
        synchronize(args.device)
        start = time.perf_counter()
        with torch.inference_mode():
            grades = judge.grade(pairs)
        synchronize(args.device)
        return time.perf_counter() - start, grades

    first_s, grades = seconds(first)
    graphs_first = counters["stats"]["unique_graphs"]
    other_s, other_grades = seconds(other)
    steady = statistics.median(seconds(first)[0] for _ in range(args.repeats))
    answers = [(g.probs, g.raw) for g in grades + other_grades]
    return {
        "setting": setting,
        "shape": shape.name,
        "pairs": len(first),
        "first_s": first_s,
        "other_s": other_s,
        "steady_pairs_per_s": len(first) / steady,
        "graphs_first": graphs_first,
        "graphs_after": counters["stats"]["unique_graphs"],
        "answers": answers,
    }


def differences(row: dict, eager: dict) -> str:
    if row is eager:
        return "-"
    if row["answers"][0][0] is None:  # generate mode: answers, not probabilities
        return f"{sum(a[1] != b[1] for a, b in zip(row['answers'], eager['answers']))} answers differ"
    return f"{max(abs(x - y) for a, b in zip(row['answers'], eager['answers']) for x, y in zip(a[0], b[0])):.1e}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", default="tiny-llama", choices=["tiny-llama", "llama-8b", "llama-70b"])
    parser.add_argument("--layers", type=int, default=16, help="decoder layers of the 70B shape (of 80)")
    parser.add_argument("--fp8", action="store_true", help="torchao's float8 on the decoder's linear layers (CUDA)")
    parser.add_argument("--mode", default="distribution", choices=["distribution", "generate"])
    parser.add_argument("--documents", type=int, default=4)
    parser.add_argument("--subquestions", type=int, default=6)
    parser.add_argument("--words", type=int, default=200, help="words a document (the other pairs: half to all)")
    parser.add_argument("--batch-size", type=int, default=16, help="pairs per batch (the judge's batch_size)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, help="torch threads (1 keeps a shared machine's noise down)")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--one", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.one:
        print(json.dumps(measure(args, args.one)))
        return
    from builder.standins.gpu_bench import device_name

    own = list(argv if argv is not None else sys.argv[1:])
    rows = []
    for setting in dict.fromkeys(["false", *args.settings]):  # eager first: the others are compared with it
        done = subprocess.run([sys.executable, __file__, *own, "--one", setting], check=True, stdout=subprocess.PIPE)
        rows.append(json.loads(done.stdout.decode().strip().splitlines()[-1]))
        print(f"done: compile {setting}", file=sys.stderr, flush=True)
    print(
        f"{device_name(args.device)}; torch {torch.__version__}; {rows[0]['shape']}, {args.mode}, "
        f"{args.documents} documents x {args.subquestions} sub-questions of {args.words} words, batch {args.batch_size}"
    )
    print()
    print("| compile | first grade s | other documents s | steady pairs/s | graphs: first, after other | vs eager |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for row in rows:
        print(
            f"| {row['setting']} | {row['first_s']:.1f} | {row['other_s']:.1f} | {row['steady_pairs_per_s']:.2f} | "
            f"{row['graphs_first']}, {row['graphs_after']} | {differences(row, rows[0])} |"
        )


if __name__ == "__main__":
    main()
