"""Rerank each question's top BM25 hits with the profile's reranker; writes a `rerank` runs shard.

Backends: `transformers` and `vllm` score the Qwen3-Reranker input of the profile's `input_format`
(generation/judging/reranker_input.py; P(yes) over yes/no),
`bi-encoder` is the MiniLM cosine STAND-IN for machines without the model.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Protocol, Sequence

import pyarrow.compute as pc

from generation.docstore import DocStore, cut_words
from generation.models import resolve_model
from generation.profiles import Profile, Rerank
from generation.judging.reranker_input import make_encoder, rerank_query
from generation.stages.retrieve import RunSummary, RunWriter
from generation.shards import Shard, StageOutput, read_stage, skip_if_done, stage_hash
from generation.topics import load_topics

NAME = "rerank"


class Scorer(Protocol):
    description: str

    def score(self, instruction: str, query: str, documents: Sequence[str]) -> list[float]: ...


class QwenRerankerScorer:
    """P(yes) of a Qwen3-Reranker-style causal LM through the transformers backend (CPU or GPU)."""

    def __init__(self, config: Rerank, device: str = "auto"):
        from generation.backends.hf import TransformersBackend

        path = resolve_model(config.model)
        self.backend = TransformersBackend.from_config(path, config, "rerank", device=device)
        self.encoder = make_encoder(config, self.backend.tokenizer)
        tokenizer = self.backend.tokenizer
        self.no_id, self.yes_id = tokenizer.convert_tokens_to_ids("no"), tokenizer.convert_tokens_to_ids("yes")
        self.description = f"{config.model} (transformers, P(yes))"

    def score(self, instruction: str, query: str, documents: Sequence[str]) -> list[float]:
        sequences = [self.encoder.encode(instruction, query, d) for d in documents]
        logprobs = self.backend.next_token_logprobs(sequences, [self.no_id, self.yes_id])
        return [1.0 / (1.0 + math.exp(float(no) - float(yes))) for no, yes in logprobs]


class VllmScorer(QwenRerankerScorer):
    def __init__(self, config: Rerank):
        from transformers import AutoTokenizer

        from generation.backends.vllm_adapter import VllmReranker

        tokenizer = AutoTokenizer.from_pretrained(str(resolve_model(config.model)))
        self.encoder = make_encoder(config, tokenizer)
        self.engine = VllmReranker(str(resolve_model(config.model)), config.max_length, config.dtype)
        self.description = f"{config.model} (vLLM score)"

    def score(self, instruction: str, query: str, documents: Sequence[str]) -> list[float]:
        return self.engine.p_yes([self.encoder.encode(instruction, query, d) for d in documents])


class BiEncoderScorer:
    def __init__(self, config: Rerank):
        from generation.backends.biencoder import STAND_IN_NOTE, BiEncoder

        self.encoder = BiEncoder(config.model, config.batch_size, config.max_length)
        self.max_doc_words = config.max_doc_words
        self.description = f"{config.model} ({STAND_IN_NOTE})"

    def score(self, instruction: str, query: str, documents: Sequence[str]) -> list[float]:
        docs = [cut_words(d, self.max_doc_words) for d in documents]
        return self.encoder.cosine([query] * len(docs), docs).tolist()


def make_scorer(config: Rerank) -> Scorer:
    if config.backend == "bi-encoder":
        return BiEncoderScorer(config)
    if config.backend == "vllm":
        return VllmScorer(config)
    return QwenRerankerScorer(config)


def rank_by_score(docids: Sequence[str], scores: Sequence[float]) -> list[tuple[str, float]]:
    """Highest score first; ties keep the BM25 order."""
    order = sorted(range(len(docids)), key=lambda i: (-scores[i], i))
    return [(docids[i], float(scores[i])) for i in order]


def rerank(profile: Profile, questions: Path, runs: Path, index: Path, out: Path, shard: Shard = Shard(),
           scorer: Scorer | None = None, progress=None) -> RunSummary:
    config = profile.rerank
    stage = StageOutput(out, NAME, stage_hash(profile, NAME))
    summary = RunSummary()
    if skip_if_done(stage, shard, summary):
        return summary
    topics = load_topics(questions, shard)
    bm25 = read_stage(runs, "bm25", profile).to_table(
        columns=["qid", "docid", "rank"],
        filter=pc.field("qid").isin([t.qid for t in topics]) & (pc.field("rank") <= config.depth))
    hits: dict[str, list[tuple[int, str]]] = {}
    for qid, docid, rank in zip(*(bm25[c].to_pylist() for c in ("qid", "docid", "rank"))):
        hits.setdefault(qid, []).append((rank, docid))
    docs = DocStore(index)
    scorer = scorer or make_scorer(config)
    writer = RunWriter(stage, shard, f"researchy-subq-rerank-{config.backend}")
    try:
        for topic in topics:
            docids = [d for _, d in sorted(hits.get(topic.qid, []))]
            scores = scorer.score(config.instruction, rerank_query(config, topic.question, topic.subquestions),
                                  [docs.text(d) for d in docids]) if docids else []
            ranked = rank_by_score(docids, scores)
            writer.write(topic.qid, ranked)
            writer.flush()
            summary.queries += 1
            summary.rows += len(ranked)
            if progress is not None:
                progress()
    except BaseException:
        writer.abort()
        raise
    writer.close()
    stage.mark_done(shard, queries=summary.queries, scorer=scorer.description)
    summary.outputs += [stage.path(shard), writer.trec_path]
    return summary
