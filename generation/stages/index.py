"""Corpus shards -> a Lucene index built by Anserini (Pyserini's bundled jar), stemmed as the profile says.

Each document is handed to Anserini's JsonCollection as {"id", "contents", "url_hash", "url"}, through named
pipes that Polars writes JSON lines into in parallel (`JsonPipes`: no copy of the corpus on disk), at least one per
indexing thread, since Anserini gives each input file to one thread. url_hash is an indexed field
(-fields url_hash). The raw JSON is not stored (no -storeRaw): later stages read texts from the Parquet corpus
through a docid map (generation/corpus/docid_map.py, built while Java indexes) kept in the index folder, and the
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
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from generation.corpus.docid_map import NAME as DOCID_MAP
from generation.corpus.docid_map import write_docid_map
from generation.corpus.docstore import RECORD, require_index
from generation.corpus.java import anserini_jar, java_binary
from generation.stages.base import Input, Stage, StageSummary
from generation.stages.corpus import CorpusStage
from generation.storage.atomic_files import write_text_atomic
from generation.storage.shards import DONE_DIR, Completion, Shard, ShardLock

EXPORT_BATCH_ROWS = 4096  # documents turned into JSON lines at a time by one pipe's writer


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
    cut: list[tuple[Path, list[int]]] = []
    for path in corpus_files:
        groups = list(range(pq.ParquetFile(path).num_row_groups))
        cut.extend((path, list(chunk)) for chunk in np.array_split(groups, min(per_file, len(groups))) if len(chunk))
    return cut


def write_json_part(corpus_file: Path, row_groups: list[int], target: Path, progress=None) -> int:
    """Row groups of a corpus file as JsonCollection lines into `target` (a named pipe Anserini reads, or a file).
    A missing url_hash or url is written as "", as the kit always handed them to Anserini."""
    import polars as pl

    count = 0
    with open(target, "wb") as f:  # on a pipe: waits here until Anserini opens it
        parquet = pq.ParquetFile(corpus_file)
        for batch in parquet.iter_batches(
            batch_size=EXPORT_BATCH_ROWS, row_groups=row_groups, columns=["docid", "text", "url_hash", "url"]
        ):
            frame = pl.from_arrow(batch).select(
                pl.col("docid").alias("id"),
                pl.col("text").alias("contents"),
                pl.col("url_hash").fill_null(""),
                pl.col("url").fill_null(""),
            )
            frame.write_ndjson(f)
            count += batch.num_rows
            if progress is not None:
                progress(batch.num_rows)
    return count


class JsonPipes:
    """The corpus handed to Anserini through named pipes, one per part (>= one per indexing thread, since Anserini
    gives each input file to one thread): Polars writes JSON lines into them as Java reads, so no copy of the
    corpus is staged on disk and nothing is compressed only to be decompressed. Every part has its own writer
    thread (Polars releases the GIL), waiting until Java opens its pipe."""

    def __init__(self, corpus_files: list[Path], folder: Path, threads: int):
        self.parts = json_parts(corpus_files, threads)
        self.pipes = [folder / f"part-{n:05d}.jsonl" for n in range(len(self.parts))]
        for pipe in self.pipes:
            os.mkfifo(pipe)
        self._futures: list[Future] = []

    def start(self, progress=None) -> None:
        """The writers, started once Java is (a writer waits for its reader)."""
        from concurrent.futures import ThreadPoolExecutor

        lock = threading.Lock()

        def tick(n: int) -> None:
            if progress is not None:
                with lock:
                    progress(n)

        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.parts)))
        self._futures = [
            self._pool.submit(self._write, path, groups, pipe, tick)
            for (path, groups), pipe in zip(self.parts, self.pipes)
        ]

    @staticmethod
    def _write(path, groups, pipe, tick) -> int | None:
        try:
            return write_json_part(path, groups, pipe, tick)
        except OSError as error:  # Java stopped reading (it failed): said by its exit status and output
            if isinstance(error, BrokenPipeError) or "Broken pipe" in str(error):  # Polars: a plain OSError
                return None
            raise

    def finish(self) -> int | None:
        """After Java exited: releases writers still waiting for Java to open their pipe, returns the documents
        written (None when some part was not read to its end)."""
        if not self._futures:
            return None
        while not all(future.done() for future in self._futures):
            for pipe, future in zip(self.pipes, self._futures):
                if not future.done():
                    try:  # the writer's open returns, its next write fails
                        os.close(os.open(pipe, os.O_RDONLY | os.O_NONBLOCK))
                    except OSError:
                        pass
            time.sleep(0.05)
        counts = [future.result() for future in self._futures]
        self._pool.shutdown()
        return None if any(c is None for c in counts) else sum(counts)


def index_stemmer(index: Path) -> str | None:
    """The stemmer this kit built the index with; None for an index built elsewhere (no completion record)."""
    record = Path(index) / RECORD
    return json.loads(record.read_text())["stemmer"] if record.exists() else None


@dataclass(slots=True)
class IndexSummary(StageSummary):
    documents: int = 0
    path: Path = Path()  # the index folder


class IndexStage(Stage[IndexSummary]):
    """Corpus shards -> one Lucene index (not sharded), stemmed with the profile's bm25.stemmer."""

    name = "index"
    produces = "a Lucene index (Anserini, postings only; texts read from the corpus)"
    unit = "docs"
    sharded = False
    reads = (Input("corpus", "folder of corpus shards", (CorpusStage,)),)
    summary_type = IndexSummary

    def __init__(
        self,
        profile,
        out: Path,
        corpus: Path,
        threads: int = 1,
        memory_mb: int = 1024,
        stemmer: str | None = None,
        log: Path | None = None,
    ):
        super().__init__(profile, out, corpus=corpus)
        self.threads, self.memory_mb, self.log = threads, memory_mb, log
        self.stemmer = stemmer or (profile.bm25.stemmer if profile is not None else "porter")

    @classmethod
    def completed_files(cls, folder: Path, profile=None, verify_sha256: bool = True) -> list[Path]:
        return [require_index(folder)]

    def run(self, shard: Shard = Shard(), progress=None, executor=None) -> IndexSummary:
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
                raise IndexBuildError(
                    f"{record_path}: not a valid index record; remove {index} and build it again"
                ) from None
            if record["corpus"] == sources and record["stemmer"] == self.stemmer:
                summary.documents, summary.skipped = record["documents"], True
                return summary
            raise IndexBuildError(
                f"{index}: an index built from other corpus shards or settings is there; "
                "remove it or choose another --index"
            )
        if index.exists() and (not index.is_dir() or any(index.iterdir())):
            raise IndexBuildError(f"{index}: exists and is not an index this kit finished; remove it or choose another")
        index.parent.mkdir(parents=True, exist_ok=True)
        lock = ShardLock(index.parent, f"index-{index.name}")
        lock.acquire()
        try:
            summary.documents = _build_locked(
                files, sources, index, self.threads, self.stemmer, self.memory_mb, progress, self.log
            )
        finally:
            lock.release()
        summary.outputs = [index]
        return summary


