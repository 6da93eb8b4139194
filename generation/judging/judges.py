"""Judges: (sub-question, document) pairs -> grades. Prompt building and parsing live here; a backend
only turns token sequences into text or next-token log-probabilities."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from generation.corpus.docstore import cut_words
from generation.errors import BackendError, PartlyFailed, without_frames
from generation.judging.document_prompts import DocumentPrompts, document_pieces, pipelined
from generation.judging.parsing import Parsed, check_r3a_extract, extract_is_verbatim, parse_intent, r3a_raw
from generation.judging.prompt_encoding import PromptEncoder, PromptTooLong, fit_context
from generation.judging.prompts import Prompt, get_prompt, r3a_intent_turn
from generation.notices import warn
from generation.profiles.profile import JudgeConfig


@dataclass(frozen=True)
class Pair:
    question: str  # the sub-question being judged
    document: str  # the document text, not yet cut
    auxiliary: tuple[str, ...] = ()  # r3a: the question's top-ranked candidates


@dataclass(frozen=True)
class Grade:
    level: int | None
    raw: str
    probs: list[float] | None = None
    expected: float | None = None
    extract_verbatim: bool | None = None
    status: str = "ok"  # one of schema.JUDGMENT_STATUSES
    context_cut_by_tokens: bool = False


class Judge(Protocol):
    description: str

    def grade(self, pairs: Sequence[Pair]) -> list[Grade]: ...


class TokenBackend(Protocol):
    """Turns prompts into answers. A backend with `takes_messages = True` is handed each prompt as its chat
    messages (fitted to the token budget here) instead of token ids. An answer may be a `RequestFailed` in place
    of the text or log-probabilities: that item alone failed.

    A backend with `prefix_groups = True` also takes `groups`, a key per prompt: prompts of one key share a long
    prefix (one document's, under a document-first prompt), which it computes once or sends so that its server's
    prefix cache serves the rest of the group. One with `prepared_ahead = True` too gets them by pieces of whole
    documents, the next piece's prompts built while it answers this one (a thread: document_prompts.pipelined)."""

    def generate(self, sequences: Sequence[Sequence[int]], max_new_tokens: int) -> list[str]: ...

    def next_token_logprobs(self, sequences: Sequence[Sequence[int]], token_ids: Sequence[int]): ...


class RequestFailed(RuntimeError):
    """One item's request to a served model failed for good (its retries spent): the pair's status is
    `request_failed`, the authors' "-2", with this text in `raw`."""


class BackendUnavailable(BackendError):
    """The backend as a whole cannot answer (its server is gone): no item is to blame, so nothing is bisected
    and the chunk in hand is not written."""


def isolate_failures(call: Callable[[list], list], items: list) -> list:
    """`call(items)`; when the engine fails on the batch, the halves are tried again, down to single items,
    so one bad prompt costs only itself (a few extra calls, batching kept for the rest): its place in the
    result holds the exception. When every item fails the failure is not the items' (engine down, out of
    memory): the first error is raised; for a served model (every request of two or more failed after its retries:
    a quota spent, a key rejected, a proxy in front of a dead server) as BackendUnavailable, one line for the user.
    One request alone that fails is no sign of an outage (a poison pair): it fails alone."""
    results = _bisect(call, items)  # BackendUnavailable passes through
    if results and all(isinstance(r, Exception) for r in results):
        if isinstance(results[0], RequestFailed):
            if len(results) == 1:
                return results
            raise BackendUnavailable(
                f"every one of the {len(results)} requests of a batch failed, the first with: {results[0]}"
            ) from None
        raise results[0]
    return results


def _bisect(call: Callable[[list], list], items: list) -> list:
    try:
        return list(call(items))
    except BackendUnavailable:
        raise
    except PartlyFailed as partial:  # the backend kept what it finished: only the failed items are marked
        return partial.merged()
    except Exception as error:  # noqa: BLE001 - the engines' errors are not of one type
        if len(items) == 1:
            return [without_frames(error)]
    middle = len(items) // 2
    return _bisect(call, items[:middle]) + _bisect(call, items[middle:])


def failed(error: Exception) -> Grade:
    status = "request_failed" if isinstance(error, RequestFailed) else "engine_error"
    return Grade(None, f"{type(error).__name__}: {error}"[:2000], status=status)


def digit_token_ids(tokenizer, levels: Sequence[int]) -> list[int]:
    """Each level's digit as one token id, or a clear refusal (distribution mode needs exactly that)."""
    ids = []
    for level in levels:
        pieces = tokenizer.encode(str(level), add_special_tokens=False)
        if len(pieces) != 1:
            raise ValueError(
                f"distribution mode needs each digit to be one token; {str(level)!r} is {len(pieces)} "
                f"tokens for this tokenizer ({pieces}); use mode: generate"
            )
        ids.append(pieces[0])
    return ids


def distribution(logprobs: Sequence[float], levels: Sequence[int]) -> tuple[list[float], int, float]:
    """Renormalise the digit log-probabilities: probabilities, argmax level and expected level."""
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    probs = [w / total for w in weights]
    # The argmax of the probabilities as they are stored (float32), the lowest level on a tie (numpy's first
    # maximum), so a stored row determines its level: `validate` re-derives it (builder/release/validate/rederive.py).
    level = levels[int(np.argmax(np.asarray(probs, np.float32)))]
    return probs, level, sum(p * lv for p, lv in zip(probs, levels))


# A pair's prompt as the backend takes it (token ids, or messages for a backend that takes messages), and whether its
# context was cut to fit; or the PromptTooLong that stands in for it.
Encoded = tuple[list[int] | list[dict], bool]

PIECE_BATCHES = 4  # a document-first judge's pieces hold about this many batches (`batch_size` pairs) of pairs


class LLMJudge:
    def __init__(self, config: JudgeConfig, backend: TokenBackend, tokenizer, description: str):
        self.config, self.backend, self.description = config, backend, description
        self.takes_messages = bool(getattr(backend, "takes_messages", False))
        self.prompt: Prompt = get_prompt(config.prompt)
        # a document-first prompt's pairs of one document share everything up to the sub-question
        self.groups_documents = self.prompt.document_first and bool(getattr(backend, "prefix_groups", False))
        self.encoder = PromptEncoder(tokenizer, config.chat_template)
        self.document_prompts = DocumentPrompts(self.encoder, self.prompt)
        self.tokenized_whole = 0  # pairs of a document-first prompt tokenized whole (document_prompts.py)
        self.max_new_tokens = config.max_new_tokens or self.prompt.max_new_tokens
        if config.mode == "distribution":
            if not self.prompt.grade_first:
                raise ValueError(
                    f"mode distribution reads the grade from the answer's first token, and prompt "
                    f"{self.prompt.id!r} answers '<think> ...' before its score: use mode: generate"
                )
            self.digit_ids = digit_token_ids(tokenizer, self.prompt.levels)

    def context(self, pair: Pair) -> str:
        return cut_words(pair.document, self.config.context_words)

    @property
    def budget(self) -> int:
        """Prompt tokens that leave room for the answer within max_model_len."""
        return self.config.max_model_len - self.max_new_tokens

    def encode_pair(self, pair: Pair, history: list[dict] | None = None) -> Encoded:
        """The pair's prompt ids (its messages, for a backend that takes messages), its context cut by tokens
        (after the word cut) when the prompt would not fit; and whether it was."""

        def messages(context: str) -> list[dict]:
            return self.prompt.messages(pair.question, context, history)

        context = self.context(pair)
        ids, used = fit_context(
            self.encoder.tokenizer, lambda c: self.encoder.encode(messages(c)), context, self.budget
        )
        return (messages(used) if self.takes_messages else ids), used != context

    def _encode_all(self, pairs: Sequence[Pair], histories=None) -> list[Encoded | Exception]:
        """`encode_pair` of each pair: all tokenized in one batch (a document-first prompt's document part once per
        document: document_prompts.py), then those over the budget cut one by one."""
        token_ids: list[list[int] | None] = (
            self._document_first_ids(pairs) if histories is None else [None] * len(pairs)
        )
        whole = [i for i, ids in enumerate(token_ids) if ids is None]
        messages = {
            i: self.prompt.messages(pairs[i].question, self.context(pairs[i]), histories[i] if histories else None)
            for i in (range(len(pairs)) if self.takes_messages else whole)
        }
        for i, whole_ids in zip(whole, self.encoder.encode_many([messages[i] for i in whole])):
            token_ids[i] = whole_ids
        encoded: list[Encoded | Exception] = []
        for i, (pair, ids) in enumerate(zip(pairs, token_ids)):
            if ids is not None and len(ids) <= self.budget:  # every pair has its ids by now
                encoded.append((messages[i] if self.takes_messages else ids, False))
                continue
            try:
                encoded.append(self.encode_pair(pair, histories[i] if histories else None))
            except PromptTooLong as error:
                encoded.append(error)
        return encoded

    def _document_first_ids(self, pairs: Sequence[Pair]) -> list[list[int] | None]:
        """A document-first prompt's ids, a document's part once (document_prompts.py); None where a pair is to be
        tokenized whole: counted in `tokenized_whole`, with a notice."""
        if self.takes_messages or not self.document_prompts.usable:
            return [None] * len(pairs)
        token_ids = self.document_prompts.encode_pairs(pairs, self.context)
        whole = sum(ids is None for ids in token_ids)
        if whole:
            self.tokenized_whole += whole
            warn(
                f"judge: {whole} of {len(pairs)} pairs tokenized whole: their tokens did not split where the "
                f"document's part of prompt {self.prompt.id!r} ends (the same ids, more tokenizer work)"
            )
        return token_ids

    def _run(self, call, encoded: list, keys: list | None = None) -> list:
        """The backend's answers for the encoded prompts; an exception in place of each one that failed. With
        `keys`, each prompt travels with its group's key (so a bisection keeps them paired) and the backend gets
        them as `groups`."""
        ready = [i for i, e in enumerate(encoded) if not isinstance(e, Exception)]
        if keys is None:
            answers = isolate_failures(call, [encoded[i][0] for i in ready]) if ready else []
        else:
            items = [(encoded[i][0], keys[i]) for i in ready]
            grouped = lambda got: call([p for p, _ in got], groups=[k for _, k in got])  # noqa: E731
            answers = isolate_failures(grouped, items) if items else []
        results = list(encoded)
        for i, answer in zip(ready, answers):
            results[i] = answer
        return results

    def grade(self, pairs: Sequence[Pair]) -> list[Grade]:
        if self.prompt.id == "r3a":
            return self._grade_r3a(pairs)
        if not (self.groups_documents and getattr(self.backend, "prepared_ahead", False)):
            keys = [p.document for p in pairs] if self.groups_documents else None
            return self._grade_encoded(pairs, self._encode_all(pairs), keys)
        # by pieces of whole documents, the next piece's prompts built while the backend answers this one's
        pieces = document_pieces([p.document for p in pairs], PIECE_BATCHES * self.config.batch_size)

        def run(piece: list[int], encoded: list) -> list[Grade]:
            piece_pairs = [pairs[i] for i in piece]
            return self._grade_encoded(piece_pairs, encoded, [p.document for p in piece_pairs])

        graded = pipelined(pieces, lambda piece: self._encode_all([pairs[i] for i in piece]), run)
        by_position = {i: grade for piece, grades in zip(pieces, graded) for i, grade in zip(piece, grades)}
        return [by_position[i] for i in range(len(pairs))]

    def _grade_encoded(self, pairs: Sequence[Pair], encoded: list, keys: list | None) -> list[Grade]:
        if self.config.mode == "distribution":
            answers = self._run(
                lambda seqs, **kw: self.backend.next_token_logprobs(seqs, self.digit_ids, **kw), encoded, keys
            )
        else:
            answers = self._run(
                lambda seqs, **kw: self.backend.generate(seqs, self.max_new_tokens, **kw), encoded, keys
            )
        return [
            self.grade_answer(answer, not isinstance(enc, Exception) and enc[1])
            for answer, enc in zip(answers, encoded)
        ]

    def grade_answer(self, answer, cut: bool = False) -> Grade:
        """One pair's answer (its text in generate mode, the digits' log-probabilities in distribution mode, or
        the exception that took its place) -> its Grade. Also what an import of batch results grades with."""
        if isinstance(answer, Exception):
            return failed(answer)
        if self.config.mode == "distribution":
            return self._distribution_grade(answer, cut)
        return self._text_grade(answer, cut)

    def _distribution_grade(self, row, cut: bool) -> Grade:
        probs, level, expected = distribution([float(x) for x in row], self.prompt.levels)
        return Grade(level, str(level), probs, expected, context_cut_by_tokens=cut)

    def _text_grade(self, text: str, cut: bool) -> Grade:
        parsed = self._parse(text)
        return Grade(parsed.level, text, status=parsed.status, context_cut_by_tokens=cut)

    def _parse(self, text: str) -> Parsed:
        return self.prompt.parse(text)

    def _intent_messages(self, question: str, documents: list[str]) -> list[dict]:
        return [
            {"role": "system", "content": self.prompt.system},
            {"role": "user", "content": r3a_intent_turn(question, documents)},
        ]

    def _encode_intent(self, question: str, auxiliary: tuple[str, ...]) -> tuple[list[int], list[dict]]:
        """Round one's prompt ids and messages within the budget: the last auxiliary documents are cut by tokens
        first, then dropped."""
        docs = [cut_words(d, self.config.context_words) for d in auxiliary]
        for j in range(len(docs), 0, -1):
            try:

                def with_last(context: str, j: int = j) -> list[int]:
                    return self.encoder.encode(self._intent_messages(question, docs[: j - 1] + [context]))

                ids, last = fit_context(self.encoder.tokenizer, with_last, docs[j - 1], self.budget)
                return ids, self._intent_messages(question, docs[: j - 1] + [last])
            except PromptTooLong:
                continue
        messages = self._intent_messages(question, [])  # no document fits: raises PromptTooLong if even this does not
        ids, _ = fit_context(self.encoder.tokenizer, lambda _: self.encoder.encode(messages), "", self.budget)
        return ids, messages

    def _grade_r3a(self, pairs: Sequence[Pair]) -> list[Grade]:
        """Round one per distinct (question, auxiliary documents); round two per pair, with the intent turn."""
        keys = list(dict.fromkeys((p.question, p.auxiliary) for p in pairs))
        firsts: dict[tuple[str, tuple[str, ...]], tuple[list[int], list[dict]] | PromptTooLong] = {}
        for question, auxiliary in keys:
            try:
                firsts[(question, auxiliary)] = self._encode_intent(question, auxiliary)
            except PromptTooLong as error:
                firsts[(question, auxiliary)] = error
        answers = self._run(
            lambda seqs: self.backend.generate(seqs, self.max_new_tokens),
            [
                f if isinstance(f, Exception) else (f[1] if self.takes_messages else f[0], False)
                for f in firsts.values()
            ],
        )
        intents = dict(zip(keys, answers))

        def history(key: tuple[str, tuple[str, ...]]) -> list[dict] | None:
            first, intent = firsts[key], intents[key]
            if isinstance(intent, Exception) or isinstance(first, PromptTooLong):  # a prompt's failure is its answer
                return None
            return [*first[1][1:], {"role": "assistant", "content": intent}]

        histories = [history((p.question, p.auxiliary)) for p in pairs]
        encoded: list[Encoded | Exception] = [
            intents[(p.question, p.auxiliary)] if h is None else enc
            for p, h, enc in zip(pairs, histories, self._encode_all(pairs, histories))
        ]
        texts = self._run(lambda seqs: self.backend.generate(seqs, self.max_new_tokens), encoded)
        grades = []
        for pair, text, enc in zip(pairs, texts, encoded):
            if isinstance(text, Exception) or isinstance(enc, Exception):  # a prompt's failure is its answer (_run)
                grades.append(failed(text))
                continue
            parsed = check_r3a_extract(self._parse(text), self.context(pair))
            intent = parse_intent(intents[(pair.question, pair.auxiliary)]) or ""
            grades.append(
                Grade(
                    parsed.level,
                    r3a_raw(intent, text),
                    None,
                    None,
                    extract_is_verbatim(parsed.extract, self.context(pair)),
                    parsed.status,
                    enc[1],
                )
            )
        return grades
