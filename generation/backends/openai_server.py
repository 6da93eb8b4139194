"""The judge's `openai` backend: any OpenAI-compatible server (`vllm serve`, SGLang, TGI, a hosted API).

Two request shapes (the profile's `judge.openai.request_shape`):
- `completions`: POST {endpoint}/completions with `prompt` = the kit's own token ids (the OpenAI completions API
  takes "an array of tokens" as prompt; vLLM and SGLang do too), so the model sees what the in-process backends
  feed it: the same chat template, token cut and single BOS;
- `chat`: POST {endpoint}/chat/completions with the messages the judge fitted to its token budget; the server's
  chat template applies.

Sampling is the in-process vLLM adapter's (`openai_format.generate_params` / `distribution_params`), so a vLLM
server gets the request the engine gets in process. Distribution mode reads the digits' log-probabilities from
the answer's first position: with vLLM's `logprob_token_ids` (each digit's log-probability whatever its rank;
`return_tokens_as_token_ids` names them `token_id:N`), or from the standard `logprobs` / `top_logprobs`, where a
digit outside the server's top-k counts as probability 0. Either way these are raw log-probabilities over the
full vocabulary: vLLM takes them before `allowed_token_ids` masks the sampled token, as in process.

Requests run `concurrency` at a time on an asyncio loop of the backend's own thread. A 429, a 5xx, a body that
is not JSON, a timeout or a connection error is retried with a doubling wait (a `Retry-After` header takes its
place, capped at `max_retry_after_s`, said once); then the pair alone fails (`judges.RequestFailed`, status
`request_failed`, retried on the judge's next run), unless the server is down. Down is decided by a health probe,
not by one request: when a request's last attempt ends in a connection error, GET {endpoint}/models is sent; no
answer (a connection error) stops the call (`judges.BackendUnavailable`), so no chunk is written half-judged,
while an answering server means this request alone fails (a poison pair: its connection always drops).
`check` probes the server once before any pair is judged, and refuses with one line (`ServerError`).
The API key is read from the environment variable the profile names and is never printed or written.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import os
import random
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from generation.backends.request_order import leaders
from generation.judging.judges import BackendUnavailable, RequestFailed
from generation.judging.openai_format import AnswerUnreadable, RequestFormat, ServerError, check_shape
from generation.notices import warn
from generation.profiles.profile import OpenAIServer

MAX_BACKOFF_S = 60.0
MESSAGE_CHARS = 300  # of a server's error text, in a pair's `raw` or an error line
PROBE_TIMEOUT_S = 10.0  # the health probe after a request's last connection error


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header: delay-seconds or an HTTP-date (RFC 9110 section 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def server_message(response: httpx.Response) -> str:
    """The error text of an OpenAI-style {"error": {"message": ...}} body, FastAPI's {"detail": ...}, or the text."""
    try:
        data = response.json()
    except ValueError:
        return " ".join(response.text.split())[:MESSAGE_CHARS]
    if isinstance(data, dict):
        error = data.get("error")
        data = error.get("message", error) if isinstance(error, dict) else (error or data.get("detail") or data)
    return " ".join(str(data).split())[:MESSAGE_CHARS]


def api_key(env_name: str | None) -> str | None:
    if env_name is None:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise ServerError(
            f"openai backend: judge.openai.api_key_env names {env_name}, which is not set in the environment"
        )
    return key


class _Retryable(Exception):
    def __init__(self, message: str, wait: float | None = None, unreachable: bool = False):
        super().__init__(message)
        self.wait, self.unreachable = wait, unreachable


