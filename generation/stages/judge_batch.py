"""The judge stage through OpenAI Batch files (`judge --export-batch DIR`, `judge --import-batch FILE ...`).

Export writes the shard's pairs still missing (neither in a finished chunk nor imported before) as request lines
(generation/judging/batch_files.py): run them anywhere that takes the format (`vllm run-batch`, the OpenAI Batch
API). Import reads the result lines, grades them with the profile's own parser (or digit distribution), and
writes the shard's chunks as the judge does, under the same config hash: a chunk is written once all its pairs
have a grade, the grades of pairs whose chunk is not yet whole wait in `batch-imported.parquet` beside the chunks.
When every chunk is there the shard is merged and recorded done, exactly as an in-process run's; otherwise the
import stops with the counts and what to export again. Importing the same files twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow.parquet as pq

from generation.errors import ArgumentError
from generation.judging.batch_files import check_export, custom_id, export_batch, export_judge
from generation.judging.batch_import import answer_grader, import_results
from generation.judging.batch_manifest import BatchManifest, load_manifest
from generation.judging.judges import Grade, LLMJudge, Pair
from generation.profiles.model_paths import resolve_model
from generation.stages.judge import NAME, JudgeStage, ShardJob, judgment_row
from generation.stages.judge_record import JudgeSummary
from generation.storage.atomic_files import ParquetSink
from generation.storage.shards import Shard, ShardError, StageOutput

PARTIAL = "batch-imported.parquet"
SET_ASIDE = ("not_in_shard", "another_export", "malformed_ids")  # result lines that grade no pair of the shard


class IncompleteShard(ShardError):
    """An import that left pairs without a grade: the shard is not done, and says what to export again."""


def batch_judge(stage: JudgeStage) -> LLMJudge:
    """The judge whose prompts the batch lines carry: the profile's model's tokenizer, its `openai` section's
    request shape (chat, which `vllm run-batch` takes, when the profile has none)."""
    from transformers import AutoTokenizer

    config = stage.profile.judge
    if config.backend == "bi-encoder":
        raise ArgumentError("a batch file carries prompts for an LLM judge; the bi-encoder stand-in has none")
    return export_judge(config, AutoTokenizer.from_pretrained(str(resolve_model(config.model))))


def pair_id(row: dict) -> str:
    return custom_id(row["qid"], row["docid"], row["subq_id"])


def imported_before(job: ShardJob) -> dict[str, dict]:
    """custom_id -> judgment row of the pairs an earlier import graded whose chunk is not yet whole."""
    path = job.chunks_dir / PARTIAL
    return {pair_id(r): r for r in pq.read_table(path).to_pylist()} if path.exists() else {}


def missing_pairs(job: ShardJob) -> Iterable[tuple[str, Pair]]:
    """(custom_id, Pair) of the shard's pairs that no chunk and no earlier import holds, in judging order."""
    graded = imported_before(job)
    for k in job.pending():
        for row in job.chunk(k):
            cid = pair_id(row)
            if cid not in graded:
                yield cid, Pair(row["text"], job.docs.text(row["docid"]))


def export_shard(stage: JudgeStage, shard: Shard, out_dir: Path) -> BatchManifest | None:
    """The shard's missing pairs as OpenAI Batch request files in `out_dir`, with their manifest (returned); None,
    and nothing written, when the shard is already judged and recorded done."""
    stage.prepare()
    stage.check_inputs()
    if stage.output().is_done(shard):
        return None
    job = stage.chunk_work(shard)
    job.prepare()
    return export_batch(batch_judge(stage), missing_pairs(job), out_dir, job.output.config_hash)


