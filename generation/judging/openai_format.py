"""The OpenAI request and answer format the judge speaks: the bodies of the `completions` and `chat` shapes, the
sampling they ask for, and how an answer's text and digit log-probabilities are read.

One module under both users: the `openai` backend sends these bodies to a server
(generation/backends/openai_server.py) and the batch files write them as request lines
(generation/judging/batch_files.py); the in-process vLLM adapter passes the same sampling to `vllm.LLM`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from generation.errors import BackendError

PATHS = {"completions": "/completions", "chat": "/chat/completions"}
TOKEN_ID_PREFIX = "token_id:"  # vLLM's return_tokens_as_token_ids names a token "token_id:{id}"


class ServerError(BackendError):
    """The server cannot judge under this profile: down, wrong URL, key or model, or no digit log-probabilities."""


def generate_params(max_new_tokens: int) -> dict:
    return {"temperature": 0.0, "max_tokens": max_new_tokens, "n": 1}


def distribution_params(token_ids: Sequence[int]) -> dict:
    """One decode step (max_tokens=1): the step's token restricted to the digits (`allowed_token_ids`), and
    `logprob_token_ids` returning exactly their log-probabilities (vLLM 0.32 SamplingParams; the sampler gathers
    them from the raw log-softmax, vllm/v1/sample/sampler.py), whatever their rank in the vocabulary."""
    return {
        "temperature": 0.0,
        "max_tokens": 1,
        "n": 1,
        "allowed_token_ids": list(token_ids),
        "logprob_token_ids": list(token_ids),
    }


class AnswerUnreadable(ValueError):
    """A 200 answer without what the request asked for (no choices, no text, no digit log-probabilities)."""


def _token_id(key: str) -> int | None:
    if key.startswith(TOKEN_ID_PREFIX) and key[len(TOKEN_ID_PREFIX) :].isdigit():
        return int(key[len(TOKEN_ID_PREFIX) :])
    return None


@dataclass(frozen=True)
class RequestFormat:
    """The request bodies of one shape, and how to read their answers. Shared with the batch files
    (generation/judging/batch_files.py), so a batch line's body is the request this backend sends."""

    shape: str  # completions | chat
    model: str
    digit_logprobs: str = "logprob_token_ids"  # or top_logprobs
    top_logprobs: int = 20

    @property
    def path(self) -> str:
        return PATHS[self.shape]

    def _prompt(self, payload) -> dict:
        return {"prompt": [int(t) for t in payload]} if self.shape == "completions" else {"messages": list(payload)}

    def generate_body(self, payload, max_new_tokens: int) -> dict:
        return {"model": self.model, **self._prompt(payload), **generate_params(max_new_tokens)}

    def distribution_body(self, payload, token_ids: Sequence[int]) -> dict:
        body = {"model": self.model, **self._prompt(payload)}
        if self.digit_logprobs == "logprob_token_ids":
            # vLLM 0.32's CompletionRequest wants `logprobs` set (an int) and ChatCompletionRequest `logprobs: true`
            # beside logprob_token_ids (vllm/entrypoints/openai/*/protocol.py, check_logprobs)
            return {
                **body,
                **distribution_params(token_ids),
                "logprobs": True if self.shape == "chat" else 1,
                "return_tokens_as_token_ids": True,
            }
        top = (
            {"logprobs": True, "top_logprobs": self.top_logprobs}
            if self.shape == "chat"
            else {"logprobs": self.top_logprobs}
        )
        return {**body, "temperature": 0.0, "max_tokens": 1, "n": 1, **top}

    @staticmethod
    def _choice(body: Any) -> dict:
        choices = body.get("choices") if isinstance(body, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise AnswerUnreadable("the answer has no choices")
        return choices[0]

    def text(self, body: Any) -> str:
        """The generated text: choices[0].text (completions) or choices[0].message.content (chat)."""
        choice = self._choice(body)
        text = choice.get("text") if self.shape == "completions" else (choice.get("message") or {}).get("content", "")
        if text is not None and not isinstance(text, str):
            raise AnswerUnreadable(f"the answer's text is a {type(text).__name__}")
        return text or ""

    def first_position_logprobs(self, body: Any) -> dict[str, float]:
        """{token: log-probability} reported at the answer's first position."""
        logprobs = self._choice(body).get("logprobs") or {}
        if self.shape == "completions":  # {"top_logprobs": [{token: logprob}, ...]}
            tops = logprobs.get("top_logprobs") or [None]
            return dict(tops[0] or {})
        content = logprobs.get("content") or [None]  # {"content": [{"top_logprobs": [{"token", "logprob"}]}]}
        return {entry["token"]: entry["logprob"] for entry in (content[0] or {}).get("top_logprobs") or []}

    def digit_row(self, body: Any, token_ids: Sequence[int], token_texts: Sequence[str]) -> list[float]:
        """The log-probabilities of `token_ids` at the first position, in that order. A token is named by its
        id (`token_id:N`) or else by its text; with top_logprobs a digit the server did not list is -inf."""
        by_text = {text: i for i, text in zip(token_ids, token_texts) if token_texts.count(text) == 1}
        found: dict[int, float] = {}
        for key, value in self.first_position_logprobs(body).items():
            token = _token_id(key)
            token = by_text.get(key) if token is None else token
            if token is not None and isinstance(value, (int, float)):
                found[token] = float(value)
        missing = [t for t in token_ids if t not in found]
        if self.digit_logprobs == "logprob_token_ids" and missing:
            raise AnswerUnreadable(
                f"no log-probability for the digit tokens {missing} (logprob_token_ids is vLLM's "
                "extension: a server without it ignores it)"
            )
        if len(missing) == len(token_ids):
            raise AnswerUnreadable(f"none of the digit tokens among the {self.top_logprobs} top log-probabilities")
        return [found.get(t, -math.inf) for t in token_ids]


def check_shape(config, shape: str) -> None:
    """A profile that feeds its judge plain text (`chat_template: false`) cannot go through the chat shape, whose
    messages the server wraps in its own template: the labels would not be the profile's."""
    if shape == "chat" and not config.chat_template:
        raise ServerError(
            "openai backend: judge.chat_template is false (the prompt as plain text), but the chat "
            "request shape sends messages that the server wraps in its chat template; use "
            "judge.openai.request_shape: completions"
        )
