"""OpenAI Batch result lines -> (custom_id, the answer's text, or why the request failed).

The line is the per-request object of an OpenAI Batch API output or error file, which `vllm run-batch` writes too
(vllm/entrypoints/launchers/run_batch.py, `BatchRequestOutput`, "the per-line object of the batch output and error
files", vLLM 0.32):

    {"id": "...", "custom_id": "...",
     "response": {"status_code": 200, "request_id": "...", "body": {"choices": [{"message": {"content": "4"}}]}},
     "error": null}

A failed request has `error` set, or a `response.status_code` other than 200 (vLLM: the code of its ErrorResponse,
400 for a malformed request; OpenAI: the HTTP status, with `body.error`). A completions request's choice holds
`text` instead of `message`. The authors' merge scripts (DylanJoo/crux crux-researchy/merge_ratings.py and
merge_ratings_qrel.py, `load_offload_jsonl`) read `item['id']` and `item['response']['body']['choices'][0]['message']
['content']`: their batch runner wrote the pair's id into `id`, so a line without `custom_id` is read by its `id`.

One function, `read_result_lines`, which both `import-labels` and the judge stage's `--import-batch` read through.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generation.errors import InputError


@dataclass(frozen=True)
class BatchResult:
    custom_id: str
    content: str | None  # the answer's text; None when the request failed
    error: str | None = None  # why it failed (the error's message, or the HTTP status)
    body: dict | None = None  # the whole response body of an answer (the judge's batch import reads log-probabilities)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        nested = error.get("error")
        inner = nested if isinstance(nested, dict) else error
        message = inner.get("message")
        if isinstance(message, str) and message:
            code = inner.get("code")
            return f"{code}: {message}" if code not in (None, "") else message
    return error if isinstance(error, str) else json.dumps(error, sort_keys=True)


def _answer(response: Any) -> str | None:
    """choices[0].message.content (chat) or choices[0].text (completions), or None when absent."""
    body = response.get("body") if isinstance(response, dict) else None
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else choice.get("text")
    return content if isinstance(content, str) else None


def parse_result_line(record: Any, path: Path, line: int) -> BatchResult:
    """One decoded result line, or an InputError naming the file and line when it is not one."""
    if not isinstance(record, dict):
        raise InputError(path, line, f"expected a JSON object (a batch result line), got {type(record).__name__}")
    custom_id = record.get("custom_id") if record.get("custom_id") is not None else record.get("id")
    if not isinstance(custom_id, str) or not custom_id:
        raise InputError(
            path, line, "a batch result line needs a `custom_id` (or the authors' `id`) string", field="custom_id"
        )
    response, error = record.get("response"), record.get("error")
    if error is not None:
        return BatchResult(custom_id, None, _error_text(error))
    if not isinstance(response, dict):
        raise InputError(
            path, line, "neither a `response` object nor an `error`", field="response", record_id=custom_id
        )
    status = response.get("status_code", 200)
    if status != 200:
        body = response.get("body")
        return BatchResult(
            custom_id, None, _error_text(body) if isinstance(body, dict) and "error" in body else f"HTTP {status}"
        )
    content = _answer(response)
    if content is None:
        raise InputError(
            path,
            line,
            "a successful response without choices[0].message.content (or choices[0].text)",
            field="response.body",
            record_id=custom_id,
        )
    return BatchResult(custom_id, content, body=response["body"])


def read_result_lines(lines: Iterable[tuple[int, bytes]], path: Path) -> Iterator[tuple[int, BatchResult | InputError]]:
    """(line number, the line's result or the InputError that replaced it) for each non-blank line."""
    for line, raw in lines:
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            yield (
                line,
                InputError(
                    path, line, f"not valid JSON ({e.msg if isinstance(e, json.JSONDecodeError) else e.reason})"
                ),
            )
            continue
        try:
            yield line, parse_result_line(record, path, line)
        except InputError as e:
            yield line, e
