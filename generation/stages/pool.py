"""Candidate pool per question, by the profile's rule, with provenance.

union (the paper): top-k BM25 + top-k reranked + the question's clicked documents.
sequential (the authors' code): top-k BM25, then the reranker's top k BY RANK minus those already in (so at
most k new, never a document ranked below k), then clicked documents not yet in.
Both select the same set for the same sizes; the profiles differ in k (paper 20 + 20, crux-code 5 + 20).
Clicked documents missing from the corpus are skipped and reported.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from generation.corpus.topics import Topic, load_topics
from generation.corpus.url_hashes import URL_MAP, url_hashes_of
from generation.profiles.profile import Pool, Profile
from generation.stages.base import Input, ProfiledStage, StageSummary
from generation.stages.corpus import CorpusStage
from generation.stages.questions import QUESTIONS_FOLDER
from generation.stages.rerank import RerankStage
from generation.stages.retrieve import RetrieveStage
from generation.storage.atomic_files import ParquetSink, commit, tmp_path
from generation.storage.shards import Shard, StageOutput

NAME = "candidates"


SOURCES = ("bm25", "rerank", "clicked")  # the order in which the rule admits
NO_RULE = None  # a row no pool rule admits: a rank beyond the cut-offs and not clicked


def within(ranks: pa.Array | pa.ChunkedArray, top: int) -> pa.Array | pa.ChunkedArray:
    """rank in 1..top (false for a missing rank)."""
    return pc.and_(pc.greater_equal(ranks, 1), pc.less_equal(ranks, top)).fill_null(False)


def admitted_by(bm25_rank, rerank_rank, clicked, config: Pool) -> pa.Array | pa.ChunkedArray:
    """The pool rule, row by row: `bm25`, `rerank` or `clicked`, what admits a document first given its ranks and
    clicks; null where nothing admits it. `select` builds the pool with it, validate re-derives `source` with it and
    the synthetic stand-in release writes its sources with it."""
    # Both rules take the reranker's top k by rank and keep those not already in. The authors' sequential run
    # (crux-researchy/slurm/generate_ratings_offload.sh: --top_k 20 over the reranked run) loads ranks <= 20
    # (crux/tools/generic/ir_utils.py lines 17-18) and drops the pairs judged in the BM25 top-5 pass
    # (crux/augmentation/gen_ratings_offload.py lines 71-80): no rank below 20 is ever judged.
    by_click = pc.and_(pc.fill_null(clicked, False), pa.scalar(bool(config.include_clicked)))
    nothing = pa.scalar(NO_RULE, pa.string())
    return pc.if_else(
        within(bm25_rank, config.bm25_top),
        SOURCES[0],
        pc.if_else(within(rerank_rank, config.rerank_top), SOURCES[1], pc.if_else(by_click, SOURCES[2], nothing)),
    )


def first_positions(docids: Sequence[str]) -> dict[str, int]:
    """docid -> its first position, from 1 (its rank in a run)."""
    positions: dict[str, int] = {}
    for position, docid in enumerate(docids, 1):
        positions.setdefault(docid, position)
    return positions


def select(config: Pool, bm25: Sequence[str], reranked: Sequence[str], clicked: Sequence[str]) -> list[tuple[str, str]]:
    """(docid, source) in admission order: the BM25 admissions by rank, then the reranker's, then the clicked
    documents. `bm25` and `reranked` are ranked docids, `clicked` docids present in the corpus, most-clicked first."""
    positions = dict(zip(SOURCES, (first_positions(bm25), first_positions(reranked), first_positions(clicked))))
    docids = list(dict.fromkeys([*bm25, *reranked, *clicked]))
    sources = admitted_by(
        pa.array([positions["bm25"].get(d) for d in docids], pa.int64()),
        pa.array([positions["rerank"].get(d) for d in docids], pa.int64()),
        pa.array([d in positions["clicked"] for d in docids], pa.bool_()),
        config,
    ).to_pylist()
    admitted = [(docid, source) for docid, source in zip(docids, sources) if source is not NO_RULE]
    return sorted(admitted, key=lambda pair: (SOURCES.index(pair[1]), positions[pair[1]][pair[0]]))


def ranked_runs(files: list[Path], qids: list[str]) -> dict[str, list[str]]:
    table = ds.dataset(files, format="parquet").to_table(
        columns=["qid", "docid", "rank"], filter=pc.field("qid").isin(qids)
    )
    table = table.sort_by([("qid", "ascending"), ("rank", "ascending")])
    runs: dict[str, list[str]] = {}
    for qid, docid in zip(table["qid"].to_pylist(), table["docid"].to_pylist()):
        runs.setdefault(qid, []).append(docid)
    return runs


def clicked_docids(corpus: Path, topics: Sequence[Topic]) -> dict[str, str]:
    """url_hash -> docid for the shard's clicked documents found in the corpus's URL-hash map."""
    wanted = sorted({c["url_hash"] for t in topics for c in t.clicked})
    path = Path(corpus) / URL_MAP
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing; run `researchy-subq corpus` to the end first")
    table = pq.read_table(path, filters=[("url_hash", "in", wanted)]) if wanted else None
    return dict(zip(table["url_hash"].to_pylist(), table["docid"].to_pylist())) if table is not None else {}


@dataclass(slots=True)
class PoolSummary(StageSummary):
    questions: int = 0
    candidates: int = 0
    by_source: dict[str, int] = field(default_factory=lambda: {"bm25": 0, "rerank": 0, "clicked": 0})
    clicked_total: int = 0  # clicked documents the questions list
    clicked_missing: int = 0  # of them, those the corpus lacks


class PoolStage(ProfiledStage[PoolSummary]):
    """The candidate pool of each question by the profile's rule, with provenance; missing clicked documents reported."""

    name = "pool"
    produces = "`candidates-*.parquet`, `missing_clicked-*.tsv`"
    writes = NAME
    # the corpus by rows and size only: hashing the whole corpus for every pool shard would cost more than the pool
    reads = (
        QUESTIONS_FOLDER,
        Input("runs", "runs folder holding the bm25 and rerank runs", (RetrieveStage, RerankStage)),
        Input(
            "corpus", "corpus folder (its URL-hash map finds clicked documents)", (CorpusStage,), verify_sha256=False
        ),
    )
    sections = ("bm25", "rerank", "pool")
    unit = "questions"
    summary_type = PoolSummary

    def __init__(self, profile: Profile, out: Path, questions: Path, runs: Path, corpus: Path):
        super().__init__(profile, out, questions=questions, runs=runs, corpus=corpus)

    def run_shard(self, shard: Shard, output: StageOutput, summary: PoolSummary, progress, executor) -> dict:
        config = self.profile.pool
        topics = load_topics(self.inputs["questions"], shard)
        qids = [t.qid for t in topics]
        bm25 = ranked_runs(self.input_files["retrieve"], qids)
        reranked = ranked_runs(self.input_files["rerank"], qids)
        by_hash = clicked_docids(self.inputs["corpus"], topics)
        pooled = {d for run in (bm25, reranked) for docids in run.values() for d in docids} | set(by_hash.values())
        hash_of = url_hashes_of(self.input_files["corpus"], pooled)
        missing_path = self.out / f"missing_clicked-{shard.label}.tsv"
        missing_tmp = tmp_path(missing_path)
        with ParquetSink(output.path(shard), "candidates") as sink, open(missing_tmp, "w", newline="") as missing_file:
            missing = csv.writer(missing_file, delimiter="\t")
            missing.writerow(["qid", "url_hash", "url", "click_share"])
            for topic in topics:
                clicks: dict[str, float] = {}
                for doc in topic.clicked:
                    summary.clicked_total += 1
                    docid = by_hash.get(doc["url_hash"])
                    if docid is None:
                        summary.clicked_missing += 1
                        missing.writerow([topic.qid, doc["url_hash"], doc["url"], doc["click_share"]])
                    else:
                        clicks.setdefault(docid, doc["click_share"])
                bm25_rank = {d: r for r, d in enumerate(bm25.get(topic.qid, []), 1)}
                rerank_rank = {d: r for r, d in enumerate(reranked.get(topic.qid, []), 1)}
                chosen = select(config, bm25.get(topic.qid, []), reranked.get(topic.qid, []), list(clicks))
                sink.write_rows(
                    {
                        "qid": topic.qid,
                        "docid": docid,
                        "url_hash": hash_of.get(docid),
                        "bm25_rank": bm25_rank.get(docid),
                        "rerank_rank": rerank_rank.get(docid),
                        "clicked": docid in clicks,
                        "click_share": clicks.get(docid),
                        "source": source,
                    }
                    for docid, source in chosen
                )
                for _, source in chosen:
                    summary.by_source[source] += 1
                summary.candidates += len(chosen)
                summary.questions += 1
                self.tick(progress)
        commit(missing_tmp, missing_path)
        summary.outputs.append(missing_path)
        return {"clicked_missing": summary.clicked_missing, "clicked_total": summary.clicked_total}
