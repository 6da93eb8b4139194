"""A stand-in OpenAI-compatible server on 127.0.0.1 for `make test` and scripts/hostile.py (the real `vllm serve`
runs in `make test-vllm`), a batch runner over it that writes `vllm run-batch`'s result lines, and the profile of a
judge it serves.

It answers GET /v1/models, POST /v1/completions and POST /v1/chat/completions in the shapes vLLM 0.32 answers them
(choices[0].text / .message.content; completions logprobs.top_logprobs = [{token: logprob}], chat
logprobs.content[0].top_logprobs = [{token, logprob}]; vLLM's `logprob_token_ids` and `return_tokens_as_token_ids`).
Its answer is a deterministic function of the prompt (`answer_for`), so a test knows what each pair must get.
Faults are scripted per prompt: the first requests matching a rule get the rule's faults in turn, later ones the
normal answer. Every handler ends by itself (a fault's delay is bounded); `close()` stops the server.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

DIGITS = [str(d) for d in range(6)]


@dataclass
class Fault:
    status: int = 500
    body: str = '{"error": {"message": "the stand-in failed on purpose"}}'
    headers: tuple = ()
    delay: float = 0.0  # seconds before answering (longer than the client's timeout: a timeout)
    drop: bool = False  # close the connection without an answer (a reset; httpx reads RemoteProtocolError)


def fingerprint(body: dict) -> int:
    """The prompt's number: the sum of its token ids (completions) or of its last message's characters (chat)."""
    if "prompt" in body:
        return sum(body["prompt"])
    return sum(map(ord, body["messages"][-1]["content"]))


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client that gave up (a timeout) is not news
        pass


class StandIn:
    def __init__(self, model: str = "standin-judge", api_key: str | None = None, logprob_token_ids: bool = True):
        self.model, self.api_key, self.honours_logprob_token_ids = model, api_key, logprob_token_ids
        self.rules: list[tuple[Callable[[dict], bool], deque]] = []
        self.received: list[tuple[float, str, dict]] = []  # (arrival time, path, body)
        self.answered: list[tuple[float, int]] = []  # (time the normal answer was sent, fingerprint of its body)
        self.answer_limit: int | None = None  # after this many answers the server closes (it "dies")
        self.answer_delay = 0.0  # seconds before each normal answer (a slow server)
        self._lock = threading.Lock()
        self.server = QuietServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.closed = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def fail(self, match: Callable[[dict], bool], *faults: Fault) -> None:
        self.rules.append((match, deque(faults)))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.server.shutdown()
            self.server.server_close()

    def answers(self) -> int:
        return sum(1 for _, path, _ in self.received if path != "/v1/models")

    # -- what the stand-in answers -------------------------------------------------------------------------------
    def level_for(self, body: dict) -> int:
        return fingerprint(body) % 6

    def digit_logprobs(self, body: dict) -> list[float]:
        """Log-probabilities of "0".."5" (unnormalised: the judge renormalises over the digits)."""
        seed = fingerprint(body)
        return [-0.5 * ((seed + 3 * d) % 7) - 1.0 for d in range(6)]

    def answer_for(self, body: dict) -> dict:
        chat = "messages" in body
        text = f" {self.level_for(body)}"
        choice: dict = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        if body.get("logprobs"):
            choice["logprobs"] = self._logprobs(body, chat)
        return {
            "id": "cmpl-standin",
            "object": "chat.completion" if chat else "text_completion",
            "model": self.model,
            "choices": [choice],
        }

    def _logprobs(self, body: dict, chat: bool):
        rows = self.digit_logprobs(body)
        ids = body.get("logprob_token_ids") if self.honours_logprob_token_ids else None
        if ids:  # vLLM: exactly these tokens, named token_id:N with return_tokens_as_token_ids
            named = {
                (f"token_id:{t}" if body.get("return_tokens_as_token_ids") else str(t)): lp for t, lp in zip(ids, rows)
            }
        elif ids is None and (body.get("top_logprobs") or (not chat and isinstance(body["logprobs"], int))):
            k = body.get("top_logprobs") or body["logprobs"]
            ranked = sorted([*zip(DIGITS, rows), ("the", -0.9), ("a", -2.2)], key=lambda kv: -kv[1])
            named = dict(ranked[:k])
        else:
            return None
        if chat:
            return {
                "content": [
                    {
                        "token": next(iter(named)),
                        "logprob": next(iter(named.values())),
                        "top_logprobs": [{"token": t, "logprob": lp} for t, lp in named.items()],
                    }
                ]
            }
        return {"tokens": [next(iter(named))], "token_logprobs": [next(iter(named.values()))], "top_logprobs": [named]}

    # -- HTTP ----------------------------------------------------------------------------------------------------
    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload: str, headers=()):
                data = payload.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if standin.api_key is None:
                    return True
                given = self.headers.get("Authorization", "")
                if given == f"Bearer {standin.api_key}":
                    return True
                # as OpenAI does, the refusal quotes (part of) the key it was given
                self._send(401, json.dumps({"error": {"message": f"Incorrect API key provided: {given[7:]}"}}))
                return False

            def do_GET(self):
                standin.received.append((time.monotonic(), self.path, {}))
                if not self._authorised():
                    return
                if self.path != "/v1/models":
                    return self._send(404, '{"detail": "Not Found"}')
                self._send(200, json.dumps({"object": "list", "data": [{"id": standin.model, "object": "model"}]}))

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.received.append((time.monotonic(), self.path, body))
                if not self._authorised():
                    return
                if self.path not in ("/v1/completions", "/v1/chat/completions"):
                    return self._send(404, '{"detail": "Not Found"}')
                if body.get("model") != standin.model:
                    return self._send(
                        404, json.dumps({"error": {"message": f"The model `{body.get('model')}` does not exist."}})
                    )
                fault = None
                with standin._lock:
                    for match, faults in standin.rules:
                        if faults and match(body):
                            fault = faults.popleft()
                            break
                if fault is not None:
                    time.sleep(fault.delay)
                    if fault.drop:
                        self.close_connection = True
                        return
                    return self._send(fault.status, fault.body, fault.headers)
                time.sleep(standin.answer_delay)
                self._send(200, json.dumps(standin.answer_for(body)))
                standin.answered.append((time.monotonic(), fingerprint(body)))
                if standin.answer_limit is not None and standin.answers() >= standin.answer_limit:
                    threading.Thread(target=standin.close, daemon=True).start()

        return Handler


# -- batch result lines ------------------------------------------------------------------------------------------
def run_batch_on(standin, request_file, out_file, openai_style=False):
    """A batch runner over the stand-in: each request line's body POSTed, its answer written as vLLM 0.32's
    run_batch writes a BatchRequestOutput line (or the OpenAI Batch API's, with a batch_req id)."""
    with httpx.Client() as client, open(out_file, "w") as out:
        for number, line in enumerate(request_file.read_text().splitlines()):
            request = json.loads(line)
            response = client.post(standin.endpoint.removesuffix("/v1") + request["url"], json=request["body"])
            out.write(
                json.dumps(
                    {
                        "id": f"batch_req_{number}" if openai_style else f"vllm-{number}",
                        "custom_id": request["custom_id"],
                        "response": {"status_code": 200, "request_id": f"req_{number}", "body": response.json()},
                        "error": None,
                    }
                )
                + "\n"
            )


def answered(cid, text, style="vllm"):
    """One result line answering pair `cid` with `text`: vLLM run-batch's, the OpenAI Batch API's or the authors'."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": "stop"}
        ],
    }
    if style == "authors":  # their batch runner kept the pair's id in `id` (crux-researchy/merge_ratings.py)
        return json.dumps({"id": cid, "response": {"status_code": 200, "body": body}})
    return json.dumps(
        {
            "id": "batch_req_1" if style == "openai" else "vllm-1",
            "custom_id": cid,
            "response": {"status_code": 200, "request_id": "req_1", "body": body},
            "error": None,
        }
    )


def served_judge_profile(profile: dict, model, **server) -> dict:
    """`profile` (a profile's data) with the paper's judge on `model`, a tiny chat Llama, served as `standin-judge`:
    chat requests, 120-word contexts, chunks of 16 and a 10 ms retry backoff. `server` sets more of the openai
    section, and the name says which (`served`, `served-max_retry_after_s1`). The endpoint is a placeholder:
    `researchy-subq judge --endpoint` gives the stand-in's address."""
    from generation.profiles.profile import load_profile

    judge = {
        **load_profile("paper").judge.model_dump(),
        "backend": "openai",
        "model": str(model),
        "max_model_len": 512,
        "context_words": 120,
        "chunk_size": 16,
        "openai": {
            "endpoint": "http://127.0.0.1:9/v1",
            "request_shape": "chat",
            "served_model": "standin-judge",
            "retry_backoff_s": 0.01,
            **server,
        },
    }
    name = "served-" + "-".join(f"{k}{v}" for k, v in server.items()) if server else "served"
    return {**profile, "name": name, "judge": judge}
