"""The whole judge on one GPU, both prompts: pairs/s, forwards, tokens computed, peak memory, and how far each
pair's label moves between the kit's batched call and the pair alone, per precision (bf16, fp8 per-tensor, fp8
per-row). Random weights of the real shape, built layer by layer from the meta device (no download).

    python scripts/bench_whole_model.py --device cuda --out work/whole-model      (the whole Llama-3.3-70B shape)
    python scripts/bench_whole_model.py --tiny --out /tmp/whole-model             (a CPU, float32: the test's run)

Pairs are the judge stage's cross product: `--questions` x `--documents` (each `--words` words) x `--subquestions`.
Each prompt runs through the kit's `LLMJudge` and transformers backend in distribution mode, with the paper
profile's `batch_size` and `max_batch_tokens: auto` at `--gpu-memory-utilization` (on a CPU: the pair count alone),
timed after one warm-up. "Alone" is each pair's whole prompt in a forward of its own (one row, no padding, no shared
prefix). "Rows a long forward" is the mean row count of the forwards at least half as long as the longest: the
prefix passes of the document-first prompt, the batches of the paper prompt (the batch composition `plan` keys its
whole-model figures by). A precision whose weights do not fit the device is skipped, and the table says so.

It writes OUT/whole_model.json (the rows, and `whole_model` entries in the calibration file's format:
generation/judging/calibration.py) and prints a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

PROMPTS = ("crux-paper", "crux-paper-document-first")
PRECISIONS = {"bf16": None, "fp8-per-tensor": "per-tensor", "fp8-per-row": "per-row"}  # name -> fp8 granularity
WORDS = "honey bee colony varroa mite virus pesticide forage pollen nectar queen hive winter habitat climate".split()


def bench_pairs(questions: int, documents: int, subquestions: int, words: int, seed: int = 0):
    """By sub-question (the paper prompt's order) and by document (the variant's), the same pairs."""
    from generation.judging.judges import Pair

    rng = random.Random(seed)
    by_subquestion, by_document = [], []
    for q in range(questions):
        docs = [" ".join(rng.choices(WORDS, k=words)) for _ in range(documents)]
        subqs = [
            f"How does {rng.choice(WORDS)} change {rng.choice(WORDS)} in case {q}.{k}?" for k in range(subquestions)
        ]
        by_subquestion += [Pair(s, d) for s in subqs for d in docs]
        by_document += [Pair(s, d) for d in docs for s in subqs]
    return by_subquestion, by_document


def alone(judge, pairs) -> list[tuple[list[float], int]]:
    """Each pair's whole prompt in its own forward: its digit distribution and level."""
    from generation.judging.judges import distribution

    backend, out = judge.backend, []
    wanted = torch.tensor(judge.digit_ids)
    with torch.inference_mode():
        for pair in pairs:
            ids = torch.tensor([judge.encode_pair(pair)[0]], device=backend.input_device)
            logits = backend.model(input_ids=ids, logits_to_keep=1).logits[:, -1].float()
            row = torch.log_softmax(logits, -1)[0, wanted.to(logits.device)].tolist()
            probs, level, _ = distribution(row, judge.prompt.levels)
            out.append((probs, level))
    return out


def stability(batched, single) -> dict:
    flips = sum(g.level != level for g, (_, level) in zip(batched, single))
    dp = max(max(abs(a - b) for a, b in zip(g.probs, probs)) for g, (probs, _) in zip(batched, single))
    return {"level_flips": flips, "argmax_equal": len(batched) - flips, "max_abs_dp": dp}


