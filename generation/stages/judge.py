"""Judge every (sub-question x candidate of its question) pair of a shard, in checkpointed chunks.

Pairs are laid out deterministically (questions in file order, then sub-questions, then candidates in
pool order, so pairs sharing a prompt prefix run together) and cut into chunks of `chunk_size`. Each
chunk is written atomically to `judgments-XXXXX-of-YYYYY.chunks/chunk-NNNNNN.parquet`, so `kill -9`
loses at most the chunk in flight and a resumed run never writes a pair twice. When every chunk is
there they are merged into the shard file and its completion record.
"""
from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from generation.docstore import DocStore
from generation.judging.judges import BiEncoderJudge, Grade, Judge, LLMJudge, Pair
from generation.models import resolve_model
from generation.profiles import Judge as JudgeConfig
from generation.profiles import Profile
from generation.shards import Shard, ShardError, StageOutput, read_stage, skip_if_done, stage_hash
from generation.storage import ParquetSink, write_text_atomic
from generation.topics import question_files

NAME = "judgments"
PAIR_COLUMNS = ["subq_id", "qid", "docid", "url_hash", "bm25_rank", "rerank_rank", "clicked", "source"]


@dataclass
class JudgeSummary:
    pairs: int = 0
    judged_now: int = 0
    chunks_done_before: int = 0
    levels: Counter = field(default_factory=Counter)
    unparsed: int = 0
    not_verbatim: int = 0
    statuses: Counter = field(default_factory=Counter)  # schema.JUDGMENT_STATUSES -> judgments
    cut_by_tokens: int = 0  # contexts cut further, by tokens, to fit max_model_len
    skipped_shards: int = 0
    judge: str = ""
    outputs: list[Path] = field(default_factory=list)


def plan_pairs(subquestions: Path, candidates: Path, shard: Shard, profile: Profile | None = None) -> list[dict]:
    """The shard's pairs in judging order, with the sub-question text and provenance; no document text."""
    _, subq_path = question_files(subquestions)
    subqs = pq.read_table(subq_path, columns=["subq_id", "qid", "text"])
    subqs = subqs.filter([shard.owns_key(q) for q in subqs["qid"].to_pylist()])
    pool = read_stage(candidates, "candidates", profile).to_table(
        columns=[c for c in PAIR_COLUMNS if c != "subq_id"],
        filter=pc.field("qid").isin(subqs["qid"].unique()))
    by_qid: dict[str, list[dict]] = {}
    for row in pool.to_pylist():
        by_qid.setdefault(row["qid"], []).append(row)
    pairs = []
    for subq_id, qid, text in zip(*(subqs[c].to_pylist() for c in ("subq_id", "qid", "text"))):
        for cand in by_qid.get(qid, []):
            pairs.append({"subq_id": subq_id, "text": text, **cand})
    return pairs


def judgment_row(pair: dict, grade: Grade) -> dict:
    """One judgments row: the pair's ids and provenance, and what the judge made of it."""
    return {**{c: pair[c] for c in PAIR_COLUMNS}, "level": grade.level, "raw": grade.raw, "status": grade.status,
            "probs": grade.probs, "expected": grade.expected, "extract_verbatim": grade.extract_verbatim,
            "context_cut_by_tokens": grade.context_cut_by_tokens}


def auxiliary_docids(pairs: list[dict], k: int) -> dict[str, tuple[str, ...]]:
    """r3a round one: each question's top-k candidates by rerank rank (then BM25 rank)."""
    best: dict[str, dict[str, tuple]] = {}
    for p in pairs:
        key = (p["rerank_rank"] or 10**9, p["bm25_rank"] or 10**9)
        best.setdefault(p["qid"], {})[p["docid"]] = key
    return {q: tuple(sorted(docs, key=docs.get)[:k]) for q, docs in best.items()}


def make_judge(config: JudgeConfig, backend: str | None = None) -> Judge:
    backend = backend or config.backend
    if backend == "bi-encoder":
        return BiEncoderJudge(config)
    if backend == "ray":
        raise ValueError("the ray backend runs through run_judge, not a single judge")
    from transformers import AutoTokenizer

    path = resolve_model(config.model)
    if backend == "vllm":
        from generation.backends.vllm_adapter import VllmJudgeBackend

        engine = VllmJudgeBackend(str(path), config)
        return LLMJudge(config, engine, AutoTokenizer.from_pretrained(str(path)), f"{config.model} (vLLM)")
    from generation.backends.hf import TransformersBackend

    hf = TransformersBackend.from_config(path, config, "judge")
    return LLMJudge(config, hf, hf.tokenizer, f"{config.model} (transformers)")


