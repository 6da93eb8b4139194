"""Before spending GPUs: how many pairs, how many prompt tokens, and what that costs in FLOPs and GPU-hours.

The pairs at hand are measured directly. The paper-scale rows are projected from the profile's own cut
(`judge.context_words`), twice, each labelled: from the documents of the corpus at hand cut at that
length (representative only when enough of them reach the cut), and from a stated assumption (every
document reaches the cut, at `tokens_per_word` judge tokens per word of web text).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from generation.corpus.docstore import DocStore, cut_words
from generation.judging.judges import PromptEncoder
from generation.judging.prompts import get_prompt, question_and_document_first
from generation.planning.document_first import PAPER_PAIRS_PER_GROUP, GroupMeasure, Groups, measure_groups
from generation.profiles.model_paths import MINILM, ModelNotAvailable, resolve_model
from generation.profiles.profile import Profile
from generation.stages.judge import plan_pairs
from generation.storage.shards import Shard

PAPER_PAIRS = 24_316_320
PAPER_SUBQUESTIONS = 1_288_976
PAPER_PAIRS_PER_SUBQUESTION = PAPER_PAIRS / PAPER_SUBQUESTIONS  # 18.87 (Ju et al., arXiv:2510.21733, section 4)
# Llama-3 tokens per whitespace word of web text, the assumption when the corpus at hand cannot measure it:
# the figure measured when `plan` was written (2,048 words of ClueWeb22 text ~ 2,900 Llama tokens). Override with --tokens-per-word.
LLAMA3_TOKENS_PER_WORD = 2900 / 2048
MIN_LONG_DOCUMENTS = 20  # sampled documents that must reach the cut for the measured paper row to stand


@dataclass(frozen=True)
class ModelSize:
    name: str = "Llama-3.3-70B"
    params: float = 70.6e9
    layers: int = 80
    hidden: int = 8192


# Dense tensor-core peaks of one H100 SXM (no sparsity).
H100_PEAK = {"bf16": 989e12, "fp8": 1979e12}


def flops_per_pair(model: ModelSize, prompt_tokens: float, new_tokens: int, cached_tokens: float = 0.0) -> float:
    """2 x params per token processed, plus causal attention: position p attends over p tokens at
    4 x layers x hidden FLOPs per token pair, so tokens [S, L) cost 2 x layers x hidden x (L^2 - S^2).
    `cached_tokens` (S) of the prompt come from the prefix cache and are not processed again."""
    total = prompt_tokens + new_tokens
    return 2 * model.params * (total - cached_tokens) + 2 * model.layers * model.hidden * (total**2 - cached_tokens**2)


def gpu_hours(pairs: int, flops: float, precision: str, utilisation: float) -> float:
    return pairs * flops / (H100_PEAK[precision] * utilisation) / 3600


def node_pairs_per_second(flops: float, precision: str, utilisation: float, gpus: int = 4) -> float:
    """Pairs per second one node of `gpus` H100s consumes at this utilisation."""
    return gpus * H100_PEAK[precision] * utilisation / flops


@dataclass(frozen=True)
class Scenario:
    """Prompt shape of one row of the plan."""

    label: str
    note: str
    pairs: int
    prompt_tokens: float
    shared_prefix_tokens: float
    pairs_per_subquestion: float
    new_tokens: int
    prompt: str = "crux-paper"
    groups: Groups | None = None  # a document-first prompt: each group's prefix computed once

    def flops(self, model: ModelSize, prefix_cached: bool = False) -> float:
        # The first pair of each sub-question pays its prefix; the others read it from the cache.
        reuse = (1 - 1 / self.pairs_per_subquestion) if prefix_cached and self.pairs_per_subquestion >= 1 else 0.0
        return flops_per_pair(model, self.prompt_tokens, self.new_tokens, reuse * self.shared_prefix_tokens)


@dataclass
class Plan:
    pairs: int
    subquestions: int
    sampled: int
    mean_prompt_tokens: float  # the sampled prompts, context cut at context_words words
    mean_overhead_tokens: float  # prompt tokens that are not the context (template, instruction, question)
    mean_shared_prefix_tokens: float  # common to two prompts of one sub-question with different documents
    new_tokens: int
    tokenizer: str
    stand_in: bool  # the judge's tokenizer was not on disk
    context_words: int
    tokens_per_word_here: float  # context tokens per word, this tokenizer on this corpus
    long_documents: int  # sampled documents with at least context_words words
    mean_context_tokens: float
    assumed_tokens_per_word: float = LLAMA3_TOKENS_PER_WORD
    questions: int = 0  # distinct questions of these pairs (the rerank stage's unit)
    prompt: str = "crux-paper"  # the prompt of the rows above: the profile's, or the question-first one it moved
    variant: GroupMeasure | None = None  # its document-first variant on the same pairs, when one is registered

    @property
    def measured_is_representative(self) -> bool:
        return self.long_documents >= MIN_LONG_DOCUMENTS

    @property
    def assumed_context_tokens(self) -> float:
        return self.context_words * self.assumed_tokens_per_word

    def scenarios(self) -> list[Scenario]:
        here = self.pairs / max(self.subquestions, 1)
        measured = (
            f"{self.long_documents} of {self.sampled} sampled documents reach the {self.context_words}-word cut"
            + (
                ""
                if self.measured_is_representative
                else f" (fewer than {MIN_LONG_DOCUMENTS}): NOT representative of the paper's corpus"
            )
        )
        return [
            Scenario(
                "these pairs",
                "measured on the sampled prompts",
                self.pairs,
                self.mean_prompt_tokens,
                self.mean_shared_prefix_tokens,
                here,
                self.new_tokens,
                self.prompt,
            ),
            Scenario(
                "paper, measured",
                f"the sampled prompts of this corpus at the paper's size; {measured}",
                PAPER_PAIRS,
                self.mean_prompt_tokens,
                self.mean_shared_prefix_tokens,
                PAPER_PAIRS_PER_SUBQUESTION,
                self.new_tokens,
                self.prompt,
            ),
            Scenario(
                "paper, assumed",
                f"ASSUMPTION: every document reaches the {self.context_words}-word cut at "
                f"{self.assumed_tokens_per_word:.3f} judge tokens per word = {self.assumed_context_tokens:,.0f} "
                f"context tokens, plus the {self.mean_overhead_tokens:,.0f} measured non-context tokens",
                PAPER_PAIRS,
                self.mean_overhead_tokens + self.assumed_context_tokens,
                self.mean_shared_prefix_tokens,
                PAPER_PAIRS_PER_SUBQUESTION,
                self.new_tokens,
                self.prompt,
            ),
        ] + self.variant_scenarios(here)

    def variant_scenarios(self, here: float) -> list[Scenario]:
        """The same three rows under the document-first variant: whole prompts of the same length, each group's
        prefix computed once."""
        if self.variant is None:
            return []
        v, groups = self.variant, self.variant.groups
        assumed_prefix = groups.prefix_tokens - v.mean_context_tokens + self.assumed_context_tokens
        paper_groups = f"ASSUMED {PAPER_PAIRS_PER_GROUP:.2f} sub-questions per question (1,288,976 over ~90,000)"
        rows = [
            ("these pairs", f"measured: {groups.pairs_per_group:.2f} pairs per group here", self.pairs, groups, 0.0),
            ("paper, measured", paper_groups, PAPER_PAIRS, groups.at_paper_scale(groups.prefix_tokens), 0.0),
            ("paper, assumed", f"{paper_groups}; documents at the cut as above", PAPER_PAIRS, None, assumed_prefix),
        ]
        out = []
        for label, note, pairs, shape, prefix in rows:
            shape = shape or groups.at_paper_scale(prefix)
            tokens = shape.prefix_tokens + shape.suffix_tokens
            out.append(
                Scenario(label, note, pairs, tokens, shape.prefix_tokens, here, self.new_tokens, v.prompt, shape)
            )
        return out

    def notes(self) -> list[str]:
        lines = [
            f"{self.pairs:,} pairs over {self.subquestions:,} sub-questions; {self.sampled} prompts tokenized with "
            f"{self.tokenizer}: mean {self.mean_prompt_tokens:,.0f} tokens, of which {self.mean_overhead_tokens:,.0f} "
            f"are not the context and {self.mean_shared_prefix_tokens:,.0f} are shared by two prompts of one "
            f"sub-question; {self.new_tokens} new tokens. Prefix reuse: these pairs "
            f"{self.pairs / max(self.subquestions, 1):.2f} per sub-question, paper {PAPER_PAIRS_PER_SUBQUESTION:.2f}."
        ]
        lines += [f"Row '{s.label}' ({s.prompt}): {s.note}." for s in self.scenarios()]
        if self.variant is not None:
            g = self.variant.groups
            lines.append(
                f"{self.variant.prompt}: the same pairs with the document before the sub-question. A group (one "
                f"question's document) shares {g.prefix_tokens:,.0f} prompt tokens, computed once; each pair adds "
                f"{g.suffix_tokens:,.0f} of its own; {g.pairs_per_group:.2f} pairs a group here (harmonic mean). Its "
                "labels can differ from the paper prompt's: `researchy-subq pilot` measures that on your GPUs."
            )
        elif self.prompt != "crux-paper":
            lines.append(f"{self.prompt} has no document-first variant registered: its rows alone.")
        if self.stand_in:
            shift = self.tokens_per_word_here / self.assumed_tokens_per_word - 1
            lines.append(
                f"The judge's tokenizer is not on disk: {self.tokenizer} stood in. It counts "
                f"{self.tokens_per_word_here:.3f} tokens per word of this corpus, against the "
                f"{self.assumed_tokens_per_word:.3f} assumed for Llama-3 on web text: measured rows are off by "
                f"about {shift:+.0%} in context tokens."
            )
        return lines


def load_tokenizer(name: str, stand_in: bool = True):
    """The named tokenizer, or (with `stand_in`, for the judge model's own) the bundled MiniLM WordPiece when it
    is not on disk (stand_in = True in the result). A tokenizer asked for by name is never stood in for."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(resolve_model(name))), name, False
    except ModelNotAvailable as e:
        if not stand_in:
            raise ModelNotAvailable(f"--tokenizer {name}: {e}") from None
        return (
            AutoTokenizer.from_pretrained(str(resolve_model(MINILM))),
            f"{MINILM} (WordPiece; stand-in for {name})",
            True,
        )


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def measure(
    profile: Profile,
    subquestions: Path,
    candidates: Path,
    index: Path,
    sample: int = 200,
    tokenizer: str | None = None,
    seed: int = 0,
    tokens_per_word: float = LLAMA3_TOKENS_PER_WORD,
) -> Plan:
    config = profile.judge
    tok, tokenizer_name, stand_in = load_tokenizer(tokenizer or config.model, stand_in=tokenizer is None)
    pairs = plan_pairs(subquestions, candidates, Shard())
    chosen = random.Random(seed).sample(pairs, min(sample, len(pairs)))
    by_subq: dict[str, list[str]] = {}
    for p in pairs:
        by_subq.setdefault(p["subq_id"], []).append(p["docid"])
    encoder = PromptEncoder(tok, config.chat_template and bool(getattr(tok, "chat_template", None)))
    faithful, variant = question_and_document_first(config.prompt)
    prompt = get_prompt(faithful)
    docs = DocStore(index)
    lengths, overheads, prefixes, context_tokens, words, long_docs = [], [], [], [], [], 0
    for row in chosen:
        document = docs.text(row["docid"])
        context = cut_words(document, config.context_words)
        ids = encoder.encode(prompt.messages(row["text"], context))
        lengths.append(len(ids))
        n_context = len(tok.encode(context, add_special_tokens=False))
        context_tokens.append(n_context)
        overheads.append(len(ids) - n_context)
        words.append(len(context.split()))
        long_docs += len(document.split()) >= config.context_words
        other = next((d for d in by_subq[row["subq_id"]] if d != row["docid"]), None)
        if other is not None:
            other_ids = encoder.encode(prompt.messages(row["text"], cut_words(docs.text(other), config.context_words)))
            prefixes.append(common_prefix(ids, other_ids))
    n = max(len(chosen), 1)
    groups = None
    if variant is not None:
        groups = measure_groups(chosen, pairs, docs, encoder, get_prompt(variant), config.context_words)
    return Plan(
        len(pairs),
        len(by_subq),
        len(chosen),
        sum(lengths) / n,
        sum(overheads) / n,
        sum(prefixes) / max(len(prefixes), 1),
        config.max_new_tokens or prompt.max_new_tokens,
        tokenizer_name,
        stand_in,
        config.context_words,
        sum(context_tokens) / max(sum(words), 1),
        long_docs,
        sum(context_tokens) / n,
        tokens_per_word,
        len({p["qid"] for p in pairs}),
        faithful,
        groups,
    )
