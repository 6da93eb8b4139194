"""`researchy-subq texts`: the texts of a release's judged documents (its `corpus-ids`), from the user's own
licensed copy, written locally: as the judge saw them (the release profile's `judge.context_words` cut) and whole.

The copy is a ClueWeb22 txt tree (only the files holding judged documents are opened; with `.offset` files only
their records are read) or the kit's corpus Parquet (`researchy-subq corpus` output). Output, in the manner of the
stages: `texts-XXXXX-of-YYYYY.parquet` (schema table `document_texts`) with completion records, so a re-run skips
finished shards and `--num-shards` splits the work over workers; `missing-XXXXX-of-YYYYY.tsv` lists the documents
the copy lacks, with why. A ClueWeb22 shard owns whole ClueWeb22 files (by a hash of the file name), so no two
workers open the same file. Memory: one shard's ids, and `ROWS_PER_GROUP` texts at a time.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.contract import Manifest, ManifestError, read_manifest
from builder.release.layout import MANIFEST, SPLITS, config
from builder.release.no_text import TEXTS_MARKER, refuse_release_target
from builder.release.ranking_documents import judged_docids, unjudged_negatives
from builder.training.clueweb22 import CLUEWEB22_ID, Found, Missing, read_file_records, txt_root
from generation.corpus.docstore import cut_words
from generation.errors import ArgumentError, InputError
from generation.storage.atomic_files import ParquetSink, commit, prepare_output_folder, tmp_path, write_text_atomic
from generation.storage.schema import columns
from generation.storage.shards import Shard, StageOutput, skip_if_done

NAME = "texts"
ROWS_PER_GROUP = 1_000  # texts held before a row group is written (whole ClueWeb22 pages run to ~100 KB)


@dataclass
class TextsSummary:
    shard: str
    copy_kind: str = ""  # copy_kind(): "clueweb22-txt" or "corpus-parquet"
    documents: int = 0  # judged documents this shard owns
    written: int = 0
    missing: Counter = field(default_factory=Counter)
    files_opened: int = 0
    wrong_offsets: dict[str, str] = field(default_factory=dict)  # offset file -> what was wrong (its file streamed)
    skipped: bool = False
    outputs: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "shard": self.shard,
            "copy_kind": self.copy_kind,
            "documents": self.documents,
            "written": self.written,
            "missing": dict(self.missing),
            "files_opened": self.files_opened,
            "wrong_offsets": self.wrong_offsets,
            "skipped": self.skipped,
            "outputs": [str(p) for p in self.outputs],
        }


def release_context_words(release: Path) -> tuple[int, Manifest]:
    """The judge's context cut and the manifest of a release folder."""
    try:
        manifest = read_manifest(release)
    except ManifestError as e:
        raise InputError(
            Path(release) / MANIFEST,
            0,
            f"not a release manifest ({str(e).splitlines()[0][:160]}); "
            "give the release folder `build-release` wrote (or downloaded from the Hub)",
        ) from None
    return manifest.profile.judge.context_words, manifest


def wanted_docids(release: Path, all_retrieved: bool = False) -> pa.Table:
    """The documents `texts` brings: every judged one, every unjudged negative of the release's hard-negatives rows
    (retrieved for the question or judged for another), and with `all_retrieved` every document of
    `questions.retrieved_unjudged` (what `training-files` needs to re-derive rows with a larger k)."""
    release = Path(release)
    judged = judged_docids(release)["docid"].combine_chunks()
    parts = [judged, unjudged_negatives(release, judged)]
    for split in SPLITS if all_retrieved else ():
        for path in config("questions").files(release, split):
            lists = pq.read_table(path, columns=["retrieved_unjudged"])["retrieved_unjudged"]
            parts.append(pc.struct_field(pc.list_flatten(lists), "docid"))
    ids = pa.chunked_array([p.cast(pa.string()) for p in parts if len(p)], pa.string())
    return pa.table({"docid": pc.unique(ids)})


