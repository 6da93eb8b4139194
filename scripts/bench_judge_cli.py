"""`researchy-subq judge` end to end, start-up included: the paper's prompt against its document-first variant on the
demo's first question (its sub-questions x its pool from the bundled sample), with a random-weight Llama saved to a
folder (512 wide, 8 layers, the Llama-3.3 chat template on the MiniLM tokenizer: no download).

    .venv/bin/python scripts/bench_judge_cli.py [--repeats 5] [--work DIR] [--mode distribution generate]

The inputs are made once (the kit's own questions, corpus, index, retrieve, rerank and pool stages with the demo
profile, the first train question kept). Each run is a fresh `researchy-subq judge --profile FILE` process into an
empty folder, timed by the wall clock around the whole command; the profiles are `paper` and `paper-document-first`
with the judge set to the transformers backend on the CPU and this model. Runs alternate between the two prompts and
the median is printed: on a machine shared with other work the spread says how much to trust it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

PROMPTS = {"paper": "crux-paper", "paper-document-first": "crux-paper-document-first"}


def make_inputs(work: Path) -> dict[str, Path]:
    """The demo's first train question, its sub-questions and its pool (the demo profile's stages)."""
    from generation.profiles.profile import load_profile
    from generation.sample import CLUEWEB22, RESEARCHY
    from generation.stages.corpus import CorpusStage, write_url_map
    from generation.stages.index import IndexStage
    from generation.stages.pool import PoolStage
    from generation.stages.questions import QuestionsStage
    from generation.stages.rerank import RerankStage
    from generation.stages.retrieve import RetrieveStage

    paths = {"subquestions": work / "questions", "candidates": work / "candidates", "index": work / "index"}
    if (work / "inputs.done").exists():
        return paths
    profile = load_profile("demo")
    QuestionsStage(None, work / "all-questions", [RESEARCHY["train"]]).run()
    questions = pq.read_table(work / "all-questions" / "questions.parquet")
    first = questions["qid"].to_pylist()[:1]
    paths["subquestions"].mkdir(parents=True, exist_ok=True)
    for name in ("questions.parquet", "subquestions.parquet"):
        table = pq.read_table(work / "all-questions" / name)
        pq.write_table(
            table.filter(pc.is_in(table["qid"], value_set=pc.cast(first, table["qid"].type))),
            paths["subquestions"] / name,
        )
    CorpusStage(None, work / "corpus", [CLUEWEB22]).run()
    write_url_map(work / "corpus")
    IndexStage(None, paths["index"], work / "corpus", threads=2).run()
    RetrieveStage(profile, work / "runs", paths["subquestions"], paths["index"]).run()
    RerankStage(profile, work / "runs", paths["subquestions"], work / "runs", paths["index"]).run()
    PoolStage(profile, paths["candidates"], paths["subquestions"], work / "runs", work / "corpus").run()
    (work / "inputs.done").write_text("")
    return paths


def save_model(folder: Path) -> Path:
    """A random Llama 512 wide with 8 layers (grouped-query attention, gated MLP), the Llama-3.3 chat template."""
    from builder.standins.models import save_tiny_causal_lm

    if not (folder / "config.json").exists():
        sizes = {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 8}
        save_tiny_causal_lm(
            folder, "LlamaConfig", "LlamaForCausalLM", 0, "llama3", max_position_embeddings=8192, **sizes
        )
    return folder


def write_profile(work: Path, base: str, model: Path, mode: str, batch_size: int, max_batch_tokens: int | None):
    """`base`'s judge on this model (transformers, CPU, float32), over the demo's bm25, rerank and pool sections (the
    ones the candidates were made with: the judge stage checks them)."""
    import yaml

    from generation.profiles.profile import load_profile

    demo = load_profile("demo")
    data = {
        "base": base,
        "name": f"bench-{base}",
        "description": f"{base}'s judge on a random Llama on the CPU, over the demo's pool",
        **{section: getattr(demo, section).model_dump(mode="json") for section in ("bm25", "rerank", "pool")},
        "judge": {
            "backend": "transformers",
            "model": str(model),
            "mode": mode,
            "device": "cpu",
            "dtype": "float32",
            "batch_size": batch_size,
            "max_batch_tokens": max_batch_tokens,
        },
    }
    path = work / f"{base}-{mode}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_judge_command(profile: Path, inputs: dict[str, Path], out: Path) -> tuple[float, float]:
    """Wall seconds of one `researchy-subq judge` process, from its start to its exit, and its CPU seconds (user +
    system, all its threads)."""
    shutil.rmtree(out, ignore_errors=True)
    command = [str(Path(sys.executable).parent / "researchy-subq"), "judge", "--profile", str(profile)]
    command += [f"--{k}={v}" for k, v in inputs.items()] + [f"--out={out}"]
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return seconds, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mode", nargs="+", default=["distribution"], choices=["distribution", "generate"])
    parser.add_argument("--batch-size", type=int, default=256, help="judge.batch_size (the paper profile's: 256)")
    parser.add_argument("--max-batch-tokens", type=int, help="judge.max_batch_tokens (default: none, as auto on a CPU)")
    parser.add_argument("--work", type=Path, help="keep the inputs and the model here (default: a temporary folder)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-judge-cli-"))
    work.mkdir(parents=True, exist_ok=True)
    inputs = make_inputs(work)
    model = save_model(work / "model")
    pairs = None
    rows = []
    for mode in args.mode:
        profiles = {b: write_profile(work, b, model, mode, args.batch_size, args.max_batch_tokens) for b in PROMPTS}
        seconds: dict[str, list[tuple[float, float]]] = {b: [] for b in PROMPTS}  # (wall s, CPU s) per run
        for repeat in range(args.repeats):
            for base, profile in profiles.items():
                seconds[base].append(run_judge_command(profile, inputs, work / "out" / base))
                wall, cpu = seconds[base][-1]
                print(
                    f"{mode} {base} run {repeat + 1}: {wall:.1f} s, {cpu:.1f} CPU s, load {os.getloadavg()[0]:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
        if pairs is None:
            pairs = pq.read_metadata(next((work / "out" / "paper").glob("judgments-*.parquet"))).num_rows
        for base in PROMPTS:
            rows.append((mode, base, seconds[base]))
    assert pairs is not None  # counted after the first mode's runs
    subqs = pq.read_table(inputs["subquestions"] / "subquestions.parquet").num_rows
    print(
        f"`researchy-subq judge`, one process a run, start-up included; {subqs} sub-questions x {pairs // subqs} "
        f"documents = {pairs} pairs; random Llama 512 wide, 8 layers, float32, CPU ({os.cpu_count()} cores); "
        f"batch_size {args.batch_size}, max_batch_tokens {args.max_batch_tokens}; median of {args.repeats}, "
        "alternating runs\n"
    )
    print(
        "| mode | profile (prompt) | wall s, each run | median wall s | pairs/s | median CPU s | paper / variant: wall, CPU |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for mode, base, runs in rows:
        wall, cpu = (statistics.median(r[k] for r in runs) for k in (0, 1))
        paper = next(r for m, b, r in rows if m == mode and b == "paper")
        paper_wall, paper_cpu = (statistics.median(r[k] for r in paper) for k in (0, 1))
        ratio = "-" if base == "paper" else f"{paper_wall / wall:.2f}x, {paper_cpu / cpu:.2f}x"
        print(
            f"| {mode} | `{base}` (`{PROMPTS[base]}`) | {', '.join(f'{r[0]:.1f}' for r in runs)} | {wall:.1f} | "
            f"{pairs / wall:.1f} | {cpu:.1f} | {ratio} |"
        )


if __name__ == "__main__":
    main()
