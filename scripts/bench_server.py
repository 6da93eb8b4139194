"""Judge throughput through an OpenAI-compatible server: the kit's `openai` backend against a bare async loop of the
same requests, and the in-process vLLM figure, on one `vllm serve` of a tiny random-weight Llama carrying
Llama-3.3's chat template (tests/conftest.py builds it).

    make bench-server      (= VLLM_ENV .venv-vllm/bin/python scripts/bench_server.py)

Rows, per mode (generate: 3 new tokens, the paper's; distribution: one step, vLLM's logprob_token_ids):
- bare loop: the request bodies built beforehand, POSTed by one keep-alive httpx.AsyncClient `--concurrency` at a
  time, each answer parsed as JSON and nothing more: the floor any client pays;
- backend: `OpenAIServerBackend.generate` / `next_token_logprobs` on the judge's prompts encoded beforehand (the
  backend's own work: bodies, retries wrapper, reading the answers);
- kit: `LLMJudge.grade` on `Pair`s through the backend (adds prompt building, the chat template, the token cut
  and parsing, all in this process);
- in-process vLLM: `LLMJudge.grade` on `VllmJudgeBackend` (`vllm.LLM` in this process), for scale.
The server runs in VLLM_SERVER_DEV_MODE so its prefix cache can be reset (POST /reset_prefix_cache) before every
run, as the in-process engine's is: every run pays for its own prefixes. Runs are interleaved; the median of
`--repeats` rounds is printed as pairs per wall second; "x bare loop" is the median over rounds of the run's
speed over the bare loop's in the same round, and the client's CPU time per pair (this process, all its threads;
for in-process vLLM that includes the engine) is the overhead a client adds, whatever the load. The client, the
server and whatever else runs share this machine's CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

MAX_MODEL_LEN = 2048


class BareLoop:
    """The same requests with nothing around them: one event loop and one keep-alive client for every run, as the
    backend keeps its own, `concurrency` in flight, each answer parsed as JSON."""

    def __init__(self, url: str, concurrency: int):
        import httpx

        self.url, self.concurrency = url, concurrency
        self.loop = asyncio.new_event_loop()
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self.client = httpx.AsyncClient(limits=limits, timeout=600)

    async def _all(self, bodies: list[dict]) -> None:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(body):
            async with gate:
                response = await self.client.post(self.url, json=body)
                response.raise_for_status()
                return response.json()

        await asyncio.gather(*(one(b) for b in bodies))

    def run(self, bodies: list[dict]) -> None:
        self.loop.run_until_complete(self._all(bodies))


def judge_config(model: Path, mode: str, endpoint: str, concurrency: int):
    from generation.profiles.profile import JudgeConfig, load_profile

    data = load_profile("paper").judge.model_dump()
    return JudgeConfig.model_validate(
        {
            **data,
            "backend": "openai",
            "model": str(model),
            "mode": mode,
            "dtype": "float32",
            "tensor_parallel_size": 1,
            "max_model_len": MAX_MODEL_LEN,
            "device": "cpu",
            "openai": {"endpoint": endpoint, "request_shape": "completions", "concurrency": concurrency},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subquestions", type=int, default=8)
    parser.add_argument("--documents", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import httpx
    import torch
    import vllm
    from bench_judge import make_pairs
    from transformers import AutoTokenizer

    from builder.standins.models import save_tiny_causal_lm
    from builder.standins.vllm_server import VllmServer
    from generation.backends.openai_server import make_judge
    from generation.backends.vllm_adapter import VllmJudgeBackend
    from generation.judging.judges import LLMJudge

    torch.set_num_threads(1)
    pairs = make_pairs(args.subquestions, args.documents)
    with tempfile.TemporaryDirectory() as tmp:
        model = save_tiny_causal_lm(
            Path(tmp) / "llama3",
            "LlamaConfig",
            "LlamaForCausalLM",
            0,
            chat="llama3",
            head_dim=32,
            max_position_embeddings=MAX_MODEL_LEN,
        )
        server = VllmServer(model, MAX_MODEL_LEN, Path(tmp) / "server.log", env={"VLLM_SERVER_DEV_MODE": "1"})
        server.start()
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(model))
            in_process = VllmJudgeBackend(str(model), judge_config(model, "generate", server.endpoint, 1))
            runs: dict[tuple[str, str], Callable[[], object]] = {}  # (mode, path) -> one timed run
            resets: dict[tuple[str, str], Callable[[], object]] = {}  # its prefix cache's reset
            for mode in ("generate", "distribution"):
                config = judge_config(model, mode, server.endpoint, args.concurrency)
                kit = make_judge(config, tokenizer)
                backend = kit.backend
                sequences = [kit.encode_pair(p)[0] for p in pairs]
                if mode == "generate":
                    bodies = [backend.format.generate_body(s, kit.max_new_tokens) for s in sequences]

                    def call(b=backend, s=sequences, n=kit.max_new_tokens):
                        return b.generate(s, n)
                else:
                    bodies = [backend.format.distribution_body(s, kit.digit_ids) for s in sequences]

                    def call(b=backend, s=sequences, d=kit.digit_ids):
                        return b.next_token_logprobs(s, d)

                local = LLMJudge(config, in_process, tokenizer, "in-process")
                bare = BareLoop(backend.url, args.concurrency)
                runs[(mode, "bare loop")] = functools.partial(bare.run, bodies)
                runs[(mode, "backend")] = call
                runs[(mode, "kit")] = functools.partial(kit.grade, pairs)
                runs[(mode, "in-process vLLM")] = functools.partial(local.grade, pairs)
                resets[(mode, "in-process vLLM")] = in_process.llm.reset_prefix_cache

            def reset_server():
                httpx.post(server.endpoint.removesuffix("/v1") + "/reset_prefix_cache", timeout=60).raise_for_status()

            seconds: dict = {name: [] for name in runs}
            cpu: dict = {name: [] for name in runs}
            for repeat in range(args.repeats + 1):  # the first round warms up and is not counted
                for name, run in runs.items():
                    resets.get(name, reset_server)()
                    start, start_cpu = time.perf_counter(), time.process_time()
                    run()
                    if repeat:
                        seconds[name].append(time.perf_counter() - start)
                        cpu[name].append(time.process_time() - start_cpu)
        finally:
            server.kill()
    tokens = statistics.mean(len(s) for s in sequences)
    print(
        f"\n{len(pairs)} pairs ({args.subquestions} sub-questions x {args.documents} documents, {tokens:.0f} prompt "
        f"tokens on average), completions shape, concurrency {args.concurrency}, {args.repeats} rounds; "
        f"vllm {vllm.__version__}, {os.cpu_count()} CPUs shared by client, server and other jobs, load average "
        f"{os.getloadavg()[0]:.2f} at the end"
    )
    print(
        "| mode | run | pairs/s (wall), median | slowest-fastest run | x bare loop (median of rounds) | "
        "client CPU ms per pair |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (mode, run), times in seconds.items():
        bare = seconds[(mode, "bare loop")]
        paired = statistics.median(b / t for b, t in zip(bare, times))  # a round's runs share the machine's load
        print(
            f"| {mode} | {run} | {len(pairs) / statistics.median(times):.1f} | {len(pairs) / max(times):.1f}-"
            f"{len(pairs) / min(times):.1f} | {paired:.2f} | "
            f"{1000 * statistics.median(cpu[(mode, run)]) / len(pairs):.2f} |"
        )


if __name__ == "__main__":
    main()
