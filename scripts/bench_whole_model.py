"""The whole judge on one GPU, both prompts (document-first first): pairs/s, forwards, rows a long forward, tokens
computed, peak memory, and how far a sample of pairs' labels move between the kit's batched call and each pair
alone, per precision (fp8 per-tensor and per-row by default; bf16 when asked). Random weights of the real shape,
built layer by layer from the meta device (no download).

    python scripts/bench_whole_model.py --device cuda --out work/whole-model      (the whole Llama-3.3-70B shape)
    python scripts/bench_whole_model.py --tiny --out /tmp/whole-model             (a CPU, float32: the test's run)

Pairs are the judge stage's cross product: `--questions` x `--documents` (each `--words` words) x `--subquestions`.
Each prompt runs through the kit's `LLMJudge` and transformers backend in distribution mode, with the paper
profile's `batch_size` and `max_batch_tokens: auto` at `--gpu-memory-utilization` (on a CPU: the pair count alone),
timed after one warm-up. "Alone" is each of `--alone` sampled pairs' whole prompt in a forward of its own (one row,
no padding, no shared prefix). "Rows a long forward" is the most frequent row count of the forwards at least half as
long as the longest (a tail batch holds what is left, not what the budget chose): the prefix passes of the
document-first prompt, the batches of the paper prompt (the batch composition `plan` keys whole-model figures by).
FLOPs a pair are counted as `plan` counts them: the whole prompt; for the document-first prompt, 1/g of a
document's shared prefix plus the pair's suffix against it (generation/planning/document_first.py).

Each precision runs in a process of its own, one after the other, so a crash or an out-of-memory error loses that
precision only and no reference outlives it. Each row is written to OUT/whole_model.json (the rows, and
`whole_model` entries in the calibration file's format: generation/judging/calibration.py) as soon as it is
measured. A precision whose weights do not fit, or whose batch budget holds fewer than two prompts, is skipped, and
the table says why. The table is printed on stdout at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

PROMPTS = ("crux-paper-document-first", "crux-paper")
# name -> fp8 granularity (None: no fp8); float32 is the tiny CPU run's
PRECISIONS = {"fp8-per-tensor": "per-tensor", "fp8-per-row": "per-row", "bf16": None, "float32": None}
DEFAULT_PRECISIONS = ["fp8-per-tensor", "fp8-per-row"]  # bf16 of the 70B shape leaves one prompt a batch on an H200
WORDS = "honey bee colony varroa mite virus pesticide forage pollen nectar queen hive winter habitat climate".split()
RESULT = "whole_model.json"


def bench_pairs(questions: int, documents: int, subquestions: int, words: int, seed: int = 0):
    """By document (the document-first prompt's order) and by sub-question (the paper prompt's), the same pairs."""
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
    return {"crux-paper-document-first": by_document, "crux-paper": by_subquestion}


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


def stability(graded, judge, pairs, sample: int) -> dict:
    """Level flips and the largest |dP(level)| between the batched call and each of `sample` pairs alone (drawn with
    a fixed seed: each pair alone is a forward of its own, ~40% of a precision's time when every pair is checked)."""
    picked = sorted(random.Random(1).sample(range(len(pairs)), min(sample, len(pairs))))
    if not picked:
        return {"alone_checked": 0, "level_flips": None, "max_abs_dp": None}
    batched = [graded[i] for i in picked]
    single = alone(judge, [pairs[i] for i in picked])
    flips = sum(g.level != level for g, (_, level) in zip(batched, single))
    dp = max(max(abs(a - b) for a, b in zip(g.probs, probs)) for g, (probs, _) in zip(batched, single))
    return {"alone_checked": len(picked), "level_flips": flips, "max_abs_dp": dp}


def prompt_shape(judge, pairs, prompt: str, shape) -> dict:
    """Mean prompt tokens, and FLOPs a pair as `plan` counts them; for the document-first prompt also the shared
    prefix, the suffix and the pairs a document."""
    from generation.backends.prefix_groups import shared_prefix_length
    from generation.model_shapes import prompt_flops
    from generation.planning.document_first import Groups

    encoded = [judge.encode_pair(p)[0] for p in pairs]
    tokens = statistics.mean(len(ids) for ids in encoded)
    if prompt != "crux-paper-document-first":
        return {"prompt_tokens": tokens, "flops_per_pair": prompt_flops(shape, tokens)}
    by_document: dict[str, list[list[int]]] = {}
    for pair, ids in zip(pairs, encoded):
        by_document.setdefault(pair.document, []).append(ids)
    prefixes = [shared_prefix_length(group) for group in by_document.values()]
    prefix = statistics.mean(prefixes)
    suffix = statistics.mean(len(ids) - p for group, p in zip(by_document.values(), prefixes) for ids in group)
    groups = Groups(prefix, suffix, len(pairs) / len(by_document))
    return {
        "prompt_tokens": tokens,
        "prefix_tokens": prefix,
        "suffix_tokens": suffix,
        "pairs_per_document": groups.pairs_per_group,
        "flops_per_pair": groups.flops(shape, 0),
    }


def long_forward_rows(forwards: list[tuple[int, int]]) -> tuple[int, bool]:
    """(the rows of the batches the budget formed, whether only one batch had them). Among the forwards at least half
    as long as the longest, the most frequent row count, ties to the larger: a tail batch (what is left) or a batch's
    1-row pass over its prompts' common prefix does not set it. One such batch may itself be the tail: the pairs ran
    out before the budget did."""
    longest = max(length for _, length in forwards)
    long_rows = [rows for rows, length in forwards if length >= longest / 2]
    rows = max(set(long_rows), key=lambda r: (long_rows.count(r), r))
    return rows, long_rows.count(rows) == 1


def measure_prompt(model, tokenizer, shape, prompt: str, pairs, args) -> dict:
    from builder.standins.gpu_bench import timed
    from generation.backends.hf import TransformersBackend
    from generation.judging.judges import LLMJudge
    from generation.profiles.profile import load_profile

    config = load_profile("paper").judge.model_copy(
        update={
            "backend": "transformers",
            "model": "in-memory",
            "prompt": prompt,
            "mode": "distribution",
            "max_batch_tokens": args.max_batch_tokens,
            "gpu_memory_utilization": args.gpu_memory_utilization,
        }
    )
    backend = TransformersBackend.wrap(model, tokenizer, config)
    judge = LLMJudge(config, backend, tokenizer, shape.name)
    counted = prompt_shape(judge, pairs, prompt, shape)
    budget, longest = backend.budget.max_tokens, max(len(judge.encode_pair(p)[0]) for p in pairs)
    if budget is not None and budget < 2 * longest:
        return {"skipped": f"the batch budget, {budget:,} tokens, holds fewer than two {longest:,}-token prompts"}
    forwards: list[tuple[int, int]] = []

    def count(_, positional, named):
        ids = named["input_ids"] if "input_ids" in named else positional[0]
        forwards.append(tuple(ids.shape))

    hook = model.register_forward_pre_hook(count, with_kwargs=True)
    graded: list = []
    seconds, peak = timed(lambda: graded.__setitem__(slice(None), judge.grade(pairs)), args.device, args.repeats)
    hook.remove()
    per_run = forwards[: len(forwards) // (args.repeats + 1)]  # the warm-up computes what each repeat does
    rows, one_batch = long_forward_rows(per_run)
    return {
        "pairs": len(pairs),
        "pairs_per_s": len(pairs) / seconds,
        "forwards": len(per_run),
        "rows_per_long_forward": rows,
        "one_batch": one_batch,
        "budget_tokens": budget,
        "tokens_computed_per_pair": sum(r * length for r, length in per_run) / len(pairs),
        "peak_memory_gib": peak,
        **counted,
        **stability(graded, judge, pairs, args.alone),
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


def free_memory(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def run_precision(shape, precision: str, args, record: Path) -> None:
    """Every prompt at one precision, each row written as soon as it is measured."""
    from builder.standins.models import build_model, chat_tokenizer

    common = {"shape": shape.name, "layers": shape.layers, "precision": precision}
    reason = fits(shape, precision, args.device, args.gpu_memory_utilization)
    if reason:
        for prompt in PROMPTS:
            write_row(record, {**common, "prompt": prompt, "skipped": reason})
        return
    dtype = torch.float32 if precision == "float32" else torch.bfloat16
    granularity = PRECISIONS.get(precision)
    model = build_model(shape, args.device, dtype, fp8=granularity is not None, granularity=granularity or "per-tensor")
    tokenizer = chat_tokenizer(shape.family)
    pairs = bench_pairs(args.questions, args.documents, args.subquestions, args.words)
    for prompt in PROMPTS:
        free_memory(args.device)
        row = {**common, "prompt": prompt, **measure_prompt(model, tokenizer, shape, prompt, pairs[prompt], args)}
        write_row(record, row)
        if row.get("one_batch") and args.device.startswith("cuda"):
            print(f"warning: {precision} {prompt}: one batch of {row['rows_per_long_forward']} rows, which may be "
                  "the pairs running out, not the budget: more --documents measure the composition it forms",
                  file=sys.stderr)  # fmt: skip
        print(f"done: {precision} {prompt}", file=sys.stderr, flush=True)
    del model
    free_memory(args.device)


def code_version() -> str:
    """The kit's own commit: the git tree `generation` is imported from (not the one the command runs in), with
    "+changes" when its tracked files differ; the installed version when that is no git checkout."""
    import generation

    root = Path(generation.__file__).resolve().parents[1]

    def git(*arguments: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True)
        except OSError:
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    if git("rev-parse", "--show-toplevel") and Path(git("rev-parse", "--show-toplevel")).resolve() == root:
        changed = "+changes" if git("status", "--porcelain", "--untracked-files=no") else ""
        return f"{git('rev-parse', '--abbrev-ref', 'HEAD')} {git('rev-parse', '--short', 'HEAD')}{changed}"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"researchy-subq-judgments {version('researchy-subq-judgments')} (not a git checkout)"
    except PackageNotFoundError:
        return "code not recorded"


def calibration_entries(rows: list[dict], device: str, command: str, code: str, day: str) -> list[dict]:
    """The measured rows as the calibration file's `whole_model` entries (generation/judging/calibration.py)."""
    return [
        {
            "prompt": r["prompt"],
            "precision": "fp8" if r["precision"].startswith("fp8") else r["precision"],
            "fp8_granularity": PRECISIONS.get(r["precision"]) or "per-tensor",
            "backend": "transformers",
            "shape": r["shape"],
            "device": device,
            "measured": day,
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


def new_record(path: Path, device: str, command: str) -> None:
    day = time.strftime("%Y-%m-%d")
    base = {"device": device, "torch": torch.__version__, "command": command, "code": code_version(), "measured": day}
    write_json(path, {**base, "rows": [], "whole_model": []})


def write_row(path: Path, row: dict) -> None:
    """Adds one row (and its calibration entry) to the record, replacing the file atomically."""
    record = json.loads(path.read_text())
    record["rows"].append(row)
    record["whole_model"] = calibration_entries(
        record["rows"], record["device"], record["command"], record["code"], record["measured"]
    )
    write_json(path, record)


def write_json(path: Path, data: dict) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w") as f:
        f.write(json.dumps(data, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


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
        checked = "not checked" if not r["alone_checked"] else f"{r['level_flips']} of {r['alone_checked']}"
        dp = "-" if r["max_abs_dp"] is None else f"{r['max_abs_dp']:.3g}"
        lines.append(
            f"| {r['shape']} | {r['precision']} | {r['prompt']} | {r['pairs_per_s']:.2f} | {r['forwards']} | "
            f"{r['rows_per_long_forward']:.1f} | {r['tokens_computed_per_pair']:,.0f} | {r['peak_memory_gib']:.1f} | "
            f"{checked} | {dp} |"
        )
    return "\n".join(lines)


def parse(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="the tiny Llama shape on the CPU, float32 (the test)")
    parser.add_argument("--layers", type=int, default=80, help="decoder layers of the 70B shape (80: the whole)")
    parser.add_argument(
        "--precision",
        nargs="+",
        choices=list(PRECISIONS),
        help=f"default: {' '.join(DEFAULT_PRECISIONS)} (--tiny: float32)",
    )
    parser.add_argument("--questions", type=int, default=1)
    parser.add_argument("--documents", type=int, default=4)
    parser.add_argument("--subquestions", type=int, default=14)
    parser.add_argument("--words", type=int, default=2048, help="words a document (the paper profile's cut)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.95)
    parser.add_argument("--max-batch-tokens", default="auto", help="an int, or auto (from the GPU's free memory)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--alone", type=int, default=14, help="pairs sampled for the batched-vs-alone check (0: none)")
    parser.add_argument("--out", type=Path, required=True, help=f"folder for {RESULT}")
    parser.add_argument(
        "--calibration",
        type=Path,
        help="also write the bundled calibration with these figures in place of its own of the same setting and "
        "composition, named for this device, for `plan --calibration FILE`",
    )
    parser.add_argument("--append", action="store_true", help=argparse.SUPPRESS)  # a child process: add to OUT's rows
    args = parser.parse_args(argv)
    if args.max_batch_tokens != "auto":
        args.max_batch_tokens = int(args.max_batch_tokens)
    if not args.tiny and not args.device.startswith("cuda"):
        parser.error("the 70B shape runs on a CUDA GPU (fp8: compute capability >= 8.9); --tiny runs on a CPU")
    return args


def main(argv: list[str] | None = None) -> None:
    from builder.standins.gpu_bench import device_name
    from generation.model_shapes import LLAMA_33_70B, PUBLISHED, TINY

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    if args.tiny:
        args.device, shape, precisions = "cpu", TINY["tiny-llama"], args.precision or ["float32"]
    else:
        shape = PUBLISHED[LLAMA_33_70B]
        shape = shape if args.layers == shape.layers else shape.with_layers(args.layers)
        precisions = args.precision or DEFAULT_PRECISIONS
    device = device_name(args.device)
    record = args.out / RESULT
    if not args.append:
        args.out.mkdir(parents=True, exist_ok=True)
        new_record(record, device, "scripts/bench_whole_model.py " + " ".join(argv))
    if len(precisions) == 1:
        run_precision(shape, precisions[0], args, record)
    else:
        for precision in precisions:  # each in a process of its own
            others = [a for i, a in enumerate(argv) if a != "--precision" and not is_precision_value(argv, i)]
            child = [sys.executable, __file__, *others, "--precision", precision, "--append"]
            code = subprocess.run(child).returncode
            if code != 0:
                done = {r["prompt"] for r in json.loads(record.read_text())["rows"] if r["precision"] == precision}
                for prompt in (p for p in PROMPTS if p not in done):
                    why = f"its process ended with exit code {code} (its stderr above)"
                    write_row(record, {"shape": shape.name, "layers": shape.layers, "precision": precision,
                                       "prompt": prompt, "skipped": why})  # fmt: skip
    if args.append:
        return
    written = json.loads(record.read_text())
    if args.calibration:
        from generation.judging.calibration import REFERENCE, Calibration

        Calibration.load(REFERENCE).add_whole_model(written["whole_model"], device).save(args.calibration)
        print(f"calibration -> {args.calibration}", file=sys.stderr)
    print(table(written["rows"], device))
    print(f"rows -> {record}", file=sys.stderr)


def is_precision_value(argv: list[str], i: int) -> bool:
    """Whether argv[i] is one of the values after --precision."""
    start = max((j for j in range(i) if argv[j] == "--precision"), default=None)
    return start is not None and all(not a.startswith("--") for a in argv[start + 1 : i + 1])


if __name__ == "__main__":
    main()
