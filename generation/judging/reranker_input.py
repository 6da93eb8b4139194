"""Qwen3-Reranker inputs, in the two formats the profiles use, and the query builders of the profiles.

model-card (`paper`): the Qwen3-Reranker model card's scoring, PREFIX + "<Instruct>: {instruction}\\n<Query>:
{query}\\n<Document>: {doc}" + SUFFIX, the middle truncated so the whole fits max_length. PREFIX and SUFFIX are
what Qwen3's chat template renders around that user turn with the system turn, add_generation_prompt=True and
enable_thinking=False (tests/generation/judging/test_reranker_input.py checks it on the published template).

crux-code: DylanJoo/crux crux-researchy/rerank-candidates.py: every document whitespace-normalised and cut to its
first 5000 words (line 114); the user turn joins its parts with "\\n\\n" (line 23); the system and user turns
go through the chat template with add_generation_prompt=False, enable_thinking=False (lines 29-31), so the
user turn ends "<|im_end|>\\n"; the token ids are cut to max_length - len(SUFFIX ids) (lines 32 and 115, with
max_length 8192 at line 65), end of the document and of the turn first, and SUFFIX's ids are appended.

The score is P(yes) from the "no" and "yes" logits at the last position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from generation.corpus.docstore import cut_words
from generation.judging.prompts import authors_subquestion
from generation.profiles.profile import Rerank

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SYSTEM = (
    "Judge whether the Document meets the requirements based on the Query and the Instruct provided. "
    'Note that the answer can only be "yes" or "no".'
)
PREFIX = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n"
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
VLLM_HF_OVERRIDES = {
    "architectures": ["Qwen3ForSequenceClassification"],
    "classifier_from_token": ["no", "yes"],
    "is_original_qwen3_reranker": True,
}


def format_middle(instruction: str, query: str, document: str, separator: str = "\n") -> str:
    """The user turn: "\\n" between its parts on the model card, "\\n\\n" in rerank-candidates.py line 23."""
    return f"<Instruct>: {instruction}{separator}<Query>: {query}{separator}<Document>: {document}"


def rerank_query(config: Rerank, question: str, subquestions: Sequence[str]) -> str:
    if config.query_builder == "join-subquestions":  # the paper's Figure 1: {join(subquestions)}
        chosen = subquestions[: config.max_subquestions] if config.max_subquestions else subquestions
        return config.query_separator.join(chosen)
    # the authors' code (rerank-candidates.py lines 101-102): "[" + ", ".join([question] + subquestions[:10]) + "]",
    # the sub-questions as their loader gives them (prompts.authors_subquestion)
    chosen = subquestions[: config.max_subquestions or len(subquestions)]
    return "[" + ", ".join([question, *map(authors_subquestion, chosen)]) + "]"


@dataclass
class RerankEncoder:
    """Token ids for (instruction, query, document): prefix and suffix always whole, the middle cut to fit."""

    tokenizer: PreTrainedTokenizerBase
    max_length: int
    max_doc_words: int | None = None

    def __post_init__(self) -> None:
        self.prefix_ids = self.tokenizer.encode(PREFIX, add_special_tokens=False)
        self.suffix_ids = self.tokenizer.encode(SUFFIX, add_special_tokens=False)
        self.budget = self.max_length - len(self.prefix_ids) - len(self.suffix_ids)
        if self.budget < 16:
            raise ValueError(f"max_length {self.max_length} leaves {self.budget} tokens between prefix and suffix")

    def encode(self, instruction: str, query: str, document: str) -> list[int]:
        middle = format_middle(instruction, query, cut_words(document, self.max_doc_words))
        middle_ids = self.tokenizer.encode(middle, add_special_tokens=False, truncation=True, max_length=self.budget)
        return self.prefix_ids + middle_ids + self.suffix_ids


@dataclass
class AuthorsRerankEncoder:
    """Token ids built as crux-researchy/rerank-candidates.py builds them (module docstring)."""

    tokenizer: PreTrainedTokenizerBase
    max_length: int
    max_doc_words: int | None = None

    def __post_init__(self) -> None:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(
                "rerank input_format crux-code goes through the model's chat template, and this tokenizer has none"
            )
        self.suffix_ids = self.tokenizer.encode(SUFFIX, add_special_tokens=False)

    def render(self, instruction: str, query: str, document: str) -> str:
        document = " ".join(document.split()[: self.max_doc_words])
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": format_middle(instruction, query, document, "\n\n")},
        ]
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=False, enable_thinking=False
        )

    def encode(self, instruction: str, query: str, document: str) -> list[int]:
        # apply_chat_template(tokenize=True) tokenizes the rendered text without adding special tokens; the
        # text goes through encode here since transformers 5 returns a BatchEncoding from tokenize=True.
        ids = self.tokenizer.encode(self.render(instruction, query, document), add_special_tokens=False)
        return ids[: self.max_length - len(self.suffix_ids)] + self.suffix_ids


def make_encoder(config: Rerank, tokenizer) -> RerankEncoder | AuthorsRerankEncoder:
    encoder = AuthorsRerankEncoder if config.input_format == "crux-code" else RerankEncoder
    return encoder(tokenizer, config.max_length, config.max_doc_words)
