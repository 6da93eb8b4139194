"""OpenAI Batch files for the judge: request lines out, with their manifest (result lines in:
generation/judging/batch_import.py).

Export: each pair becomes one request line {"custom_id", "method": "POST", "url", "body"} (OpenAI's
`BatchRequestInput`), whose body is the request the `openai` server backend sends for that pair
(`openai_format.RequestFormat`): the same prompt fitted to the token budget, the same sampling. Lines go into
files within the OpenAI Batch limits, "up to 50,000 requests, and can be up to 200 MB in size" (openai-python
3.54, openai/types/batch_create_params.py lines 50-51), with a manifest beside them.

`vllm run-batch` 0.32 takes only `/v1/chat/completions` lines (its BatchRequestInput body is a
ChatCompletionRequest, vllm/entrypoints/launchers/run_batch.py): export in the `chat` shape for it. Its chat
request has no token-id input (no `prompt_token_ids` field; vLLM ignores unknown fields), so a batch line carries
messages and the server's chat template applies. The OpenAI Batch API also takes `/v1/completions` lines; the
`completions` shape exports those, with the kit's token ids as prompt.

custom_id: `{qid}::{docid}::{k}`, k = the sub-question's position in its question's list (subq_id is
`{qid}-{k}`): the shape of the authors' request id (DylanJoo/crux crux/augmentation/gen_ratings_offload.py writes
f"{id}::{docid}::{j}", j the position; crux-researchy/merge_ratings.py splits it with `.split("::")`), not their id:
their docid is the document's URL-hash (Researchy's CluewebURLHash), the kit's its ClueWeb22-ID. Both import
(`import-labels --format openai-batch`, with `--corpus` to map URL-hashes to ClueWeb22-IDs). It is unambiguous
however ids look: a `%` or `:` inside qid or docid is written %25 / %3A, so splitting on "::" always gives three
parts and decoding gives the ids back. Researchy qids (digits) and ClueWeb22-IDs contain neither.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from generation.errors import ArgumentError
from generation.judging.batch_manifest import BatchManifest, NotExported, RequestFile, check_manifest
from generation.judging.judges import LLMJudge, Pair, PromptTooLong, failed
from generation.judging.openai_format import RequestFormat, check_shape
from generation.storage.atomic_files import commit, tmp_path

MAX_LINES = 50_000
MAX_BYTES = 200_000_000  # 200 MB, counted in decimal megabytes to stay within either reading
URLS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
SEPARATOR = "::"
SUFFIX = re.compile(r"\d+|h\d+(?:-\d+)?")  # a sub-question's part of a custom_id: k, or h{j}[-{i}]


# -- custom_id ------------------------------------------------------------------------------------------------------
def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def _unescape(part: str) -> str:
    return part.replace("%3A", ":").replace("%25", "%")


def subquestion_suffix(subq_id: str, qid: str) -> str:
    """What follows `{qid}-` in a subq_id (generation/stages/questions.py): the position k of the paper's
    decomposition (`{qid}-{k}`, the authors' i_subquestion), or `h{j}` / `h{j}-{i}` of `--decomposition headers`."""
    rest = subq_id[len(qid) + 1 :] if subq_id.startswith(f"{qid}-") else ""
    if not SUFFIX.fullmatch(rest):
        raise ValueError(
            f"sub-question id {subq_id!r} is not '{qid}-<position>' (or '{qid}-h<j>[-<i>]' of the "
            "headers decomposition)"
        )
    return str(int(rest)) if rest.isdigit() else rest


def custom_id(qid: str, docid: str, subq_id: str) -> str:
    return SEPARATOR.join([_escape(qid), _escape(docid), subquestion_suffix(subq_id, qid)])


def parse_custom_id(text: str) -> tuple[str, str, str]:
    """(qid, docid, subq_id) of a custom_id; ValueError when it is not one of ours."""
    parts = text.split(SEPARATOR)
    if len(parts) != 3 or not SUFFIX.fullmatch(parts[2]) or not parts[0] or not parts[1]:
        raise ValueError(f"custom_id {text!r} is not 'qid::docid::position'")
    qid, docid = _unescape(parts[0]), _unescape(parts[1])
    return qid, docid, f"{qid}-{int(parts[2]) if parts[2].isdigit() else parts[2]}"


# -- export ---------------------------------------------------------------------------------------------------------
class BatchRequests:
    """What a judge that exports is built on: it receives prompts as the server backend of the same shape does
    (messages in the chat shape, token ids in the completions shape) and runs nothing."""

    def __init__(self, request_format: RequestFormat):
        self.format = request_format
        self.takes_messages = request_format.shape == "chat"

    def generate(self, sequences, max_new_tokens):
        raise RuntimeError("a batch export writes requests; `vllm run-batch` or the Batch API runs them")

    next_token_logprobs = generate


def judge_format(judge: LLMJudge) -> RequestFormat:
    """The request format of a judge whose backend sends OpenAI requests (BatchRequests, the openai backend)."""
    fmt = getattr(judge.backend, "format", None)
    if not isinstance(fmt, RequestFormat):
        raise TypeError(f"the judge {judge.description} sends no OpenAI requests: it has no request format")
    return fmt


def request_format(config, shape: str | None = None) -> RequestFormat:
    """The request format of the profile's `openai` section (or the defaults, `chat`, when it has none)."""
    server = config.openai
    shape = shape or (server.request_shape if server is not None else "chat")
    check_shape(config, shape)
    if server is None:
        return RequestFormat(shape, config.model)
    return RequestFormat(shape, server.served_model or config.model, server.digit_logprobs, server.top_logprobs)


def export_judge(config, tokenizer, shape: str | None = None) -> LLMJudge:
    """An LLMJudge that builds the prompts of a batch export."""
    if config.prompt == "r3a":
        raise ArgumentError(
            "prompt r3a asks in two rounds, the second built from the first's answer: a batch file "
            "holds one round; judge it with a backend"
        )
    fmt = request_format(config, shape)
    return LLMJudge(config, BatchRequests(fmt), tokenizer, f"{fmt.model} (batch export, {fmt.shape})")


def request_body(judge: LLMJudge, payload) -> dict:
    fmt = judge_format(judge)
    if judge.config.mode == "distribution":
        return fmt.distribution_body(payload, judge.digit_ids)
    return fmt.generate_body(payload, judge.max_new_tokens)


@dataclass
class ExportSummary:
    pairs: int = 0
    files: list[RequestFile] = field(default_factory=list)
    cut_by_tokens: list[str] = field(default_factory=list)  # custom_ids whose context was cut to fit
    not_exported: list[NotExported] = field(default_factory=list)  # prompts over the budget


def request_lines(judge: LLMJudge, pairs: Iterable[tuple[str, Pair]], summary: ExportSummary) -> Iterator[bytes]:
    """One JSON line per (custom_id, pair); a pair whose prompt cannot fit is recorded in `summary` instead."""
    url = URLS[judge_format(judge).shape]
    for cid, pair in pairs:
        try:
            payload, cut = judge.encode_pair(pair)
        except PromptTooLong as error:
            summary.not_exported.append(NotExported(custom_id=cid, error=failed(error).raw))
            continue
        if cut:
            summary.cut_by_tokens.append(cid)
        line = {"custom_id": cid, "method": "POST", "url": url, "body": request_body(judge, payload)}
        yield (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class _RequestFile:
    """One request file being written under a temporary name, its lines, bytes and sha256 counted."""

    def __init__(self, final: Path):
        self.final, self.tmp = final, tmp_path(final)
        self.handle = open(self.tmp, "wb")
        self.digest, self.lines, self.bytes = hashlib.sha256(), 0, 0

    def fits(self, line: bytes, max_lines: int, max_bytes: int) -> bool:
        return self.lines + 1 <= max_lines and self.bytes + len(line) <= max_bytes

    def write(self, line: bytes) -> None:
        self.handle.write(line)
        self.digest.update(line)
        self.lines += 1
        self.bytes += len(line)

    def commit(self) -> RequestFile:
        self.handle.close()
        commit(self.tmp, self.final)
        return RequestFile(name=self.final.name, lines=self.lines, bytes=self.bytes, sha256=self.digest.hexdigest())

    def discard(self) -> None:
        self.handle.close()
        self.tmp.unlink(missing_ok=True)


def write_request_files(
    lines: Iterable[bytes],
    out_dir: Path,
    summary: ExportSummary,
    stem: str = "requests",
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
) -> None:
    """`lines` into `{stem}-00000.jsonl`, `{stem}-00001.jsonl`, ... each within max_lines and max_bytes, each
    appearing under its name only when complete."""
    out_dir.mkdir(parents=True, exist_ok=True)
    current: _RequestFile | None = None
    try:
        for line in lines:
            if len(line) > max_bytes:
                raise ValueError(f"one request line is {len(line)} bytes, over the file limit {max_bytes}")
            if current is not None and not current.fits(line, max_lines, max_bytes):
                summary.files.append(current.commit())
                current = None
            if current is None:
                current = _RequestFile(out_dir / f"{stem}-{len(summary.files):05d}.jsonl")
            current.write(line)
            summary.pairs += 1
    except BaseException:
        if current is not None:
            current.discard()
        raise
    if current is not None:
        summary.files.append(current.commit())


def export_batch(
    judge: LLMJudge,
    pairs: Iterable[tuple[str, Pair]],
    out_dir: str | Path,
    profile_hash: str,
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
) -> BatchManifest:
    """Request files for `pairs` ((custom_id, Pair), e.g. a shard's pairs still missing) and their manifest
    (returned, and written to out_dir/manifest.json)."""
    out_dir = Path(out_dir)
    summary = ExportSummary()
    write_request_files(
        request_lines(judge, pairs, summary), out_dir, summary, max_lines=max_lines, max_bytes=max_bytes
    )
    fmt = judge_format(judge)
    manifest = BatchManifest(
        profile_hash=profile_hash,
        prompt=judge.prompt.id,
        prompt_sha256=judge.prompt.sha256,
        request_shape=fmt.shape,
        url=URLS[fmt.shape],
        model=fmt.model,
        mode=judge.config.mode,
        digit_logprobs=fmt.digit_logprobs if judge.config.mode == "distribution" else None,
        pairs=summary.pairs,
        files=summary.files,
        context_cut_by_tokens=summary.cut_by_tokens,
        not_exported=summary.not_exported,
    )
    manifest.write(out_dir)
    return manifest


def check_export(manifest: BatchManifest, judge: LLMJudge, profile_hash: str) -> None:
    """Results are imported under the profile and prompt they were exported with, or not at all."""
    fmt = judge_format(judge)
    check_manifest(
        manifest,
        {
            "profile_hash": profile_hash,
            "prompt_sha256": judge.prompt.sha256,
            "request_shape": fmt.shape,
            "mode": judge.config.mode,
        },
    )
