"""A judged shard's failed pairs judged again: what turns a transient failure into a grade.

A pair whose request failed after its retries (a 5xx, a reset, a timeout, a key rejected mid-run, a poison pair
whose connection always drops) is written with status `request_failed`, and the shard's completion record counts
it (`failed_pairs`). A later `judge` run does not skip such a shard: it judges exactly those pairs again and keeps
every other row as it is, byte for byte in value.

Resumable as the first pass is: the failed pairs, in shard order (read from the recorded shard, which does not
change until the end), are cut into chunks of `chunk_size`, each written atomically to
`judgments-XXXXX-of-YYYYY.retry/chunk-NNNNNN.parquet` beside a marker naming the sha256 of the shard they retry.
When every chunk is there the shard is rewritten with those rows in their places (`.retry/merged.parquet`, its
sha256 and record fields in `.retry/merged.json`), renamed over the shard and recorded done; a kill between the
rename and the record is finished by the next run (`finish_swap`). So a kill anywhere resumes to the output an
uninterrupted retry gives. The retry runs in this process (Ray actors rebuild the first pass's chunks, not these).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from generation.executors.local import LocalExecutor
from generation.judging.judges import Judge
from generation.shards import Completion, Shard, ShardError, read_record, sha256_file
from generation.stages.base import StageSummary
from generation.stages.judge import (FAILED_STATUS, NAME, JudgeStage, ShardJob, auxiliary_docids, record_fields,
                                     tally)
from generation.storage import ParquetSink, clean_stale_tmp, write_text_atomic

MERGED = "merged.parquet"
MERGED_RECORD = "merged.json"


def failed_pairs(record: Completion) -> int:
    """The failed pairs a judge shard's record counts (records before `failed_pairs` existed: its statuses)."""
    extra = record.extra or {}
    return int(extra.get("failed_pairs", (extra.get("statuses") or {}).get(FAILED_STATUS, 0)) or 0)


def retry_dir(stage: JudgeStage, shard: Shard) -> Path:
    return stage.output().path(shard).with_suffix(".retry")


