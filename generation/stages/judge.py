"""Judge every (sub-question x candidate of its question) pair of a shard, in checkpointed chunks.

Pairs are laid out deterministically so that pairs sharing a prompt prefix run together: questions in file order,
then sub-questions, then candidates in pool order; under a prompt that puts the document first
(`Prompt.document_first`), candidates, then sub-questions, so each document's pairs form one group that its judge
computes once. A question's pairs stay in one shard (shards own questions). They are cut into chunks of `chunk_size`. Each
chunk is written atomically to `judgments-XXXXX-of-YYYYY.chunks/chunk-NNNNNN.parquet`, so `kill -9`
loses at most the chunk in flight and a resumed run never writes a pair twice. When every chunk is
there they are merged into the shard file and its completion record. An executor (generation/executors/)
runs the pending chunks: in this process, or on Ray actors that each hold a judge.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from generation.backends import make_judge, refuse_unrunnable
from generation.corpus.docstore import DocStore
from generation.corpus.topics import question_files
from generation.executors import executor_for
from generation.judging.judges import Grade, Judge, Pair
from generation.judging.prompts import get_prompt
from generation.notices import warn
from generation.profiles.model_paths import resolve_model
from generation.profiles.profile import JudgeConfig, Profile
from generation.stages.base import Executor, Input, ProfiledStage
from generation.stages.index import INDEX_TEXTS
from generation.stages.judge_record import FAILED_STATUS, JudgeSummary, record_fields, tally
from generation.stages.judge_retry import finish_swap, retry_failed_pairs
from generation.stages.pool import PoolStage
from generation.stages.questions import SUBQUESTIONS_FOLDER
from generation.storage.atomic_files import ParquetSink, write_text_atomic
from generation.storage.schema import JUDGMENTS
from generation.storage.shards import Shard, ShardError, StageOutput, read_record

NAME = JUDGMENTS
SHOWN_FAILURES = 5  # failed pairs named on stderr per shard run; the rest are counted in the last line
PAIR_COLUMNS = ["subq_id", "qid", "docid", "url_hash", "bm25_rank", "rerank_rank", "clicked", "source"]


def pairs_of(subquestions: Path, candidate_files: list[Path], shard: Shard, document_first: bool = False) -> list[dict]:
    """The shard's pairs in judging order, with the sub-question text and provenance; no document text. By
    sub-question (its candidates inside), or with `document_first` by (question, document) (its sub-questions
    inside)."""
    _, subq_path = question_files(subquestions)
    subqs = pq.read_table(subq_path, columns=["subq_id", "qid", "text"])
    subqs = subqs.filter([shard.owns_key(q) for q in subqs["qid"].to_pylist()])
    pool = ds.dataset(candidate_files, format="parquet").to_table(
        columns=[c for c in PAIR_COLUMNS if c != "subq_id"], filter=pc.field("qid").isin(subqs["qid"].unique())
    )
    by_qid: dict[str, list[dict]] = {}
    for row in pool.to_pylist():
        by_qid.setdefault(row["qid"], []).append(row)
    rows = list(zip(*(subqs[c].to_pylist() for c in ("subq_id", "qid", "text"))))
    if not document_first:
        return [
            {"subq_id": subq_id, "text": text, **cand} for subq_id, qid, text in rows for cand in by_qid.get(qid, [])
        ]
    asked: dict[str, list[tuple[str, str]]] = {}  # each question's sub-questions, questions in file order
    for subq_id, qid, text in rows:
        asked.setdefault(qid, []).append((subq_id, text))
    return [
        {"subq_id": subq_id, "text": text, **cand}
        for qid, its_subqs in asked.items()
        for cand in by_qid.get(qid, [])
        for subq_id, text in its_subqs
    ]


def documents_first(config: JudgeConfig) -> bool:
    """Whether the judge's prompt puts the document first, so its pairs are laid out by document."""
    return get_prompt(config.prompt).document_first


def plan_pairs(subquestions: Path, candidates: Path, shard: Shard, profile: Profile | None = None) -> list[dict]:
    """`pairs_of` a candidates folder, its shards checked against their records (and `profile`'s sections), in
    the order `profile`'s judge lays them out."""
    first = profile is not None and documents_first(profile.judge)
    return pairs_of(subquestions, PoolStage.completed_files(candidates, profile), shard, first)


def judgment_row(pair: dict, grade: Grade) -> dict:
    """One judgments row: the pair's ids and provenance, and what the judge made of it."""
    return {
        **{c: pair[c] for c in PAIR_COLUMNS},
        "level": grade.level,
        "raw": grade.raw,
        "status": grade.status,
        "probs": grade.probs,
        "expected": grade.expected,
        "extract_verbatim": grade.extract_verbatim,
        "context_cut_by_tokens": grade.context_cut_by_tokens,
    }