class _EventLoopThread:
    """An asyncio loop on a thread of its own, so the synchronous backend calls work from any caller, including
    one that runs an event loop itself."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="openai-backend", daemon=True)
        self.thread.start()

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class OpenAIServerBackend:
    """A TokenBackend over HTTP. `takes_messages` in the chat shape: the judge hands over fitted messages."""

    def __init__(self, server: OpenAIServer, model: str, tokenizer=None):
        self.server = server
        self.format = RequestFormat(
            server.request_shape, server.served_model or model, server.digit_logprobs, server.top_logprobs
        )
        self.takes_messages = server.request_shape == "chat"
        self.endpoint = server.endpoint.rstrip("/")
        self.url = self.endpoint + self.format.path
        self._key = api_key(server.api_key_env)
        self._token_text: Callable[[int], str] = (lambda t: tokenizer.decode([t])) if tokenizer else str
        self._said_retry_after = False
        self._loop = _EventLoopThread()
        self._client = self._loop.run(self._open())

    async def _open(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        limits = httpx.Limits(
            max_connections=self.server.concurrency, max_keepalive_connections=self.server.concurrency
        )
        return httpx.AsyncClient(headers=headers, limits=limits, timeout=self.server.request_timeout_s)

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def close(self) -> None:
        if self._client is not None:
            self._loop.run(self._client.aclose())
            self._loop.close()
            self._client = None

    def __enter__(self) -> OpenAIServerBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one request ---------------------------------------------------------------------------------------------
    async def _attempt(self, body: dict) -> dict:
        try:
            response = await self._client.post(self.url, json=body)
        except httpx.TimeoutException as error:
            raise _Retryable(
                f"no answer within {self.server.request_timeout_s:g} s ({type(error).__name__})"
            ) from error
        except httpx.TransportError as error:  # httpx's ReadError on a dropped connection has an empty text
            raise _Retryable(
                f"{type(error).__name__}: {error or 'the connection closed without an answer'}", unreachable=True
            ) from error
        if response.status_code == 200:
            try:
                return response.json()
            except ValueError:
                raise _Retryable(f"HTTP 200 with a body that is not JSON: {response.text[:80]!r}") from None
        message = f"HTTP {response.status_code}: {server_message(response)}"
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(message, wait=retry_after_seconds(response.headers.get("Retry-After")))
        raise RequestFailed(self._redact(message))

    async def _request(self, body: dict) -> dict:
        """The answer's JSON, after retries; RequestFailed, or BackendUnavailable when the server is unreachable."""
        for attempt in range(self.server.max_retries + 1):
            try:
                return await self._attempt(body)
            except _Retryable as failure:
                last = failure
                if attempt < self.server.max_retries:
                    backoff = min(MAX_BACKOFF_S, self.server.retry_backoff_s * 2**attempt)
                    await asyncio.sleep(
                        self._retry_after(failure.wait)
                        if failure.wait is not None
                        else backoff * random.uniform(0.75, 1.0)
                    )
        message = self._redact(f"{last} ({self.server.max_retries + 1} attempts)")
        if last.unreachable:
            down = await self._probe()
            if down is not None:
                raise BackendUnavailable(
                    f"openai backend: the server stopped answering: POST {self.url}: {message}; GET /models: {down}"
                )
            message += "; the server answers other requests (GET /models): this request alone fails"
        raise RequestFailed(message)  # the pair's `raw`, which a release publishes: no URL in it

    def _retry_after(self, asked: float) -> float:
        """A server's Retry-After, capped at `max_retry_after_s`; the first cut is said once on stderr."""
        cap = self.server.max_retry_after_s
        if asked > cap and not self._said_retry_after:
            self._said_retry_after = True
            warn(
                f"openai backend: the server asked to wait {asked:g} s before a retry (Retry-After); the kit "
                f"waits {cap:g} s (judge.openai.max_retry_after_s) and then retries, up to "
                f"{self.server.max_retries} times per request, before the pair fails (retried on the next run)"
            )
        return min(asked, cap)

    async def _probe(self) -> str | None:
        """None when the server answers GET /models (whatever the status); else why not, in a few words."""
        try:
            await self._client.get(self.endpoint + "/models", timeout=PROBE_TIMEOUT_S)
        except httpx.TransportError as error:
            return f"{type(error).__name__}: {error or 'no answer'}"
        return None

    async def _answer(self, body: dict, read: Callable[[Any], Any]):
        try:
            return read(await self._request(body))
        except AnswerUnreadable as error:
            return RequestFailed(str(error))
        except RequestFailed as error:
            return error

    async def _answers(self, bodies: list[dict], read: Callable[[Any], Any], groups: Sequence | None = None) -> list:
        """Every body's answer, `concurrency` in flight, in order; the first BackendUnavailable cancels the rest.
        With `groups` (a key per body), the rest of a group is sent once its first request has its answer, so the
        server's prefix cache holds the group's shared prefix (a document's, under a document-first prompt) when
        they arrive; the first requests of later groups go on meanwhile, so no slot waits on a group."""
        gate = asyncio.Semaphore(self.server.concurrency)
        first = leaders(groups) if groups is not None else [True] * len(bodies)
        answered = {key: asyncio.Event() for key in (groups or [])}

        async def one(i, body):
            if not first[i]:
                await answered[groups[i]].wait()
            try:
                async with gate:
                    return await self._answer(body, read)
            finally:
                if groups is not None and first[i]:
                    answered[groups[i]].set()

        tasks = [asyncio.ensure_future(one(i, body)) for i, body in enumerate(bodies)]
        try:
            return await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    # -- the TokenBackend calls ------------------------------------------------------------------------------------
    prefix_groups = True  # takes `groups`: each group's first request answered before the rest are sent

    def generate(self, sequences: Sequence, max_new_tokens: int, groups: Sequence | None = None) -> list:
        bodies = [self.format.generate_body(s, max_new_tokens) for s in sequences]
        return self._loop.run(self._answers(bodies, self.format.text, groups))

    def next_token_logprobs(
        self, sequences: Sequence, token_ids: Sequence[int], groups: Sequence | None = None
    ) -> list:
        bodies = [self.format.distribution_body(s, token_ids) for s in sequences]
        return self._loop.run(self._answers(bodies, self._digit_reader(token_ids), groups))

    def _digit_reader(self, token_ids: Sequence[int]) -> Callable[[Any], list[float]]:
        texts = [self._token_text(t) for t in token_ids]
        return lambda body: self.format.digit_row(body, token_ids, texts)

    # -- the start-up probe --------------------------------------------------------------------------------------
    def check(self, probe_payload, max_new_tokens: int, digit_ids: Sequence[int] | None = None) -> None:
        """One line (ServerError) unless the server answers this profile: it is up, takes the key, serves the
        model, answers one request of this shape, and in distribution mode (`digit_ids`) returns the digits'
        log-probabilities."""
        self._loop.run(self._check(probe_payload, max_new_tokens, digit_ids))

    async def _check(self, probe_payload, max_new_tokens: int, digit_ids) -> None:
        where = f"openai backend ({self.endpoint})"
        try:
            response = await self._client.get(self.endpoint + "/models")
        except httpx.TransportError as error:
            raise ServerError(
                self._redact(
                    f"{where}: cannot reach the server ({type(error).__name__}: {error}); is it "
                    "running, and is the endpoint its API base, e.g. http://host:8000/v1?"
                )
            ) from None
        if response.status_code in (401, 403):
            key = (
                f"the API key from ${self.server.api_key_env}"
                if self._key
                else "a request without an API key (judge.openai.api_key_env is not set)"
            )
            raise ServerError(
                self._redact(
                    f"{where}: the server refused {key}: HTTP {response.status_code}: {server_message(response)}"
                )
            )
        try:
            served = [m["id"] for m in response.json()["data"]] if response.status_code == 200 else None
        except (ValueError, KeyError, TypeError):
            served = None
        if served is None:
            raise ServerError(
                self._redact(
                    f"{where}: GET /models answered HTTP {response.status_code} "
                    f"({server_message(response)[:120]}), not an OpenAI model list: is the "
                    "endpoint the API base, e.g. http://host:8000/v1?"
                )
            )
        if self.format.model not in served:
            raise ServerError(
                f"{where}: the server does not serve the model {self.format.model!r} (it serves: "
                f"{', '.join(map(str, served)) or 'nothing'}); set judge.openai.served_model"
            )
        read: Callable[[Any], str | list[float]]
        if digit_ids is None:
            body, read = self.format.generate_body(probe_payload, max_new_tokens), self.format.text
        else:
            body, read = self.format.distribution_body(probe_payload, digit_ids), self._digit_reader(digit_ids)
        try:
            answer = read(await self._request(body))
        except AnswerUnreadable as error:
            raise ServerError(
                f"{where}: distribution mode needs the digits' log-probabilities and the probe request's "
                f"answer has none ({error}); use mode: generate, or judge.openai.digit_logprobs: "
                "top_logprobs"
            ) from None
        except (RequestFailed, BackendUnavailable) as error:
            raise ServerError(f"{where}: the probe request failed: {error}") from None
        if isinstance(answer, list) and not any(math.isfinite(x) for x in answer):
            raise ServerError(f"{where}: the probe request's digit log-probabilities are all -inf")