def copy_kind(copy: Path) -> str:
    copy = Path(copy)
    if copy.is_file() and copy.suffix == ".parquet" or copy.is_dir() and any(copy.glob("corpus-*.parquet")):
        return "corpus-parquet"
    if copy.is_dir() and (any(txt_root(copy).glob("*/*/*/*.json.gz"))):
        return "clueweb22-txt"
    raise InputError(
        copy,
        0,
        "neither a ClueWeb22 copy (txt/LANG/LANGNN/LANGNNNN/*.json.gz) nor the kit's corpus "
        "Parquet (corpus-*.parquet from `researchy-subq corpus`)",
    )


def texts_config_hash(manifest: Manifest, context_words: int, kind: str, all_retrieved: bool = False) -> str:
    """What a texts shard depends on: the release files naming the documents (corpus-ids, hard-negatives, and with
    `all_retrieved` the questions), the cut, the kind of copy (reading with or without offsets gives the same rows,
    so a run may resume in the other mode)."""
    folders = ("data/corpus_ids/", "data/hard_negatives/") + (("data/questions/",) if all_retrieved else ())
    ids = sorted((name, entry.sha256) for name, entry in manifest.files.items() if name.startswith(folders))
    blob = json.dumps([ids, context_words, kind] + ([True] if all_retrieved else []), sort_keys=True).encode()
    return "texts-" + hashlib.sha256(blob).hexdigest()[:12]


def row_of(found: Found, context_words: int) -> dict:
    return {
        "docid": found.docid,
        "url_hash": found.url_hash,
        "text": cut_words(found.text, context_words),
        "full_text": found.text,
        "words": len(found.text.split()),
    }


def clueweb22_found(
    copy: Path, docs: pa.Table, shard: Shard, summary: TextsSummary, use_offsets: bool
) -> Iterator[Found | Missing]:
    """The shard's documents, file by file: the ids are parsed in Arrow, so only this shard's reach Python."""
    parts = pc.extract_regex(docs["docid"], CLUEWEB22_ID.pattern)  # RE2 takes (?P<name>)
    valid = pc.is_valid(parts)
    for docid in docs["docid"].filter(pc.invert(valid)).to_pylist():
        if shard.owns_key(docid):
            yield Missing(docid, "not_clueweb22_id")
    parts, ids = parts.filter(valid), docs["docid"].filter(valid)
    keys = pc.binary_join_element_wise(*(pc.struct_field(parts, f) for f in ("lang", "stream", "subdir")), "")
    keys = pc.binary_join_element_wise(keys, pc.struct_field(parts, "file"), "-")
    owned = pa.array([k for k in pc.unique(keys).to_pylist() if shard.owns_key(k)], pa.string())
    mine = pa.table({"key": keys, "record": pc.cast(pc.struct_field(parts, "record"), pa.int32()), "docid": ids})
    mine = mine.filter(pc.is_in(mine["key"], owned)).sort_by([("key", "ascending"), ("record", "ascending")])
    root = txt_root(copy)
    rows = zip(mine["key"].to_pylist(), mine["record"].to_pylist(), mine["docid"].to_pylist())
    for name, group in groupby(rows, key=itemgetter(0)):
        summary.files_opened += 1
        yield from read_file_records(
            root,
            name,
            [(record, docid) for _, record, docid in group],
            use_offsets,
            lambda offsets, why: summary.wrong_offsets.setdefault(str(offsets), why),
        )


def parquet_found(copy: Path, docs: pa.Table, shard: Shard) -> Iterator[Found | Missing]:
    wanted = pa.array([d for d in docs["docid"].to_pylist() if shard.owns_key(d)], pa.string())
    files = [copy] if Path(copy).is_file() else sorted(Path(copy).glob("corpus-*.parquet"))
    seen: set[str] = set()
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(
            batch_size=ROWS_PER_GROUP, columns=["docid", "url_hash", "text"]
        ):
            batch = batch.filter(pc.is_in(batch["docid"], wanted))
            for row in batch.to_pylist():
                if row["docid"] not in seen:
                    seen.add(row["docid"])
                    text = row["text"]
                    has_text = text and text.strip()
                    yield (
                        Found(row["docid"], text, row["url_hash"]) if has_text else Missing(row["docid"], "empty_text")
                    )
    for docid in wanted.to_pylist():
        if docid not in seen:
            yield Missing(docid, "not_in_copy")


