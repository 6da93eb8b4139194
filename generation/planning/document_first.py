"""What the document-first prompt costs beside the paper's: one prefix per (question, document) group, computed
once, and a short suffix per pair (its sub-question and the answer's header) run against it.

Measured on the pairs at hand: the tokens a group's prompts share (the prefix), the tokens each adds (its suffix),
and pairs per group (a question's sub-questions: every pool document is judged against each). A pair pays its
suffix and 1/g of its group's prefix; the mean of 1/g over the pairs is what the prefix costs per pair, so the
groups' size is given as its harmonic mean. At the paper's scale the group size is an assumption, stated:
1,288,976 sub-questions over the ~90,000 questions of Researchy Questions' train split (the paper gives no
question count). The suffixes run as short batches against the cached prefix, far below the prefill's share of
peak: the calibration's `suffix` figure prices them (generation/judging/calibration.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from generation.corpus.docstore import DocStore, cut_words
from generation.judging.judges import PromptEncoder
from generation.judging.prompts import Prompt
from generation.model_shapes import Shape, prompt_flops

PAPER_QUESTIONS_ASSUMED = 90_000  # Researchy Questions' train split, which the paper judged (about 90k: DESIGN.md)
PAPER_SUBQUESTIONS = 1_288_976  # Ju et al., arXiv:2510.21733, section 4
PAPER_PAIRS_PER_GROUP = PAPER_SUBQUESTIONS / PAPER_QUESTIONS_ASSUMED  # 14.32 sub-questions per question


@dataclass(frozen=True)
class Groups:
    """The shape of one document's group of prompts: its shared prefix, each pair's own suffix, pairs per group."""

    prefix_tokens: float
    suffix_tokens: float
    pairs_per_group: float

    def flops(self, shape: Shape, new_tokens: int) -> float:
        """Per pair: 1/g of the prefix, plus its suffix and answer attending over the prefix."""
        prefix, whole = self.prefix_tokens, self.prefix_tokens + self.suffix_tokens + new_tokens
        return prompt_flops(shape, prefix) / self.pairs_per_group + prompt_flops(shape, whole, prefix)

    def split_flops(self, shape: Shape, new_tokens: int) -> tuple[float, float]:
        """(the prefix's share per pair, the suffix's) of `flops`: they run at different shares of peak."""
        prefix, whole = self.prefix_tokens, self.prefix_tokens + self.suffix_tokens + new_tokens
        return prompt_flops(shape, prefix) / self.pairs_per_group, prompt_flops(shape, whole, prefix)

    def at_paper_scale(self, prefix_tokens: float) -> Groups:
        return Groups(prefix_tokens, self.suffix_tokens, PAPER_PAIRS_PER_GROUP)


@dataclass(frozen=True)
class GroupMeasure:
    prompt: str
    groups: Groups
    mean_prompt_tokens: float  # whole prompts of the variant (the same pairs as the faithful rows)
    mean_context_tokens: float


def measure_groups(
    chosen: list[dict], pairs: list[dict], docs: DocStore, encoder: PromptEncoder, prompt: Prompt, context_words: int
) -> GroupMeasure:
    """The document-first prompt's groups, from the sampled pairs: each one's prompt against the same document's
    prompt for another sub-question of its question (their common tokens are the prefix)."""
    subquestions: dict[str, list[str]] = {}
    for p in pairs:
        texts = subquestions.setdefault(p["qid"], [])
        if p["text"] not in texts:
            texts.append(p["text"])
    tokens, prefixes, suffixes, shares, context = [], [], [], [], []
    for row in chosen:
        text = cut_words(docs.text(row["docid"]), context_words)
        ids = encoder.encode(prompt.messages(row["text"], text))
        tokens.append(len(ids))
        context.append(len(encoder.tokenizer.encode(text, add_special_tokens=False)))
        asked = subquestions[row["qid"]]
        shares.append(1 / len(asked))
        other = next((q for q in asked if q != row["text"]), None)
        if other is not None:
            other_ids = encoder.encode(prompt.messages(other, text))
            shared = next((i for i, (a, b) in enumerate(zip(ids, other_ids)) if a != b), min(len(ids), len(other_ids)))
            prefixes.append(shared)
            suffixes.append(len(ids) - shared)
    n = max(len(chosen), 1)
    mean = lambda values: sum(values) / max(len(values), 1)  # noqa: E731
    groups = Groups(mean(prefixes), mean(suffixes), 1 / mean(shares) if shares else 1.0)
    return GroupMeasure(prompt.id, groups, sum(tokens) / n, sum(context) / n)