def auxiliary_docids(pairs: list[dict], k: int) -> dict[str, tuple[str, ...]]:
    """r3a round one: each question's top-k candidates by rerank rank (then BM25 rank)."""
    best: dict[str, dict[str, tuple]] = {}
    for p in pairs:
        key = (p["rerank_rank"] or 10**9, p["bm25_rank"] or 10**9)
        best.setdefault(p["qid"], {})[p["docid"]] = key
    return {q: tuple(sorted(docs, key=docs.__getitem__)[:k]) for q, docs in best.items()}


def judge_description(config: JudgeConfig) -> str:
    if config.backend == "bi-encoder":
        from generation.backends.biencoder import STAND_IN_NOTE

        return f"{config.model} ({STAND_IN_NOTE})"
    model, backend = config.model, config.backend
    if config.backend == "ray":
        backend = f"ray x{config.ray_workers} over {config.ray_backend}"
    elif config.backend == "openai" and config.openai is not None:  # the backend needs the section (profile_sections)
        model = config.openai.served_model or config.model  # never the endpoint: records, card, manifest name the judge
        backend = f"openai server, request shape {config.openai.request_shape}"
    return f"{model} ({backend}, prompt {config.prompt}, mode {config.mode})"


# what `judge_description` writes: "{model} ({backend}, prompt {id}, mode {mode})"
PROMPT_IN_JUDGE = re.compile(r"\bprompt ([A-Za-z0-9][\w.-]*?)(?=[,;)\s]|$)")


def named_prompts(judges) -> set[str]:
    """The prompt ids a list of judge descriptions (`judge_description`) names."""
    return {m for judge in judges for m in PROMPT_IN_JUDGE.findall(str(judge))}


