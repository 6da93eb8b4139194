"""ClueWeb22 txt trees and plain JSONL -> corpus shards (docid, url_hash, url, text) + a URL-hash map.

ClueWeb22 txt records: `ClueWeb22-ID`, `URL` (with a trailing newline), `URL-hash`, `Language`,
`Clean-Text`. Plain JSONL: `id`, `contents`, optionally `url` and `url_hash`. Input files are split
round-robin over shards. Bad lines (undecodable, not JSON, missing fields), empty texts and duplicate
ids are counted by reason and, when asked, written to a rejects file; none vanishes unreported.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from generation.corpus import url_hashes
from generation.corpus.url_hashes import URL_MAP
from generation.errors import InputError, read_lines
from generation.stages.base import Stage, StageSummary
from generation.storage import input_fingerprints
from generation.storage.atomic_files import ParquetSink, commit, tmp_path
from generation.storage.rejects import Rejects
from generation.storage.schema import CORPUS, arrow_schema
from generation.storage.shards import Shard, StageOutput

NAME = CORPUS
SUFFIXES = (".json.gz", ".jsonl.gz", ".jsonl", ".json")
URL_HASH = re.compile(r"[0-9A-Fa-f]{32}")
# One Parquet row group per 128 documents: the docstore reads a document's whole row group
# (generation/corpus/docstore.py). Measured on synthetic ~600-word texts: one document read costs 6.1 ms of CPU with
# 512-row groups, 1.8 ms with 128, 1.0 ms with 64, for +0.6% / +1.5% bytes against 512.
ROW_GROUP_ROWS = 128
MAP_BATCH_ROWS = 65_536  # (url_hash, docid) rows read at a time while the URL-hash map is built


def input_files(inputs: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in map(Path, inputs):
        if path.is_dir():
            files.extend(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(path, 0, "no such file or folder")
    return sorted(set(files))


def url_hash_of(url: str) -> str:
    return hashlib.md5(url.encode("utf-8")).hexdigest().upper()


def valid_url_hash(value, path: Path, lineno: int, field: str, docid: str) -> str | None:
    """A URL-hash as ClueWeb22 and Researchy's CluewebURLHash write it: the MD5 of the URL, 32 hex digits
    (stored upper-case); absent is allowed (plain JSONL without a URL), anything else is refused."""
    if value is None:
        return None
    if not isinstance(value, str) or not URL_HASH.fullmatch(value.strip()):
        raise InputError(
            path, lineno, f"expected 32 hex digits (the MD5 of the URL), got {value!r}", field=field, record_id=docid
        )
    return value.strip().upper()


def parse_line(line: bytes, path: Path, lineno: int) -> dict:
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(path, lineno, f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise InputError(path, lineno, f"not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(record, dict):
        raise InputError(path, lineno, f"expected a JSON object, got {type(record).__name__}")
    if "ClueWeb22-ID" in record:
        docid, text, url, url_hash = (
            record.get("ClueWeb22-ID"),
            record.get("Clean-Text"),
            record.get("URL"),
            record.get("URL-hash"),
        )
        id_field, text_field = "ClueWeb22-ID", "Clean-Text"
    elif "id" in record:
        docid, text, url, url_hash = record.get("id"), record.get("contents"), record.get("url"), record.get("url_hash")
        id_field, text_field = "id", "contents"
        if url_hash is None and isinstance(url, str):
            url_hash = url_hash_of(url.strip())
    else:
        raise InputError(
            path, lineno, "neither a ClueWeb22 record (ClueWeb22-ID) nor JSONL (id, contents)", field="ClueWeb22-ID"
        )
    if not isinstance(docid, str) or not docid.strip():
        raise InputError(path, lineno, "missing or not a string", field=id_field)
    if len(docid.split()) != 1:  # whitespace inside the id (str.split splits where str.isspace is true)
        raise InputError(
            path,
            lineno,
            "contains whitespace (TREC run and qrels files split on it)",
            field=id_field,
            record_id=docid.strip(),
        )
    if not isinstance(text, str):
        raise InputError(path, lineno, "missing or not a string", field=text_field, record_id=docid)
    url_hash = valid_url_hash(url_hash, path, lineno, "URL-hash" if id_field == "ClueWeb22-ID" else "url_hash", docid)
    return {
        "docid": docid.strip(),
        "url_hash": url_hash,
        "url": url.strip() if isinstance(url, str) else None,
        "text": text,
        "_text_field": text_field,
    }


def iter_documents(path: Path, rejects: Rejects) -> Iterator[dict]:
    """The documents of one input file; bad lines go to `rejects`. A file without a single non-blank line (an empty
    file, an empty .gz) is an error: a shard of nothing from it would look like a finished corpus."""
    lines = 0
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        lines += 1
        try:
            doc = parse_line(line, path, lineno)
        except InputError as error:
            rejects.reject(error, line.decode("utf-8", "replace")[:2000], reason="undecodable or malformed")
            continue
        if not doc["text"].strip():
            rejects.reject(
                InputError(path, lineno, "empty text", doc.pop("_text_field"), doc["docid"]),
                doc["docid"],
                reason="empty text",
            )
            continue
        doc.pop("_text_field")
        doc["_where"] = f"{path}:{lineno}"
        yield doc
    if not lines:
        raise InputError(
            path,
            0,
            "holds no lines (an empty file, an empty .gz, or blank lines only): no documents "
            "to read; remove it from the inputs",
        )


@dataclass(slots=True)
class CorpusSummary(StageSummary):
    documents: int = 0
    files: int = 0  # input files of every shard
    rejected: Counter[str] = field(default_factory=Counter)  # reason -> lines rejected


class CorpusStage(Stage[CorpusSummary]):
    """ClueWeb22 txt records or JSONL -> corpus shards; input files are split round-robin over the shards."""

    name = "corpus"
    writes = NAME
    produces = "`corpus-*.parquet`, `url_hash_map.parquet`"
    unit = "docs"
    summary_type = CorpusSummary

    def __init__(self, profile, out: Path, sources: list[Path], rejects: Path | None = None):
        super().__init__(profile, out)
        self.sources, self.rejects = [Path(p) for p in sources], rejects
        self.files: list[Path] = []

    @classmethod
    def config_hash(cls, profile=None) -> str:
        return "corpus-v1"  # no profile section shapes the corpus

    @classmethod
    def completed_files(cls, folder: Path, profile=None, verify_sha256: bool = True) -> list[Path]:
        files = super().completed_files(folder, profile, verify_sha256)
        input_fingerprints.warn_changed(files)  # a reader goes on, told what the shards still hold
        return files

    def prepare(self) -> None:
        self.files = input_files(self.sources)
        if not self.files:
            raise InputError(
                self.sources[0] if self.sources else ".", 0, f"no input files ending in {', '.join(SUFFIXES)}"
            )

    def run(self, shard: Shard = Shard(), progress=None, executor=None) -> CorpusSummary:
        self.prepare()  # a done shard whose inputs changed is not skipped as done: refused
        input_fingerprints.refuse_changed(self.output().record_path(shard), shard.take(self.files))
        return super().run(shard, progress, executor)

    def new_summary(self, shard: Shard) -> CorpusSummary:
        summary = super().new_summary(shard)
        summary.files = len(self.files)
        return summary

    def run_shard(self, shard: Shard, output: StageOutput, summary: CorpusSummary, progress, executor) -> dict:
        rejects_path = self.rejects
        if rejects_path is not None and shard.count > 1:
            rejects_path = rejects_path.with_name(f"{rejects_path.stem}-{shard.label}{rejects_path.suffix}")
        seen: dict[str, str] = {}
        with (
            Rejects(rejects_path, stop=False) as rejects,
            ParquetSink(output.path(shard), "corpus", ROW_GROUP_ROWS) as sink,
        ):
            for path in shard.take(self.files):
                for doc in iter_documents(path, rejects):
                    where = doc.pop("_where")
                    if doc["docid"] in seen:
                        rejects.reject(
                            InputError(
                                path,
                                int(where.rsplit(":", 1)[1]),
                                f"duplicate id, first at {seen[doc['docid']]}",
                                "id",
                                doc["docid"],
                            ),
                            doc["docid"],
                            reason="duplicate id",
                        )
                        continue
                    seen[doc["docid"]] = where
                    sink.write_rows([doc])
                    summary.documents += 1
                    self.tick(progress)
        summary.rejected = rejects.reasons
        return {
            "rejected": dict(rejects.reasons),
            "files": [str(p) for p in shard.take(self.files)],
            input_fingerprints.KEY: input_fingerprints.fingerprint(shard.take(self.files)),
        }


def write_url_map(out: Path, memory: int | None = None) -> tuple[Path, int]:
    """url_hash -> docid over all corpus shards, sorted by url_hash; refuses ids duplicated across shards. Memory
    stays bounded however large the corpus: the columns are read a batch at a time and sorted in spilled runs."""
    files = CorpusStage.completed_files(Path(out), None, verify_sha256=False)

    def batches():
        for path in files:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=MAP_BATCH_ROWS, columns=["url_hash", "docid"]):
                yield pa.Table.from_batches([batch])

    dupes = url_hashes.duplicate_docids(batches)
    if dupes:
        raise InputError(out, 0, f"{len(dupes)} docids appear in more than one corpus shard, e.g. {dupes[:3]}")
    path = out / URL_MAP
    tmp = tmp_path(path)  # corpus shards finishing together each write their own, then rename
    rows = 0
    schema = pa.schema([arrow_schema(NAME).field(name) for name in ("url_hash", "docid")])
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for chunk in url_hashes.first_document_per_hash(batches(), out, memory):
            writer.write_table(chunk.cast(schema))
            rows += chunk.num_rows
    commit(tmp, path)
    return path, rows
