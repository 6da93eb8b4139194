"""Judge throughput: the kit's generate and distribution modes against a raw one-step loop, on tiny random-weight
Llama and Qwen3 models carrying their published chat templates (tests/conftest.py builds them).

    .venv/bin/python scripts/bench_judge.py --backend transformers
    .venv-vllm/bin/python scripts/bench_judge.py --backend vllm      (`make bench-judge` runs both)

Rows, per model: the kit (`LLMJudge.grade` on `Pair`s: prompt building, chat template, token cut, backend, parsing)
in each mode, and the raw loop on the kit's own token ids: transformers `model(..., logits_to_keep=1)` over the
same length-sorted left-padded batches; vLLM `LLM.generate(max_tokens=1, logprob_token_ids=digits)`. Runs are
interleaved, the median of `--repeats` is printed, as pairs per wall second and per CPU second of this process (all
its threads; on a shared machine the CPU time is the steadier measure, so the ratios use it); vLLM's prefix cache is reset before each run, so every run pays
for its own prefixes (the pairs of one sub-question share instruction + sub-question).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from generation.judging.judges import TokenBackend

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

FAMILIES = {"llama3": ("LlamaConfig", "LlamaForCausalLM"), "qwen3": ("Qwen3Config", "Qwen3ForCausalLM")}
MAX_MODEL_LEN = 2048
WORDS = (
    "honey bee colony varroa mite virus pesticide neonicotinoid forage pollen nectar queen drone worker hive "
    "winter loss habitat climate nutrition pathogen fungicide beekeeper apiary swarm brood wax comb"
).split()


def make_pairs(n_subquestions: int, n_documents: int, seed: int = 0):
    """Sub-question-major pairs (the judge's layout), documents of 150-600 words."""
    from generation.judging.judges import Pair

    rng = random.Random(seed)
    documents = [" ".join(rng.choices(WORDS, k=rng.randint(150, 600))) for _ in range(n_documents)]
    questions = [f"Why does {rng.choice(WORDS)} affect {rng.choice(WORDS)} number {i}?" for i in range(n_subquestions)]
    return [Pair(q, d) for q in questions for d in documents]


def judge_config(model: Path, backend: str, mode: str, batch_size: int):
    from generation.profiles.profile import load_profile

    return load_profile("paper").judge.model_copy(
        update={
            "backend": backend,
            "model": str(model),
            "mode": mode,
            "dtype": "float32",
            "tensor_parallel_size": 1,
            "max_model_len": MAX_MODEL_LEN,
            "chat_template": True,
            "batch_size": batch_size,
            "device": "cpu",
        }
    )


def raw_transformers(backend, sequences, token_ids):
    """The floor: one forward per length-sorted batch, the LM head on the last position only."""
    import torch

    from generation.backends.hf import left_pad

    wanted = torch.tensor(token_ids)
    with torch.inference_mode():
        for _, batch in backend._batches(sequences):
            ids, mask, pos = left_pad(batch, backend.pad_id)
            logits = backend.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits
            torch.log_softmax(logits[:, -1, :].float(), dim=-1)[:, wanted]


def raw_vllm(backend, sequences, token_ids):
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=1, logprob_token_ids=list(token_ids))
    backend.llm.generate([{"prompt_token_ids": s} for s in sequences], params, use_tqdm=False)


def bench_model(family: str, model: Path, backend_name: str, pairs, batch_size: int, repeats: int) -> list[tuple]:
    from generation.judging.judges import LLMJudge

    backend: TokenBackend
    if backend_name == "vllm":
        from generation.backends.vllm_adapter import VllmJudgeBackend

        served = VllmJudgeBackend(str(model), judge_config(model, "vllm", "generate", batch_size))
        backend, tokenizer, raw = served, served.llm.get_tokenizer(), raw_vllm
        reset = served.llm.reset_prefix_cache
    else:
        from generation.backends.hf import TransformersBackend

        local = TransformersBackend(model, judge_config(model, "transformers", "distribution", batch_size))
        backend, tokenizer, raw, reset = local, local.tokenizer, raw_transformers, (lambda: None)
    judges = {
        mode: LLMJudge(judge_config(model, backend_name, mode, batch_size), backend, tokenizer, family)
        for mode in ("generate", "distribution")
    }
    sequences = [judges["distribution"].encode_pair(p)[0] for p in pairs]
    digits = judges["distribution"].digit_ids
    runs = {
        "generate": lambda: judges["generate"].grade(pairs),
        "distribution": lambda: judges["distribution"].grade(pairs),
        "raw one step": lambda: raw(backend, sequences, digits),
    }
    for run in runs.values():  # warm-up
        reset()
        run()
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            reset()
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            seconds[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    # pairs a second, by wall clock and by CPU time
    wall_rate = {name: len(pairs) / statistics.median(w for w, _ in s) for name, s in seconds.items()}
    cpu_rate = {name: len(pairs) / statistics.median(c for _, c in s) for name, s in seconds.items()}
    tokens = statistics.mean(len(s) for s in sequences)
    return [
        (
            backend_name,
            family,
            name,
            wall_rate[name],
            cpu_rate[name],
            cpu_rate[name] / cpu_rate["raw one step"],
            cpu_rate[name] / cpu_rate["generate"],
            tokens,
        )
        for name in runs
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["transformers", "vllm"], required=True)
    parser.add_argument("--subquestions", type=int, default=8)
    parser.add_argument("--documents", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (vLLM's CPU engine serves with 1); 1 keeps a shared machine's noise down",
    )
    args = parser.parse_args()

    import torch
    import transformers

    from builder.standins.models import save_tiny_causal_lm

    torch.set_num_threads(args.threads)
    pairs = make_pairs(args.subquestions, args.documents)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed, (family, (config_class, model_class)) in enumerate(FAMILIES.items()):
            model = save_tiny_causal_lm(
                Path(tmp) / family,
                config_class,
                model_class,
                seed,
                chat=family,
                head_dim=32,
                max_position_embeddings=MAX_MODEL_LEN,
            )
            rows += bench_model(family, model, args.backend, pairs, args.batch_size, args.repeats)
    version = f"vllm {__import__('vllm').__version__}" if args.backend == "vllm" else ""
    print(
        f"\n{len(pairs)} pairs ({args.subquestions} sub-questions x {args.documents} documents), batch "
        f"{args.batch_size}, median of {args.repeats}; torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"transformers {transformers.__version__} {version}; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f} at the end"
    )
    print("| backend | model | run | pairs/s (wall) | pairs/CPU-s | x raw one step | x kit generate | prompt tokens |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for backend, family, name, wall, cpu, vs_raw, vs_generate, tokens in rows:
        print(
            f"| {backend} | {family} | {name} | {wall:.1f} | {cpu:.1f} | {vs_raw:.2f} | {vs_generate:.2f} | "
            f"{tokens:.0f} |"
        )


if __name__ == "__main__":
    main()
