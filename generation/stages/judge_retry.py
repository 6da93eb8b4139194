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

from generation.stages.judge_record import FAILED_STATUS, JudgeSummary, failed_pairs, record_fields, tally
from generation.storage.atomic_files import ParquetSink, clean_stale_tmp, write_text_atomic
from generation.storage.shards import Completion, Shard, ShardError, read_record, sha256_file

MERGED = "merged.parquet"
MERGED_RECORD = "merged.json"


def retry_dir(stage, shard: Shard) -> Path:
    return stage.output().path(shard).with_suffix(".retry")


class FailedPairs:
    """A done shard's failed pairs, judged again in chunks by the shard's own job (generation/stages/judge.py
    `ShardJob`), its pairs cut to the failed ones and its chunks written under `.retry/`."""

    def __init__(self, stage, shard: Shard, record: Completion):
        self.job = job = stage.chunk_work(shard)
        self.record, self.shard_path, self.name = record, job.output.path(shard), stage.writes
        judged = pq.read_table(self.shard_path, columns=["subq_id", "docid", "status"])
        if judged.num_rows != len(job.pairs):
            raise ShardError(
                f"{self.shard_path}: {judged.num_rows:,} rows, and the inputs give {len(job.pairs):,} "
                "pairs: the inputs changed since the shard was judged; judge it again in another --out"
            )
        self.positions = [i for i, s in enumerate(judged["status"].to_pylist()) if s == FAILED_STATUS]
        subq_ids, docids = judged["subq_id"].to_pylist(), judged["docid"].to_pylist()
        for i in self.positions:
            if (subq_ids[i], docids[i]) != (job.pairs[i]["subq_id"], job.pairs[i]["docid"]):
                raise ShardError(
                    f"{self.shard_path}: row {i} is the pair ({subq_ids[i]}, {docids[i]}), the inputs "
                    f"give ({job.pairs[i]['subq_id']}, {job.pairs[i]['docid']}) there; judge it again "
                    "in another --out"
                )
        job.auxiliary()  # r3a's round one looks at every candidate of the question, not only the failed ones
        job.pairs = [job.pairs[i] for i in self.positions]
        job.n_chunks = -(-len(job.pairs) // job.chunk_size)
        job.chunks_dir = retry_dir(stage, shard)

    def prepare(self) -> None:
        """Keeps the chunks of a retry of this very shard file; any other retry's are removed."""
        job = self.job
        marker = job.chunks_dir / "config.json"
        expected = {
            "config_hash": job.output.config_hash,
            "chunk_size": job.chunk_size,
            "pairs": len(job.pairs),
            "retrying": self.record.sha256,
        }
        if marker.exists() and read_record(marker, "retry record", "remove the folder") != expected:
            shutil.rmtree(job.chunks_dir)
        if not marker.exists():
            job.chunks_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(marker, json.dumps(expected))

    def run(self, pending: list[int], progress=None) -> int:
        """The pending chunks, in this process (`backend: ray` on its `ray_backend`: failed pairs are few)."""
        config = self.job.config
        worker = self.job.make_worker(config.ray_backend if config.backend == "ray" else None)
        done = 0
        for k in pending:
            rows = self.job.run_chunk(k, worker)
            done += rows
            if progress is not None:
                progress(rows)
        return done

    def merged_rows(self):
        """The shard's rows in order, each failed pair's row replaced by its retried one; a batch at a time."""
        job = self.job
        retried = (row for k in range(job.n_chunks) for row in pq.read_table(job.chunk_path(k)).to_pylist())
        failed, offset = set(self.positions), 0
        for batch in pq.ParquetFile(self.shard_path).iter_batches(batch_size=max(job.chunk_size, 1024)):
            span = range(offset, offset + batch.num_rows)
            offset += batch.num_rows
            if failed.isdisjoint(span):
                yield pa.Table.from_batches([batch])
            else:
                yield [next(retried) if i in failed else row for i, row in zip(span, batch.to_pylist())]

    def merge(self, summary: JudgeSummary) -> dict:
        """The retried shard into `.retry/merged.parquet`, then over the shard; returns the record's fields."""
        merged = self.job.chunks_dir / MERGED
        with ParquetSink(merged, self.name) as sink:
            for part in self.merged_rows():
                sink.write_table(part) if isinstance(part, pa.Table) else sink.write_rows(part)
        summary.retried = len(self.job.pairs)
        for batch in pq.ParquetFile(merged).iter_batches(batch_size=65536):
            tally(summary, pa.Table.from_batches([batch]))
        fields = record_fields(summary, pq.ParquetFile(merged).metadata.num_rows)
        write_text_atomic(
            self.job.chunks_dir / MERGED_RECORD, json.dumps({"sha256": sha256_file(merged), "fields": fields})
        )
        os.replace(merged, self.shard_path)
        return fields


def finish_swap(stage, shard: Shard) -> None:
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


def retry_failed_pairs(stage, shard: Shard, summary: JudgeSummary, progress=None) -> JudgeSummary:
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
        retry = FailedPairs(stage, shard, record)
        retry.prepare()
        job = retry.job
        pending = job.pending()
        summary.pairs, summary.chunks_done_before = len(job.pairs), job.n_chunks - len(pending)
        if progress is not None:
            progress(len(job.pairs) - sum(job.chunk_rows(k) for k in pending), total=len(job.pairs))
        if pending:
            summary.judged_now = retry.run(pending, progress)
        fields = retry.merge(summary)
        summary.pairs = fields["pairs"]
    except BaseException:
        output.lock(shard).release()
        raise
    output.mark_done(shard, **fields)
    shutil.rmtree(job.chunks_dir, ignore_errors=True)
    summary.outputs.insert(0, output.path(shard))
    return summary