class BatchImport:
    """An executor that grades a shard's pending chunks from result files instead of a model."""

    description = "batch import"

    def __init__(self, results: Sequence[Path], manifest: BatchManifest):
        self.results, self.manifest = list(results), manifest
        self.counts: dict[str, int] = {}
        self.set_aside: dict[str, dict] = {}

    def run_chunks(self, job: ShardJob, pending: Sequence[int], progress=None) -> int:
        judge = batch_judge(job.stage)
        check_export(self.manifest, judge, job.output.config_hash)
        rows = {pair_id(r): r for k in pending for r in job.chunk(k)}
        before = imported_before(job)
        done = {pair_id(r) for k in set(range(job.n_chunks)) - set(pending) for r in job.chunk(k)}
        result = import_results(
            self.results,
            [c for c in rows if c not in before],
            answer_grader(judge),
            self.manifest.context_cut_by_tokens,
            graded_before=done | set(before),
        )
        grades: dict[str, Grade] = dict(result.grades)
        for entry in self.manifest.not_exported:  # prompts over the budget: failed, as a judge records them
            if entry.custom_id in result.unresolved:
                grades.setdefault(entry.custom_id, Grade(None, entry.error, status="engine_error"))
        graded = {**before, **{cid: judgment_row(rows[cid], g) for cid, g in grades.items()}}
        written = 0
        for k in pending:
            chunk = job.chunk(k)
            if all(pair_id(r) in graded for r in chunk):
                job.write_chunk(k, [graded.pop(pair_id(r)) for r in chunk])
                written += len(chunk)
                if progress is not None:
                    progress(len(chunk))
        partial = job.chunks_dir / PARTIAL
        if graded:
            with ParquetSink(partial, NAME) as sink:
                sink.write_rows(graded.values())
        else:
            partial.unlink(missing_ok=True)
        self.counts = {**result.counts(), "waiting": len(graded)}
        self.examples = {
            name: getattr(result, name).examples for name in (*SET_ASIDE, "conflicting", "missing", "error_lines")
        }
        self.set_aside = {name: getattr(result, name).as_record() for name in SET_ASIDE}
        return written


class BatchImportJudgeStage(JudgeStage):
    """`judge --import-batch`: the judge stage with its grades read from result files; same shards, same hash."""

    retries_failed = False  # a done shard's failed pairs are judged again by `judge`, not by importing files
    judges_here = False  # grades come from result files: no backend runs

    def __init__(self, profile, out, subquestions, candidates, index, results: Sequence[Path], manifest: Path):
        super().__init__(profile, out, subquestions, candidates, index)
        self.importer = BatchImport(results, load_manifest(manifest))

    def new_summary(self, shard: Shard) -> JudgeSummary:
        summary = super().new_summary(shard)
        summary.judge = (
            f"{self.profile.judge.model} (OpenAI Batch results, request shape {self.importer.manifest.request_shape})"
        )
        return summary

    def run_shard(self, shard: Shard, output: StageOutput, summary: JudgeSummary, progress, executor) -> dict:
        job = self.chunk_work(shard)
        job.prepare()
        pending = job.pending()
        summary.pairs = len(job.pairs)
        summary.chunks_done_before = job.n_chunks - len(pending)
        summary.judged_now = self.importer.run_chunks(job, pending, progress) if pending else 0
        summary.batch_lines = self.importer.set_aside  # shown in the last line (builder/cli/reports.py), recorded
        still = job.pending()
        if still:
            counts = ", ".join(f"{k} {v:,}" for k, v in self.importer.counts.items() if v)
            examples = "; ".join(f"{k}: {v[0]}" for k, v in self.importer.examples.items() if v)
            raise IncompleteShard(
                f"{job.chunks_dir}: {sum(job.chunk_rows(k) for k in still):,} of {len(job.pairs):,} pairs still lack a "
                f"grade ({counts}{'; e.g. ' + examples if examples else ''}); the grades imported so far are kept. "
                "Export the missing pairs with `judge ... --export-batch DIR` (it writes only those), run them, and "
                "import all result files again"
            )
        return {**job.merge(summary), "batch_lines": summary.batch_lines}
