"""Qwen3-Reranker inputs in the official format, and the query builders of the profiles.

Official scoring (Qwen3-Reranker model card): PREFIX + "<Instruct>: {instruction}\\n<Query>: {query}\\n
<Document>: {doc}" + SUFFIX, the middle truncated so the whole fits max_length; the score is the softmax
over the logits of "no" and "yes" at the last position, P(yes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from generation.docstore import cut_words
from generation.profiles import Rerank

PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
          "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
VLLM_HF_OVERRIDES = {"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"],
                     "is_original_qwen3_reranker": True}


def format_middle(instruction: str, query: str, document: str) -> str:
    return f"<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"


def rerank_query(config: Rerank, question: str, subquestions: Sequence[str]) -> str:
    if config.query_builder == "join-subquestions":  # the paper's Figure 1: {join(subquestions)}
        chosen = subquestions[: config.max_subquestions] if config.max_subquestions else subquestions
        return config.query_separator.join(chosen)
    # the authors' code: "[" + ", ".join([question] + subquestions[:10]) + "]"
    return "[" + ", ".join([question, *subquestions[: config.max_subquestions or len(subquestions)]]) + "]"


@dataclass
class RerankEncoder:
    """Token ids for (instruction, query, document): prefix and suffix always whole, the middle cut to fit."""

    tokenizer: object
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
