"""Judges: (sub-question, document) pairs -> grades. Prompt building and parsing live here; a backend
only turns token sequences into text or next-token log-probabilities."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Sequence

from generation.docstore import cut_words
from generation.parsing import Parsed, check_r3a_extract, extract_is_verbatim, parse_first_digit, parse_intent
from generation.profiles import Judge as JudgeConfig
from generation.prompts import Prompt, get_prompt, r3a_intent_turn


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


class Judge(Protocol):
    description: str

    def grade(self, pairs: Sequence[Pair]) -> list[Grade]: ...


class TokenBackend(Protocol):
    def generate(self, sequences: Sequence[Sequence[int]], max_new_tokens: int) -> list[str]: ...

    def next_token_logprobs(self, sequences: Sequence[Sequence[int]], token_ids: Sequence[int]): ...


class PromptEncoder:
    """Prompt text -> token ids, through the model's chat template or as plain text."""

    def __init__(self, tokenizer, chat_template: bool):
        self.tokenizer, self.chat_template = tokenizer, chat_template
        if chat_template and not getattr(tokenizer, "chat_template", None):
            raise ValueError("the profile asks for a chat template but the tokenizer has none")

    def encode(self, messages: list[dict]) -> list[int]:
        if self.chat_template:
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            return list(ids["input_ids"] if isinstance(ids, dict) else ids)
        text = "\n\n".join(m["content"] for m in messages)
        return self.tokenizer.encode(text, add_special_tokens=True)


def digit_token_ids(tokenizer, levels: Sequence[int]) -> list[int]:
    """Each level's digit as one token id, or a clear refusal (distribution mode needs exactly that)."""
    ids = []
    for level in levels:
        pieces = tokenizer.encode(str(level), add_special_tokens=False)
        if len(pieces) != 1:
            raise ValueError(f"distribution mode needs each digit to be one token; {str(level)!r} is {len(pieces)} "
                             f"tokens for this tokenizer ({pieces}); use mode: generate")
        ids.append(pieces[0])
    return ids


def distribution(logprobs: Sequence[float], levels: Sequence[int]) -> tuple[list[float], int, float]:
    """Renormalise the digit log-probabilities: probabilities, argmax level and expected level."""
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    probs = [w / total for w in weights]
    level = levels[max(range(len(probs)), key=probs.__getitem__)]
    return probs, level, sum(p * lv for p, lv in zip(probs, levels))


class LLMJudge:
    def __init__(self, config: JudgeConfig, backend: TokenBackend, tokenizer, description: str):
        self.config, self.backend, self.description = config, backend, description
        self.prompt: Prompt = get_prompt(config.prompt)
        self.encoder = PromptEncoder(tokenizer, config.chat_template)
        self.max_new_tokens = config.max_new_tokens or self.prompt.max_new_tokens
        if config.mode == "distribution":
            if not self.prompt.grade_first:
                raise ValueError(f"mode distribution reads the grade from the answer's first token, and prompt "
                                 f"{self.prompt.id!r} answers '<think> ...' before its score: use mode: generate")
            self.digit_ids = digit_token_ids(tokenizer, self.prompt.levels)

    def context(self, pair: Pair) -> str:
        return cut_words(pair.document, self.config.context_words)

    def grade(self, pairs: Sequence[Pair]) -> list[Grade]:
        if self.prompt.id == "r3a":
            return self._grade_r3a(pairs)
        sequences = [self.encoder.encode(self.prompt.messages(p.question, self.context(p))) for p in pairs]
        if self.config.mode == "distribution":
            grades = []
            for row in self.backend.next_token_logprobs(sequences, self.digit_ids):
                probs, level, expected = distribution([float(x) for x in row], self.prompt.levels)
                grades.append(Grade(level, str(level), probs, expected))
            return grades
        texts = self.backend.generate(sequences, self.max_new_tokens)
        return [Grade(parsed.level, t, status=parsed.status) for t, parsed in zip(texts, map(self._parse, texts))]

    def _parse(self, text: str) -> Parsed:
        if self.prompt.parser is parse_first_digit:
            return parse_first_digit(text, self.prompt.max_level)
        return self.prompt.parser(text)

    def _grade_r3a(self, pairs: Sequence[Pair]) -> list[Grade]:
        """Round one per distinct (question, auxiliary documents); round two per pair, with the intent turn."""
        keys = list(dict.fromkeys((p.question, p.auxiliary) for p in pairs))
        system = [{"role": "system", "content": self.prompt.system}]
        firsts = {key: [*system, {"role": "user", "content": r3a_intent_turn(key[0], [
            cut_words(d, self.config.context_words) for d in key[1]])}] for key in keys}
        intents = self.backend.generate([self.encoder.encode(firsts[k]) for k in keys], self.max_new_tokens)
        history = {k: firsts[k][1:] + [{"role": "assistant", "content": text}] for k, text in zip(keys, intents)}
        sequences = [self.encoder.encode(self.prompt.messages(p.question, self.context(p),
                                                              history[(p.question, p.auxiliary)])) for p in pairs]
        texts = self.backend.generate(sequences, self.max_new_tokens)
        grades = []
        for pair, text, key in zip(pairs, texts, [(p.question, p.auxiliary) for p in pairs]):
            parsed = check_r3a_extract(self._parse(text), self.context(pair))
            intent = parse_intent(intents[keys.index(key)]) or ""
            grades.append(Grade(parsed.level, f"<intent>{intent}</intent>\n{text}", None, None,
                                extract_is_verbatim(parsed.extract, self.context(pair)), parsed.status))
        return grades


class BiEncoderJudge:
    """STAND-IN judge: MiniLM cosine between sub-question and context, cut into levels by the profile's
    cut points (level = how many cut points the cosine reaches)."""

    def __init__(self, config: JudgeConfig):
        from generation.backends.biencoder import STAND_IN_NOTE, BiEncoder

        self.config = config
        self.encoder = BiEncoder(config.model, config.batch_size, config.max_model_len)
        self.description = f"{config.model} ({STAND_IN_NOTE})"

    def grade(self, pairs: Sequence[Pair]) -> list[Grade]:
        cosines = self.encoder.cosine([p.question for p in pairs],
                                      [cut_words(p.document, self.config.context_words) for p in pairs])
        cuts = self.config.cut_points or []
        return [Grade(sum(c >= cut for cut in cuts), f"stand-in bi-encoder cosine={c:.4f}") for c in cosines]