def measure_prompt(model, tokenizer, shape, prompt: str, pairs, args) -> dict:
    from builder.standins.gpu_bench import timed
    from generation.backends.hf import TransformersBackend
    from generation.judging.judges import LLMJudge
    from generation.model_shapes import prompt_flops
    from generation.profiles import load_profile

    paper = load_profile("paper").judge
    config = paper.model_copy(
        update={"backend": "transformers", "model": "in-memory", "prompt": prompt, "mode": "distribution"}
    )
    backend = TransformersBackend.wrap(
        model,
        tokenizer,
        batch_size=paper.batch_size,
        max_batch_tokens=args.max_batch_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )
    judge = LLMJudge(config, backend, tokenizer, shape.name)
    forwards: list[tuple[int, int]] = []

    def count(_, positional, named):
        ids = named["input_ids"] if "input_ids" in named else positional[0]
        forwards.append(tuple(ids.shape))

    hook = model.register_forward_pre_hook(count, with_kwargs=True)
    graded: list = []
    seconds, peak = timed(lambda: graded.__setitem__(slice(None), judge.grade(pairs)), args.device, args.repeats)
    hook.remove()
    runs = args.repeats + 1  # the warm-up computes what each repeat does
    per_run = forwards[: len(forwards) // runs]
    longest = max(length for _, length in per_run)
    long_rows = [rows for rows, length in per_run if length >= longest / 2]
    prompt_tokens = statistics.mean(len(judge.encode_pair(p)[0]) for p in pairs)
    computed = sum(rows * length for rows, length in per_run) / len(pairs)
    return {
        "prompt": prompt,
        "pairs": len(pairs),
        "pairs_per_s": len(pairs) / seconds,
        "forwards": len(per_run),
        "rows_per_long_forward": statistics.mean(long_rows),
        "prompt_tokens": prompt_tokens,
        "tokens_computed_per_pair": computed,
        "flops_per_pair": prompt_flops(shape, prompt_tokens),
        "peak_memory_gib": peak,
        **stability(graded, alone(judge, pairs)),
    }


def fits(shape, precision: str, device: str, share: float) -> str | None:
    """None when the weights fit the device at `share`; else why not."""
    if not device.startswith("cuda"):
        return None
    weights = shape.weight_bytes("fp8" if precision.startswith("fp8") else "bf16")
    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    if weights > total * share:
        return f"{weights / 2**30:.1f} GiB of weights do not fit {share} of {total / 2**30:.1f} GiB: use --layers"
    return None


def run_precision(shape, precision: str, args) -> list[dict]:
    from builder.standins.models import build_model, chat_tokenizer

    common = {"shape": shape.name, "layers": shape.layers, "precision": precision}
    reason = fits(shape, precision, args.device, args.gpu_memory_utilization)
    if reason:
        return [{**common, "prompt": p, "skipped": reason} for p in PROMPTS]
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    granularity = PRECISIONS.get(precision)
    model = build_model(shape, args.device, dtype, fp8=granularity is not None, granularity=granularity or "per-tensor")
    tokenizer = chat_tokenizer(shape.family)
    by_subquestion, by_document = bench_pairs(args.questions, args.documents, args.subquestions, args.words)
    rows = []
    for prompt, pairs in zip(PROMPTS, (by_subquestion, by_document)):
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        rows.append({**common, **measure_prompt(model, tokenizer, shape, prompt, pairs, args)})
        print(f"done: {precision} {prompt}", file=sys.stderr, flush=True)
    del model
    return rows


def calibration_entries(rows: list[dict], device: str, command: str) -> list[dict]:
    """The rows as the calibration file's `whole_model` entries (generation/judging/calibration.py WholeModel)."""
    try:
        code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        code = ""
    return [
        {
            "prompt": r["prompt"],
            "precision": "fp8" if r["precision"].startswith("fp8") else r["precision"],
            "fp8_granularity": PRECISIONS.get(r["precision"]) or "per-tensor",
            "shape": r["shape"],
            "device": device,
            "measured": time.strftime("%Y-%m-%d"),
            "code": code,
            "pairs_per_s": round(r["pairs_per_s"], 4),
            "rows_per_forward": round(r["rows_per_long_forward"], 2),
            "prompt_tokens": round(r["prompt_tokens"]),
            "flops_per_pair": r["flops_per_pair"],
            "source": command,
        }
        for r in rows
        if "skipped" not in r
    ]


def with_figures(entries: list[dict]):
    """The bundled calibration, its whole-model figures of these entries' prompt, precision, granularity and
    composition replaced by them."""
    from generation.judging.calibration import REFERENCE, Calibration

    def key(e):
        return e["prompt"], e["precision"], e.get("fp8_granularity", "per-tensor"), e["rows_per_forward"]

    calibration = Calibration.load(REFERENCE)
    replaced = {key(e) for e in entries}
    calibration.whole_model = [e for e in calibration.whole_model if key(e) not in replaced] + entries
    return calibration


def table(rows: list[dict], device: str) -> str:
    lines = [
        f"{device}; torch {torch.__version__}",
        "",
        "| shape | precision | prompt | pairs/s | forwards | rows a long forward | tokens computed a pair | "
        "peak GiB | level flips (alone vs batched) | max abs dP |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['shape']} | {r['precision']} | {r['prompt']} | skipped: {r['skipped']} | | | | | | |")
            continue
        lines.append(
            f"| {r['shape']} | {r['precision']} | {r['prompt']} | {r['pairs_per_s']:.2f} | {r['forwards']} | "
            f"{r['rows_per_long_forward']:.1f} | {r['tokens_computed_per_pair']:,.0f} | {r['peak_memory_gib']:.1f} | "
            f"{r['level_flips']} of {r['pairs']} | {r['max_abs_dp']:.3g} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from builder.standins.gpu_bench import device_name
    from generation.model_shapes import LLAMA_33_70B, PUBLISHED, TINY

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="the tiny Llama shape on the CPU, float32 (the test)")
    parser.add_argument("--layers", type=int, default=80, help="decoder layers of the 70B shape (80: the whole)")
    parser.add_argument("--precision", nargs="+", choices=sorted(PRECISIONS), default=list(PRECISIONS))
    parser.add_argument("--questions", type=int, default=1)
    parser.add_argument("--documents", type=int, default=4)
    parser.add_argument("--subquestions", type=int, default=14)
    parser.add_argument("--words", type=int, default=2048, help="words a document (the paper profile's cut)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.95)
    parser.add_argument("--max-batch-tokens", default="auto", help="an int, or auto (from the GPU's free memory)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True, help="folder for whole_model.json")
    parser.add_argument(
        "--calibration",
        type=Path,
        help="also write the bundled calibration with these figures in place of its own of the same prompt, "
        "precision and composition, for `plan --calibration FILE`",
    )
    args = parser.parse_args(argv)
    if args.max_batch_tokens != "auto":
        args.max_batch_tokens = int(args.max_batch_tokens)
    if args.tiny:
        args.device, shape, precisions = "cpu", TINY["tiny-llama"], ["float32"]
    else:
        shape = PUBLISHED[LLAMA_33_70B]
        shape = shape if args.layers == shape.layers else shape.with_layers(args.layers)
        precisions = args.precision
        if not args.device.startswith("cuda"):
            parser.error("the 70B shape runs on a CUDA GPU (fp8: compute capability >= 8.9); --tiny runs on a CPU")
    rows = []
    for precision in precisions:
        rows += run_precision(shape, precision, args)
    device = device_name(args.device)
    command = "scripts/bench_whole_model.py " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"device": device, "torch": torch.__version__, "command": command, "rows": rows}
    record["whole_model"] = calibration_entries(rows, device, command)
    (args.out / "whole_model.json").write_text(json.dumps(record, indent=1) + "\n")
    if args.calibration:
        with_figures(record["whole_model"]).save(args.calibration)
        print(f"calibration -> {args.calibration}", file=sys.stderr)
    print(table(rows, device))
    print(f"rows -> {args.out / 'whole_model.json'}", file=sys.stderr)


if __name__ == "__main__":
    main()
