"""Corpus shards -> a Lucene index built by Anserini (Pyserini's bundled jar), stemmed as the profile says.

Each document is handed to Anserini's JsonCollection as {"id", "contents", "url_hash", "url"}; the raw
JSON is stored (-storeRaw) so later stages read the text and url_hash back by docid, and url_hash is
also an indexed field (-fields url_hash). The index is built beside its target and renamed into place
only when Anserini succeeds, with a completion record naming the corpus shards it was built from.
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

import pyarrow.parquet as pq

from generation.java import anserini_jar, java_binary
from generation.docstore import require_index
from generation.shards import DONE_DIR, Completion, Shard, ShardLock
from generation.stages.base import Input, Stage, StageSummary
from generation.stages.corpus import CorpusStage
from generation.storage import write_text_atomic

RECORD = "researchy_subq_index.json"


class IndexBuildError(RuntimeError):
    pass


def die_with_parent() -> None:
    """In the Java child: exit when the Python parent dies (Linux), so a killed `index` leaves no orphan
    still writing into the folder the next run cleans."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def export_jsonl(corpus_files: list[Path], folder: Path, progress=None) -> int:
    """Stream the corpus into Anserini JsonCollection files, one per corpus shard."""
    count = 0
    for n, path in enumerate(corpus_files):
        with open(folder / f"part-{n:05d}.jsonl", "w", encoding="utf-8") as f:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=8192):
                for row in batch.to_pylist():
                    f.write(json.dumps({"id": row["docid"], "contents": row["text"], "url_hash": row["url_hash"] or "",
                                        "url": row["url"] or ""}, ensure_ascii=False) + "\n")
                count += batch.num_rows
                if progress is not None:
                    progress(batch.num_rows)
    return count


def index_stemmer(index: Path) -> str | None:
    """The stemmer this kit built the index with; None for an index built elsewhere (no completion record)."""
    record = Path(index) / RECORD
    return json.loads(record.read_text())["stemmer"] if record.exists() else None


class IndexStage(Stage):
    """Corpus shards -> one Lucene index (not sharded), stemmed with the profile's bm25.stemmer."""
    name = "index"
    produces = "a Lucene index (Anserini, raw JSON stored)"
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
    # Left by a killed build (we hold the lock): the half-built index and the uncompressed corpus copy.
    shutil.rmtree(building, ignore_errors=True)
    for stale in index.parent.glob(f".{index.name}.anserini-input-*"):
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f".{index.name}.anserini-input-", dir=index.parent) as staging:
        documents = export_jsonl(files, Path(staging), progress)
        command = [str(java_binary()), f"-Xmx{memory_mb}m", "-cp", str(anserini_jar()),
                   "io.anserini.index.IndexCollection", "-collection", "JsonCollection",
                   "-generator", "DefaultLuceneDocumentGenerator", "-input", staging, "-index", str(building),
                   "-threads", str(threads), "-stemmer", stemmer, "-storeRaw", "-fields", "url_hash",
                   "-memoryBuffer", str(min(memory_mb // 2, 4096))]
        result = subprocess.run(command, capture_output=True, text=True, preexec_fn=die_with_parent)
        if log is not None:
            Path(log).write_text(result.stdout + result.stderr)
        output = result.stdout + result.stderr
        indexed = re.search(r"Total ([\d,]+) documents indexed", output)
        if result.returncode != 0 or not indexed or int(indexed.group(1).replace(",", "")) != documents:
            shutil.rmtree(building, ignore_errors=True)
            tail = "\n".join(output.splitlines()[-15:])
            count = indexed.group(1) if indexed else "no"
            raise IndexBuildError(f"Anserini IndexCollection exited {result.returncode} having indexed {count} of "
                              f"{documents:,} documents:\n{tail}")
    if index.exists():
        index.rmdir()
    os.replace(building, index)
    write_text_atomic(record_path, json.dumps({"documents": documents, "corpus": sources, "stemmer": stemmer,
                                               "anserini": anserini_jar().name}, indent=1))
    return documents