class RetryJob(ShardJob):
    """The failed pairs of a done shard, in chunks: the `ChunkedWork` the local executor runs."""

    def __init__(self, stage: JudgeStage, shard: Shard, record: Completion):
        super().__init__(stage, shard)
        self.record, self.shard_path = record, self.output.path(shard)
        self.chunks_dir = retry_dir(stage, shard)
        judged = pq.read_table(self.shard_path, columns=["subq_id", "docid", "status"])
        if judged.num_rows != len(self.pairs):
            raise ShardError(f"{self.shard_path}: {judged.num_rows:,} rows, and the inputs give {len(self.pairs):,} "
                             "pairs: the inputs changed since the shard was judged; judge it again in another --out")
        self.positions = [i for i, s in enumerate(judged["status"].to_pylist()) if s == FAILED_STATUS]
        subq_ids, docids = judged["subq_id"].to_pylist(), judged["docid"].to_pylist()
        for i in self.positions:
            if (subq_ids[i], docids[i]) != (self.pairs[i]["subq_id"], self.pairs[i]["docid"]):
                raise ShardError(f"{self.shard_path}: row {i} is the pair ({subq_ids[i]}, {docids[i]}), the inputs "
                                 f"give ({self.pairs[i]['subq_id']}, {self.pairs[i]['docid']}) there; judge it "
                                 "again in another --out")
        if self.config.prompt == "r3a":  # round one looks at every candidate of the question, not only failed ones
            self._auxiliary = auxiliary_docids(self.pairs, self.config.auxiliary_documents)
        self.pairs = [self.pairs[i] for i in self.positions]
        self.n_chunks = -(-len(self.pairs) // self.chunk_size)

    def prepare(self) -> None:
        """Keeps the chunks of a retry of this very shard file; any other retry's are removed."""
        marker = self.chunks_dir / "config.json"
        expected = {"config_hash": self.output.config_hash, "chunk_size": self.chunk_size, "pairs": len(self.pairs),
                    "retrying": self.record.sha256}
        if marker.exists() and read_record(marker, "retry record", "remove the folder") != expected:
            shutil.rmtree(self.chunks_dir)
        if not marker.exists():
            self.chunks_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(marker, json.dumps(expected))

    def make_worker(self, backend: str | None = None) -> Judge:
        if backend is None and self.config.backend == "ray":
            backend = self.config.ray_backend
        return super().make_worker(backend)

    def merged_rows(self):
        """The shard's rows in order, each failed pair's row replaced by its retried one; a batch at a time."""
        retried = (row for k in range(self.n_chunks) for row in pq.read_table(self.chunk_path(k)).to_pylist())
        failed, offset = set(self.positions), 0
        for batch in pq.ParquetFile(self.shard_path).iter_batches(batch_size=max(self.chunk_size, 1024)):
            span = range(offset, offset + batch.num_rows)
            offset += batch.num_rows
            if failed.isdisjoint(span):
                yield pa.Table.from_batches([batch])
            else:
                rows = batch.to_pylist()
                yield [next(retried) if i in failed else row for i, row in zip(span, rows)]

    def merge(self, summary: StageSummary) -> dict:
        """The retried shard into `.retry/merged.parquet`, then over the shard; returns the record's fields."""
        merged = self.chunks_dir / MERGED
        with ParquetSink(merged, NAME) as sink:
            for part in self.merged_rows():
                sink.write_table(part) if isinstance(part, pa.Table) else sink.write_rows(part)
        summary.retried = len(self.pairs)
        for batch in pq.ParquetFile(merged).iter_batches(batch_size=65536):
            tally(summary, pa.Table.from_batches([batch]))
        fields = record_fields(summary, pq.ParquetFile(merged).metadata.num_rows)
        write_text_atomic(self.chunks_dir / MERGED_RECORD, json.dumps({"sha256": sha256_file(merged),
                                                                       "fields": fields}))
        os.replace(merged, self.shard_path)
        return fields


def finish_swap(stage: JudgeStage, shard: Shard) -> None:
    """Records a retried shard that a kill left renamed over the shard but not yet recorded."""
    folder = retry_dir(stage, shard)
    note = folder / MERGED_RECORD
    output = stage.output()
    if not note.exists() or (folder / MERGED).exists() or not output.path(shard).exists():
        return
    swapped = read_record(note, "retry record", f"remove {folder}")
    if sha256_file(output.path(shard)) == swapped.get("sha256"):
        output.start(shard)
        output.mark_done(shard, **swapped["fields"])
    shutil.rmtree(folder, ignore_errors=True)


def retry_failed_pairs(stage: JudgeStage, shard: Shard, summary: StageSummary, progress=None) -> StageSummary:
    """`summary` of a skipped (done) shard as it is when its record counts no failed pair; else the summary of a
    run that judged exactly its failed pairs again."""
    output = stage.output()
    record = Completion.read(output.record_path(shard))
    if failed_pairs(record) == 0:
        return summary
    summary = stage.new_summary(shard)
    output.start(shard)  # the lock: two workers never retry one shard
    clean_stale_tmp(retry_dir(stage, shard))
    try:
        stage.check_inputs()
        job = RetryJob(stage, shard, record)
        job.prepare()
        pending = job.pending()
        summary.pairs, summary.chunks_done_before = len(job.pairs), job.n_chunks - len(pending)
        if progress is not None:
            progress(len(job.pairs) - sum(job.chunk_rows(k) for k in pending), total=len(job.pairs))
        if pending:
            summary.judged_now = LocalExecutor().run_chunks(job, pending, progress)
        fields = job.merge(summary)
        summary.pairs = fields["pairs"]
    except BaseException:
        output.lock(shard).release()
        raise
    output.mark_done(shard, **fields)
    shutil.rmtree(job.chunks_dir, ignore_errors=True)
    summary.outputs.insert(0, output.path(shard))
    return summary