def index_collection_command(
    collection: Path, index: Path, threads: int, stemmer: str, memory_mb: int | None = None, store_raw: bool = False
) -> list[str]:
    """Anserini's IndexCollection over a JsonCollection folder as the index stage runs it (the `url_hash` field
    kept; with `memory_mb`, the JVM heap and half of it, at most 4 GiB, as Lucene's indexing buffer); `store_raw`
    keeps each document's JSON in the index, as indexes built before the corpus Parquet did."""
    memory = [] if memory_mb is None else [f"-Xmx{memory_mb}m"]
    buffer = [] if memory_mb is None else ["-memoryBuffer", str(min(memory_mb // 2, 4096))]
    return [
        str(java_binary()),
        *memory,
        "-cp",
        str(anserini_jar()),
        "io.anserini.index.IndexCollection",
        "-collection",
        "JsonCollection",
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-input",
        str(collection),
        "-index",
        str(index),
        "-threads",
        str(threads),
        "-stemmer",
        stemmer,
        *(["-storeRaw"] if store_raw else []),
        "-fields",
        "url_hash",
        *buffer,
    ]


def _build_locked(files, sources, index: Path, threads, stemmer, memory_mb, progress, log) -> int:
    record_path = index / RECORD
    building = index.with_name(f".{index.name}.building")
    # Left by a killed build (we hold the lock): the half-built index and the staging folder.
    shutil.rmtree(building, ignore_errors=True)
    for stale in index.parent.glob(f".{index.name}.anserini-input-*"):
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f".{index.name}.anserini-input-", dir=index.parent) as staging:
        pipes = Path(staging) / "pipes"
        pipes.mkdir()
        documents = sum(pq.ParquetFile(path).metadata.num_rows for path in files)
        command = index_collection_command(pipes, building, threads, stemmer, memory_mb)
        output_path = Path(staging) / "anserini.log"  # a file, not a pipe: Java must not wait on a full pipe
        with open(output_path, "w") as output_file:
            parts = JsonPipes(files, pipes, threads)
            java = subprocess.Popen(
                command, stdout=output_file, stderr=subprocess.STDOUT, text=True, preexec_fn=die_with_parent
            )
            try:  # while Java indexes: where each document's text lies in the corpus
                parts.start(progress)
                mapped = write_docid_map(files, Path(staging) / DOCID_MAP)
            except BaseException:
                java.kill()
                raise
            finally:
                returncode = java.wait()
                written = parts.finish()
        output = output_path.read_text()
        if log is not None:
            write_text_atomic(log, output)
        indexed = re.search(r"Total ([\d,]+) documents indexed", output)
        if (
            returncode != 0
            or written != documents
            or not indexed
            or int(indexed.group(1).replace(",", "")) != documents
        ):
            shutil.rmtree(building, ignore_errors=True)
            tail = "\n".join(output.splitlines()[-15:])
            count = indexed.group(1) if indexed else "no"
            raise IndexBuildError(
                f"Anserini IndexCollection exited {returncode} having indexed {count} of "
                f"{documents:,} documents:\n{tail}"
            )
        if mapped != documents:
            shutil.rmtree(building, ignore_errors=True)
            raise IndexBuildError(
                f"{index}: the corpus shards hold {documents:,} documents but {mapped:,} distinct "
                "docids; build the URL-hash map (`corpus`) to see the repeated ones"
            )
        os.replace(Path(staging) / DOCID_MAP, building / DOCID_MAP)
    if index.exists():
        index.rmdir()
    os.replace(building, index)
    corpus = Path(files[0]).parent.resolve()
    write_text_atomic(
        record_path,
        json.dumps(
            {
                "documents": documents,
                "corpus": sources,
                "stemmer": stemmer,
                "anserini": anserini_jar().name,
                "stored_raw": False,
                "corpus_folder": os.path.relpath(corpus, index.resolve()),
                "corpus_folder_absolute": str(corpus),
            },
            indent=1,
        ),
    )
    return documents


# The index as the stages that read document texts from it declare it (their `reads`), declared once here.
INDEX_TEXTS = Input("index", "Lucene index (document text)", (IndexStage,))