class ShardJob:
    """One shard's pairs, cut into chunks: the `ChunkedWork` an executor runs (generation/stages/base.py)."""

    def __init__(self, stage: JudgeStage, shard: Shard):
        self.stage, self.shard, self.config = stage, shard, stage.profile.judge
        self.output = stage.output()
        self.chunks_dir = self.output.path(shard).with_suffix(".chunks")
        self.pairs = pairs_of(
            stage.inputs["subquestions"], stage.input_files["pool"], shard, documents_first(self.config)
        )
        self.chunk_size = self.config.chunk_size
        self.n_chunks = -(-len(self.pairs) // self.chunk_size)
        self._docs: DocStore | None = None
        self._auxiliary: dict[str, tuple[str, ...]] | None = None
        self.failures_named = 0  # failed pairs named on stderr so far (SHOWN_FAILURES at most)

    def chunk_path(self, k: int) -> Path:
        return self.chunks_dir / f"chunk-{k:06d}.parquet"

    def prepare(self) -> None:
        """Refuse chunks left by a run under another config or chunk size; start the folder otherwise."""
        marker = self.chunks_dir / "config.json"
        expected = {"config_hash": self.output.config_hash, "chunk_size": self.chunk_size, "pairs": len(self.pairs)}
        if marker.exists():
            found = read_record(marker, "chunk record", "remove the folder to start the shard again")
            if found != expected:
                raise ShardError(
                    f"{self.chunks_dir}: chunks from another run ({found}); this run is {expected}. "
                    "Remove the folder to start the shard again"
                )
            return
        self.chunks_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(marker, json.dumps(expected))

    def pending(self) -> list[int]:
        return [k for k in range(self.n_chunks) if not self.chunk_path(k).exists()]

    def drop_if_untouched(self) -> None:
        """After a run that stopped before its first chunk (a refused cluster, a server down): no folder left, unless
        it holds more than its record (grades an earlier batch import keeps for unfinished chunks)."""
        if self.chunks_dir.is_dir() and all(p.name == "config.json" for p in self.chunks_dir.iterdir()):
            shutil.rmtree(self.chunks_dir, ignore_errors=True)

    def chunk_rows(self, k: int) -> int:
        return min(self.chunk_size, len(self.pairs) - k * self.chunk_size)

    def recipe(self) -> tuple[type, dict, int, int]:
        """What rebuilds this job in another process (a Ray actor): the stage class, its arguments, the shard."""
        return (
            type(self.stage),
            {
                "profile_json": self.stage.profile.model_dump_json(),
                "out": str(self.stage.out),
                **{k: str(v) for k, v in self.stage.inputs.items()},
            },
            self.shard.index,
            self.shard.count,
        )

    def preflight(self, backend: str | None = None) -> None:
        """What makes a worker fail, checked before any is started: the model must be on this machine."""
        if self.stage.judge is None and (backend or self.config.backend) != "bi-encoder":
            resolve_model(self.config.model)

    def make_worker(self, backend: str | None = None) -> Judge:
        return self.stage.judge or make_judge(self.config, backend)

    @property
    def docs(self) -> DocStore:
        if self._docs is None:
            self._docs = DocStore(self.stage.inputs["index"])
        return self._docs

    def auxiliary(self) -> dict[str, tuple[str, ...]]:
        """r3a's auxiliary documents of each question, from all the shard's pairs (computed once)."""
        if self.config.prompt == "r3a" and self._auxiliary is None:
            self._auxiliary = auxiliary_docids(self.pairs, self.config.auxiliary_documents)
        return self._auxiliary or {}

    def chunk(self, k: int) -> list[dict]:
        return self.pairs[k * self.chunk_size : (k + 1) * self.chunk_size]

    def write_chunk(self, k: int, rows) -> None:
        """Chunk k's judgment rows, written atomically: from then on its pairs are judged."""
        with ParquetSink(self.chunk_path(k), NAME) as sink:
            sink.write_rows(rows)

    def run_chunk(self, k: int, judge: Judge) -> int:
        rows = self.chunk(k)
        aux = self.auxiliary()
        self.docs.prefetch([r["docid"] for r in rows] + [d for r in rows for d in aux.get(r["qid"], ())])
        pairs = [
            Pair(r["text"], self.docs.text(r["docid"]), tuple(self.docs.text(d) for d in aux.get(r["qid"], ())))
            for r in rows
        ]
        grades = judge.grade(pairs)
        self.write_chunk(k, (judgment_row(r, g) for r, g in zip(rows, grades)))
        self.name_failures(rows, grades)
        return len(rows)

    def name_failures(self, rows: list[dict], grades: list[Grade]) -> None:
        """One warning per pair whose request failed (the first few of a run): which pair, and why."""
        for row, grade in zip(rows, grades):
            if grade.status == FAILED_STATUS:
                self.failures_named += 1
                if self.failures_named <= SHOWN_FAILURES:
                    warn(
                        f"judge: the pair of question {row['qid']}, sub-question {row['subq_id']}, document "
                        f"{row['docid']} failed ({grade.raw}); set aside as request_failed, the shard goes on, "
                        "and the next `judge` run retries it"
                    )

    def merge(self, summary: JudgeSummary) -> dict:
        """The chunks into the shard file; the completion record's fields."""
        with ParquetSink(self.output.path(self.shard), NAME) as sink:
            for k in range(self.n_chunks):
                table = pq.read_table(self.chunk_path(k))
                sink.write_table(table)
                tally(summary, table)
        return record_fields(summary, len(self.pairs))


class JudgeStage(ProfiledStage[JudgeSummary]):
    """Every (sub-question x candidate) pair graded by the profile's judge; resumable chunk by chunk."""

    name = "judge"
    produces = "`judgments-*.parquet`"
    writes = NAME
    reads = (
        SUBQUESTIONS_FOLDER,
        Input("candidates", "folder of candidate pool shards", (PoolStage,)),
        INDEX_TEXTS,
    )
    sections = ("bm25", "rerank", "pool", "judge")
    unit = "pairs"
    retries_failed = True  # a re-run judges the pairs of a done shard whose requests failed
    summary_type = JudgeSummary
    judges_here = True  # the profile's judge backend runs in this process (not so for imported grades)

    def __init__(
        self, profile: Profile, out: Path, subquestions: Path, candidates: Path, index: Path, judge: Judge | None = None
    ):
        super().__init__(profile, out, subquestions=subquestions, candidates=candidates, index=index)
        self.judge = judge

    def new_summary(self, shard: Shard) -> JudgeSummary:
        summary = super().new_summary(shard)
        summary.judge = self.judge.description if self.judge else judge_description(self.profile.judge)
        return summary

    def prepare(self) -> None:
        """The judge settings this machine cannot run, refused before any lock or chunk is written."""
        if self.judge is None and self.judges_here:
            refuse_unrunnable(self.profile.judge)

    def after_done(self, shard: Shard) -> None:
        shutil.rmtree(self.output().path(shard).with_suffix(".chunks"), ignore_errors=True)

    def run(self, shard: Shard = Shard(), progress=None, executor: Executor | None = None) -> JudgeSummary:
        """The shard judged; a shard recorded done with failed pairs gets exactly those judged again."""
        if self.retries_failed:
            finish_swap(self, shard)
        summary = super().run(shard, progress, executor)
        return (
            retry_failed_pairs(self, shard, summary, progress) if summary.skipped and self.retries_failed else summary
        )

    def chunk_work(self, shard: Shard) -> ShardJob:
        return ShardJob(self, shard)

    def run_shard(
        self, shard: Shard, output: StageOutput, summary: JudgeSummary, progress, executor: Executor | None
    ) -> dict:
        job = self.chunk_work(shard)
        job.prepare()
        pending = job.pending()
        summary.pairs = len(job.pairs)
        summary.chunks_done_before = job.n_chunks - len(pending)
        if progress is not None:
            progress(len(job.pairs) - sum(job.chunk_rows(k) for k in pending), total=len(job.pairs))
        if pending:
            try:
                summary.judged_now = (executor or executor_for(self.profile)).run_chunks(job, pending, progress)
            except BaseException:
                job.drop_if_untouched()
                raise
        return job.merge(summary)