class MissingList:
    """`missing-{shard}.tsv`: docid and reason, one line each as found (so memory does not grow with them), renamed
    into place when the shard is done."""

    def __init__(self, path: Path):
        self.path, self.tmp = path, tmp_path(path)
        self.file = open(self.tmp, "w", encoding="utf-8")
        self.file.write("\t".join(c.name for c in columns("missing_documents")) + "\n")

    def add(self, docid: str, reason: str) -> None:
        self.file.write(f"{docid}\t{reason}\n")

    def close(self) -> Path:
        self.file.close()
        commit(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        """A failed run leaves no temporary list behind."""
        self.file.close()
        self.tmp.unlink(missing_ok=True)


def missing_documents(out: Path) -> set[str]:
    """The documents `texts` looked for in the copy and did not find: the docids of a texts folder's missing-*.tsv."""
    missing: set[str] = set()
    for path in sorted(Path(out).glob("missing-*.tsv")):
        with open(path, encoding="utf-8") as lines:
            next(lines, None)  # the header
            missing.update(line.split("\t", 1)[0] for line in lines if line.strip())
    return missing


def all_retrieved_command(release: Path, texts: Path) -> str:
    """The `texts` run that writes every retrieved document's text too, into a folder beside `texts` (a texts folder
    holds shards of one config: the first run's is refused there)."""
    marker = json.loads((Path(texts) / TEXTS_MARKER).read_text(encoding="utf-8"))
    beside = Path(f"{Path(texts)}-all-retrieved")
    words = [str(release), "--from", marker["copy"], "--out", str(beside), "--all-retrieved"]
    return "researchy-subq texts " + " ".join(map(shlex.quote, words))


def write_texts(
    release: Path,
    copy: Path,
    out: Path,
    shard: Shard = Shard(),
    use_offsets: bool = True,
    progress=None,
    all_retrieved: bool = False,
) -> TextsSummary:
    release, copy, out = Path(release), Path(copy), Path(out)
    refuse_release_target(out, release)
    prepare_output_folder(out)
    if not copy.exists():
        raise ArgumentError(f"--from {copy}: no such file or folder")
    context_words, manifest = release_context_words(release)
    kind = copy_kind(copy)
    output = StageOutput(out, NAME, texts_config_hash(manifest, context_words, kind, all_retrieved))
    summary = TextsSummary(shard.label, copy_kind=kind)
    if skip_if_done(output, shard, summary):
        return summary
    write_text_atomic(
        out / TEXTS_MARKER,
        json.dumps(
            {
                "what": "document texts from a licensed copy: never publish",
                "release": manifest.repo,
                "profile_hash": manifest.profile_hash,
                "context_words": context_words,
                "copy": str(copy),
                "copy_kind": kind,
            },
            indent=1,
        )
        + "\n",
    )
    docs = wanted_docids(release, all_retrieved)
    found = (
        clueweb22_found(copy, docs, shard, summary, use_offsets)
        if kind == "clueweb22-txt"
        else parquet_found(copy, docs, shard)
    )
    missing = MissingList(out / f"missing-{shard.label}.tsv")
    try:
        with ParquetSink(output.path(shard), "document_texts", rows_per_batch=ROWS_PER_GROUP) as sink:
            for item in found:
                summary.documents += 1
                if isinstance(item, Missing):
                    missing.add(item.docid, item.reason)
                    summary.missing[item.reason] += 1
                else:
                    sink.write_rows([row_of(item, context_words)])
                    summary.written += 1
                if progress is not None:
                    progress(1)
    except BaseException:
        missing.abort()
        raise
    missing_path = missing.close()
    output.mark_done(
        shard,
        documents=summary.documents,
        missing=dict(summary.missing),
        wrong_offsets=summary.wrong_offsets,
        copy=str(copy),
        copy_kind=kind,
        context_words=context_words,
    )
    summary.outputs = [output.path(shard), missing_path]
    return summary


def text_files(out: Path) -> list[Path]:
    """The finished texts shards of a `texts` output folder (checked against their completion records)."""
    from generation.storage.shards import stage_files

    return stage_files(out, NAME, full=False)