def served_judge_description(server: OpenAIServer, model: str) -> str:
    """The judge as completion records, the card and the manifest name it: never the endpoint (an internal host)."""
    return f"{server.served_model or model} (openai server, request shape {server.request_shape})"


def make_judge(config, tokenizer=None):
    """An LLMJudge on the server of `config.openai`, probed before it is returned (the backend registry's factory,
    generation/backends/__init__.py). The tokenizer (the model's own, for the token budget and, in the completions
    shape, the token ids) is loaded from `config.model` when not given."""
    from generation.judging.judges import LLMJudge, Pair

    if tokenizer is None:
        from transformers import AutoTokenizer

        from generation.profiles.model_paths import resolve_model

        tokenizer = AutoTokenizer.from_pretrained(str(resolve_model(config.model)))
    check_shape(config, config.openai.request_shape)
    backend = OpenAIServerBackend(config.openai, config.model, tokenizer)
    try:
        judge = LLMJudge(config, backend, tokenizer, served_judge_description(config.openai, config.model))
        probe = judge.encode_pair(Pair(PROBE_QUESTION, PROBE_DOCUMENT))[0]
        backend.check(probe, judge.max_new_tokens, judge.digit_ids if config.mode == "distribution" else None)
    except BaseException:
        backend.close()
        raise
    return judge


PROBE_QUESTION = "Is this a probe request?"
PROBE_DOCUMENT = "This is a probe request sent before any pair is judged."
