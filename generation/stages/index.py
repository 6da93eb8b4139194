"""Corpus shards -> a Lucene index built by Anserini (Pyserini's bundled jar), stemmed as the profile says.

Each document is handed to Anserini's JsonCollection as {"id", "contents", "url_hash", "url"}, in gzip'd
JSON-lines parts written in parallel with Polars (no uncompressed copy of the corpus), at least one part per
indexing thread, since Anserini gives each input file to one thread. url_hash is an indexed field
(-fields url_hash). The raw JSON is not stored (no -storeRaw): later stages read texts from the Parquet corpus
through a docid map (generation/docid_map.py, built while Java indexes) kept in the index folder, and the
record says `stored_raw: false`; an index built before, with its texts stored, keeps being read from itself.
The index is built beside its target and renamed into place only when Anserini succeeds, with a completion record
naming the corpus shards it was built from.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from generation.java import anserini_jar, java_binary
from generation.docid_map import NAME as DOCID_MAP, write_docid_map
from generation.docstore import RECORD, require_index
from generation.shards import DONE_DIR, Completion, Shard, ShardLock
from generation.stages.base import Input, Stage, StageSummary
from generation.stages.corpus import CorpusStage
from generation.storage import write_text_atomic

EXPORT_BATCH_ROWS = 4096  # documents turned into JSON lines at a time by one writer


class IndexBuildError(RuntimeError):
    pass


def die_with_parent() -> None:
    """In the Java child: exit when the Python parent dies (Linux), so a killed `index` leaves no orphan
    still writing into the folder the next run cleans."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def json_parts(corpus_files: list[Path], parts: int) -> list[tuple[Path, list[int]]]:
    """(corpus file, its row groups) of each JsonCollection part: every file cut into runs of row groups, at least
    `parts` in all where the files have that many row groups."""
    per_file = -(-parts // max(1, len(corpus_files)))
    cut = []
    for path in corpus_files:
        groups = list(range(pq.ParquetFile(path).num_row_groups))
        cut.extend((path, list(chunk)) for chunk in np.array_split(groups, min(per_file, len(groups))) if len(chunk))
    return cut


def write_json_part(corpus_file: Path, row_groups: list[int], target: Path) -> int:
    """Row groups of a corpus file as JsonCollection lines, gzip'd (one gzip member per batch; Anserini's
    JsonCollection reads `.jsonl.gz` through java.util.zip.GZIPInputStream, which reads concatenated members).
    A missing url_hash or url is written as "", as the kit always handed them to Anserini."""
    import polars as pl

    count = 0
    with open(target, "wb") as f:
        parquet = pq.ParquetFile(corpus_file)
        for batch in parquet.iter_batches(batch_size=EXPORT_BATCH_ROWS, row_groups=row_groups,
                                          columns=["docid", "text", "url_hash", "url"]):
            frame = pl.from_arrow(batch).select(pl.col("docid").alias("id"), pl.col("text").alias("contents"),
                                                pl.col("url_hash").fill_null(""), pl.col("url").fill_null(""))
            frame.write_ndjson(f, compression="gzip", compression_level=1)
            count += batch.num_rows
    return count


def export_json_parts(corpus_files: list[Path], folder: Path, threads: int, progress=None) -> int:
    """The corpus as gzip'd JsonCollection parts in `folder`, `threads` parts written at a time (Polars and zlib
    release the GIL); returns the number of documents."""
    from concurrent.futures import ThreadPoolExecutor

    parts = json_parts(corpus_files, threads)
    count = 0
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for n in pool.map(lambda job: write_json_part(job[1][0], job[1][1], folder / f"part-{job[0]:05d}.jsonl.gz"),
                          enumerate(parts)):
            count += n
            if progress is not None:
                progress(n)
    return count


def index_stemmer(index: Path) -> str | None:
    """The stemmer this kit built the index with; None for an index built elsewhere (no completion record)."""
    record = Path(index) / RECORD
    return json.loads(record.read_text())["stemmer"] if record.exists() else None


class IndexStage(Stage):
    """Corpus shards -> one Lucene index (not sharded), stemmed with the profile's bm25.stemmer."""
    name = "index"
    produces = "a Lucene index (Anserini, postings only; texts read from the corpus)"
    unit = "docs"
    sharded = False
    reads = (Input("corpus", "folder of corpus shards", (CorpusStage,)),)
    summary_fields = {"documents": int, "path": Path}

    def __init__(self, profile, out: Path, corpus: Path, threads: int = 1, memory_mb: int = 1024,
                 stemmer: str | None = None, log: Path | None = None):
        super().__init__(profile, out, corpus=corpus)
        self.threads, self.memory_mb, self.log = threads, memory_mb, log
        self.stemmer = stemmer or (profile.bm25.stemmer if profile is not None else "porter")

    @classmethod
    def completed_files(cls, folder: Path, profile=None, verify_sha256: bool = True) -> list[Path]:
        return [require_index(folder)]

    def run(self, shard: Shard = Shard(), progress=None, executor=None) -> StageSummary:
        summary = self.new_summary(shard)
        index = self.out
        self.check_inputs()  # each corpus file checked against its completion record's sha256
        files = self.input_files["corpus"]
        corpus = self.inputs["corpus"]
        sources = {p.name: Completion.read(corpus / DONE_DIR / f"{p.stem}.json").sha256 for p in files}
        summary.path = index
        record_path = index / RECORD
        if record_path.exists():
            try:
                record = json.loads(record_path.read_text())
                record["corpus"], record["stemmer"], record["documents"]
            except (ValueError, KeyError, TypeError):
                raise IndexBuildError(f"{record_path}: not a valid index record; remove {index} and build it "
                                      "again") from None
            if record["corpus"] == sources and record["stemmer"] == self.stemmer:
                summary.documents, summary.skipped = record["documents"], True
                return summary
            raise IndexBuildError(f"{index}: an index built from other corpus shards or settings is there; "
                                  "remove it or choose another --index")
        if index.exists() and (not index.is_dir() or any(index.iterdir())):
            raise IndexBuildError(f"{index}: exists and is not an index this kit finished; remove it or choose another")
        index.parent.mkdir(parents=True, exist_ok=True)
        lock = ShardLock(index.parent, f"index-{index.name}")
        lock.acquire()
        try:
            summary.documents = _build_locked(files, sources, index, self.threads, self.stemmer, self.memory_mb,
                                              progress, self.log)
        finally:
            lock.release()
        summary.outputs = [index]
        return summary


def build_index(corpus: Path, index: Path, threads: int = 1, stemmer: str = "porter", memory_mb: int = 1024,
                progress=None, log=None) -> StageSummary:
    return IndexStage(None, index, corpus, threads, memory_mb, stemmer, log).run(progress=progress)


def _build_locked(files, sources, index: Path, threads, stemmer, memory_mb, progress, log) -> int:
    record_path = index / RECORD
    building = index.with_name(f".{index.name}.building")
    # Left by a killed build (we hold the lock): the half-built index and the compressed corpus copy.
    shutil.rmtree(building, ignore_errors=True)
    for stale in index.parent.glob(f".{index.name}.anserini-input-*"):
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f".{index.name}.anserini-input-", dir=index.parent) as staging:
        documents = export_json_parts(files, Path(staging), threads, progress)
        command = [str(java_binary()), f"-Xmx{memory_mb}m", "-cp", str(anserini_jar()),
                   "io.anserini.index.IndexCollection", "-collection", "JsonCollection",
                   "-generator", "DefaultLuceneDocumentGenerator", "-input", staging, "-index", str(building),
                   "-threads", str(threads), "-stemmer", stemmer, "-fields", "url_hash",
                   "-memoryBuffer", str(min(memory_mb // 2, 4096))]
        output_path = Path(staging) / "anserini.log"  # a file, not a pipe: Java must not wait on a full pipe
        with open(output_path, "w") as output_file:
            java = subprocess.Popen(command, stdout=output_file, stderr=subprocess.STDOUT, text=True,
                                    preexec_fn=die_with_parent)
            try:  # while Java indexes: where each document's text lies in the corpus
                mapped = write_docid_map(files, Path(staging) / DOCID_MAP)
            except BaseException:
                java.kill()
                java.wait()
                raise
            returncode = java.wait()
        output = output_path.read_text()
        if log is not None:
            Path(log).write_text(output)
        indexed = re.search(r"Total ([\d,]+) documents indexed", output)
        if returncode != 0 or not indexed or int(indexed.group(1).replace(",", "")) != documents:
            shutil.rmtree(building, ignore_errors=True)
            tail = "\n".join(output.splitlines()[-15:])
            count = indexed.group(1) if indexed else "no"
            raise IndexBuildError(f"Anserini IndexCollection exited {returncode} having indexed {count} of "
                              f"{documents:,} documents:\n{tail}")
        if mapped != documents:
            shutil.rmtree(building, ignore_errors=True)
            raise IndexBuildError(f"{index}: the corpus shards hold {documents:,} documents but {mapped:,} distinct "
                                  "docids; build the URL-hash map (`corpus`) to see the repeated ones")
        os.replace(Path(staging) / DOCID_MAP, building / DOCID_MAP)
    if index.exists():
        index.rmdir()
    os.replace(building, index)
    corpus = Path(files[0]).parent.resolve()
    write_text_atomic(record_path, json.dumps({
        "documents": documents, "corpus": sources, "stemmer": stemmer, "anserini": anserini_jar().name,
        "stored_raw": False, "corpus_folder": os.path.relpath(corpus, index.resolve()),
        "corpus_folder_absolute": str(corpus)}, indent=1))
    return documents