class ShardJob:
    """One shard's pairs, chunks and output files; shared by the plain and the Ray runners."""

    def __init__(self, profile: Profile, subquestions: Path, candidates: Path, index: Path, out: Path, shard: Shard):
        self.profile, self.config, self.shard = profile, profile.judge, shard
        self.index = Path(index)
        self.stage = StageOutput(out, NAME, stage_hash(profile, NAME))
        self.chunks_dir = self.stage.path(shard).with_suffix(".chunks")
        self.pairs = plan_pairs(subquestions, candidates, shard, profile)
        self.chunk_size = self.config.chunk_size
        self.n_chunks = -(-len(self.pairs) // self.chunk_size)
        self._docs: DocStore | None = None
        self._auxiliary: dict[str, tuple[str, ...]] | None = None

    def chunk_path(self, k: int) -> Path:
        return self.chunks_dir / f"chunk-{k:06d}.parquet"

    def prepare(self) -> None:
        """Refuse chunks left by a run under another config or chunk size; start the folder otherwise."""
        marker = self.chunks_dir / "config.json"
        expected = {"config_hash": self.stage.config_hash, "chunk_size": self.chunk_size, "pairs": len(self.pairs)}
        if marker.exists():
            found = json.loads(marker.read_text())
            if found != expected:
                raise ShardError(f"{self.chunks_dir}: chunks from another run ({found}); this run is {expected}. "
                                 "Remove the folder to start the shard again")
            return
        self.chunks_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(marker, json.dumps(expected))

    def pending(self) -> list[int]:
        return [k for k in range(self.n_chunks) if not self.chunk_path(k).exists()]

    @property
    def docs(self) -> DocStore:
        if self._docs is None:
            self._docs = DocStore(self.index)
        return self._docs

    def run_chunk(self, k: int, judge: Judge) -> int:
        rows = self.pairs[k * self.chunk_size:(k + 1) * self.chunk_size]
        if self.config.prompt == "r3a" and self._auxiliary is None:
            self._auxiliary = auxiliary_docids(self.pairs, self.config.auxiliary_documents)
        aux = self._auxiliary or {}
        pairs = [Pair(r["text"], self.docs.text(r["docid"]),
                      tuple(self.docs.text(d) for d in aux.get(r["qid"], ()))) for r in rows]
        grades = judge.grade(pairs)
        with ParquetSink(self.chunk_path(k), NAME) as sink:
            sink.write_rows(judgment_row(r, g) for r, g in zip(rows, grades))
        return len(rows)

    def merge(self, summary: JudgeSummary) -> Path:
        with ParquetSink(self.stage.path(self.shard), NAME) as sink:
            for k in range(self.n_chunks):
                table = pq.read_table(self.chunk_path(k))
                sink.write_table(table)
                summary.levels.update(v for v in table["level"].to_pylist() if v is not None)
                summary.unparsed += table["level"].null_count
                summary.not_verbatim += pc.sum(pc.invert(table["extract_verbatim"].fill_null(True))).as_py() or 0
                summary.statuses.update(table["status"].to_pylist())
                summary.cut_by_tokens += pc.sum(table["context_cut_by_tokens"].fill_null(False)).as_py() or 0
        self.stage.mark_done(self.shard, judge=summary.judge, pairs=len(self.pairs), unparsed=summary.unparsed,
                             levels=dict(summary.levels), not_verbatim=summary.not_verbatim,
                             statuses=dict(summary.statuses), cut_by_tokens=summary.cut_by_tokens)
        shutil.rmtree(self.chunks_dir)
        return self.stage.path(self.shard)


def describe(config: JudgeConfig) -> str:
    if config.backend == "bi-encoder":
        from generation.backends.biencoder import STAND_IN_NOTE

        return f"{config.model} ({STAND_IN_NOTE})"
    backend = f"ray x{config.ray_workers} over {config.ray_backend}" if config.backend == "ray" else config.backend
    return f"{config.model} ({backend}, prompt {config.prompt}, mode {config.mode})"


def run_judge(profile: Profile, subquestions: Path, candidates: Path, index: Path, out: Path,
              shard: Shard = Shard(), judge: Judge | None = None, progress=None) -> JudgeSummary:
    summary = JudgeSummary(judge=judge.description if judge else describe(profile.judge))
    job = ShardJob(profile, subquestions, candidates, index, out, shard)
    if skip_if_done(job.stage, shard, summary):
        return summary
    job.prepare()
    pending = job.pending()
    summary.pairs = len(job.pairs)
    summary.chunks_done_before = job.n_chunks - len(pending)
    if progress is not None:
        progress(sum(min(job.chunk_size, len(job.pairs) - k * job.chunk_size)
                     for k in range(job.n_chunks) if k not in set(pending)), total=len(job.pairs))
    if pending and profile.judge.backend == "ray":
        from generation.executors.ray import run_chunks_on_ray

        summary.judged_now = run_chunks_on_ray(job, pending, subquestions, candidates, index, out, progress)
    elif pending:
        judge = judge or make_judge(profile.judge)
        for k in pending:
            done = job.run_chunk(k, judge)
            summary.judged_now += done
            if progress is not None:
                progress(done)
    summary.outputs.append(job.merge(summary))
    return summary
