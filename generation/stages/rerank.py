"""Rerank each question's top BM25 hits with the profile's reranker; writes a `rerank` runs shard.

Backends: `transformers` and `vllm` score the Qwen3-Reranker input of the profile's `input_format`
(generation/judging/reranker_input.py; P(yes) over yes/no),
`bi-encoder` is the MiniLM cosine STAND-IN for machines without the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pyarrow.compute as pc
import pyarrow.dataset as ds

from generation.backends import make_scorer
from generation.corpus.docstore import DocStore
from generation.corpus.topics import load_topics
from generation.judging.reranker_input import rerank_query
from generation.profiles.profile import Profile
from generation.stages.base import Input, ProfiledStage
from generation.stages.index import INDEX_TEXTS
from generation.stages.questions import QUESTIONS_FOLDER
from generation.stages.retrieve import RetrieveStage, RunSummary, RunWriter
from generation.storage.shards import Shard, StageOutput

NAME = "rerank"


class Scorer(Protocol):
    description: str

    def score(self, instruction: str, query: str, documents: Sequence[str]) -> list[float]: ...


def rank_by_score(docids: Sequence[str], scores: Sequence[float]) -> list[tuple[str, float]]:
    """Highest score first; ties keep the BM25 order."""
    order = sorted(range(len(docids)), key=lambda i: (-scores[i], i))
    return [(docids[i], float(scores[i])) for i in order]


class RerankStage(ProfiledStage[RunSummary]):
    """Each question's top BM25 hits rescored by the profile's reranker (Qwen3-Reranker P(yes), or the stand-in)."""

    name = "rerank"
    produces = "`rerank-*.parquet` + `.trec`"
    writes = NAME
    reads = (
        QUESTIONS_FOLDER,
        Input("runs", "runs folder holding the bm25 run", (RetrieveStage,)),
        INDEX_TEXTS,
    )
    sections = ("bm25", "rerank")
    unit = "questions"
    summary_type = RunSummary

    def __init__(
        self, profile: Profile, out: Path, questions: Path, runs: Path, index: Path, scorer: Scorer | None = None
    ):
        super().__init__(profile, out, questions=questions, runs=runs, index=index)
        self.scorer = scorer

    def run_shard(self, shard: Shard, output: StageOutput, summary: RunSummary, progress, executor) -> dict:
        config = self.profile.rerank
        topics = load_topics(self.inputs["questions"], shard)
        bm25 = ds.dataset(self.input_files["retrieve"], format="parquet").to_table(
            columns=["qid", "docid", "rank"],
            filter=pc.field("qid").isin([t.qid for t in topics]) & (pc.field("rank") <= config.depth),
        )
        hits: dict[str, list[tuple[int, str]]] = {}
        for qid, docid, rank in zip(*(bm25[c].to_pylist() for c in ("qid", "docid", "rank"))):
            hits.setdefault(qid, []).append((rank, docid))
        docs = DocStore(self.inputs["index"])
        scorer = self.scorer or make_scorer(config)
        writer = RunWriter(output, shard, f"researchy-subq-rerank-{config.backend}")
        try:
            for topic in topics:
                docids = [d for _, d in sorted(hits.get(topic.qid, []))]
                docs.prefetch(docids)  # one read per corpus row group, in file order
                scores = (
                    scorer.score(
                        config.instruction,
                        rerank_query(config, topic.question, topic.subquestions),
                        [docs.text(d) for d in docids],
                    )
                    if docids
                    else []
                )
                ranked = rank_by_score(docids, scores)
                writer.write(topic.qid, ranked)
                writer.flush()
                summary.queries += 1
                summary.rows += len(ranked)
                self.tick(progress)
        except BaseException:
            writer.abort()
            raise
        writer.close()
        summary.outputs.append(writer.trec_path)
        return {"queries": summary.queries, "scorer": scorer.description}
