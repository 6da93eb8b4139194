"""Document text and url_hash by docid: from the Parquet corpus the index was built from (the index's record names
it and its docid map, generation/corpus/docid_map.py), or, for an index built with its raw JSON stored (`-storeRaw`:
this kit before it stopped storing texts twice, or an index built elsewhere), from the index itself."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from pathlib import Path

import pyarrow.parquet as pq

from generation.corpus.docid_map import NAME as DOCID_MAP
from generation.corpus.docid_map import DocidMap

RECORD = "researchy_subq_index.json"  # the index stage's completion record, in the index folder


class MissingDocument(LookupError):
    """A docid (a candidate, a run's hit) that the Lucene index does not hold."""


class NotAnIndex(ValueError):
    pass


def require_index(index: Path) -> Path:
    """`index` is a Lucene index folder (it has a segments_N file), or a one-line error; Java's own
    exception for a missing or foreign folder is a page of stack trace."""
    index = Path(index)
    if not index.exists():
        raise NotAnIndex(f"{index}: no such index folder; build it with `researchy-subq index`")
    if not index.is_dir() or not any(index.glob("segments_*")):
        raise NotAnIndex(f"{index}: not a Lucene index (no segments_N file); build it with `researchy-subq index`")
    return index


def corpus_of(index: Path) -> Path | None:
    """The corpus folder an index without stored texts reads them from (its record's `corpus_folder`, relative to
    the index, else `corpus_folder_absolute`), None for an index that stores them itself."""
    record_path = Path(index) / RECORD
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    if record.get("stored_raw", True):
        return None
    for folder in (Path(index) / record["corpus_folder"], Path(record["corpus_folder_absolute"])):
        if all((folder / name).is_file() for name in record["corpus"]):
            return Path(os.path.normpath(folder))
    raise NotAnIndex(
        f"{index}: its texts are read from the corpus it was built from, {record['corpus_folder_absolute']}, "
        f"whose files ({', '.join(record['corpus'])}) are not there any more; put the corpus back or "
        "build the index again"
    )


def cut_words(text: str, max_words: int | None) -> str:
    """The first `max_words` whitespace-separated words joined by single spaces, as the authors' code does
    (`" ".join(text.split()[:2048])`, crux/augmentation/gen_ratings.py), short texts included; the text
    untouched when `max_words` is None."""
    if max_words is None:
        return text
    return " ".join(text.split()[:max_words])


class DocStore:
    """`text(docid)`, `url_hash(docid)`; `prefetch(docids)` reads a batch at once, row groups in file order."""

    def __init__(self, index: Path, cache_size: int = 4096):
        self.index = require_index(index)
        self._cache: OrderedDict[str, dict] = OrderedDict()
        self._cache_size = cache_size
        self._corpus = corpus_of(self.index)
        if self._corpus is None:
            from generation.corpus.java import java_class

            self._searcher = java_class("io.anserini.search.SimpleSearcher")(str(index))
        else:
            self._map = DocidMap(self.index / DOCID_MAP)
            self._files: dict[str, pq.ParquetFile] = {}

    def _missing(self, docid: str) -> MissingDocument:
        return MissingDocument(
            f"document {docid!r} is not in the index {self.index}: the index was built from "
            "another corpus than the runs or candidates"
        )

    def _remember(self, docid: str, doc: dict) -> dict:
        self._cache[docid] = doc
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return doc

    def _fetch(self, docid: str) -> dict:
        if docid in self._cache:
            self._cache.move_to_end(docid)
            return self._cache[docid]
        if self._corpus is not None:
            self.prefetch([docid])
            return self._cache[docid]
        doc = self._searcher.doc(docid)
        if doc is None:
            raise self._missing(docid)
        return self._remember(docid, json.loads(doc.get("raw")))

    def prefetch(self, docids) -> None:
        """Reads the texts of `docids` not yet in hand, each corpus row group once, in file order."""
        if self._corpus is None:
            return
        docids = list(dict.fromkeys(docids))
        self._cache_size = max(self._cache_size, len(docids))  # a batch is not evicted before it is used
        wanted: dict[tuple[str, int], list[tuple[int, str]]] = {}
        for docid in docids:
            if docid in self._cache:
                continue
            where = self._map.get(docid)
            if where is None:
                raise self._missing(docid)
            wanted.setdefault(where[:2], []).append((where[2], docid))
        for (name, group), rows in sorted(wanted.items()):
            if name not in self._files:
                self._files[name] = pq.ParquetFile(self._corpus / name)
            table = self._files[name].read_row_group(group, columns=["docid", "url_hash", "text"])
            picked = table.take([row for row, _ in rows]).to_pylist()
            for (_, docid), doc in zip(rows, picked):
                if doc["docid"] != docid:
                    raise NotAnIndex(
                        f"{self._corpus / name}: row group {group} no longer holds {docid!r} where the "
                        f"index's docid map says; the corpus changed since `index`: build the index again"
                    )
                self._remember(docid, {"contents": doc["text"], "url_hash": doc["url_hash"]})

    def text(self, docid: str) -> str:
        return self._fetch(docid)["contents"]

    def url_hash(self, docid: str) -> str | None:
        return self._fetch(docid).get("url_hash") or None

    def __len__(self) -> int:
        return self._map.rows if self._corpus is not None else self._searcher.get_total_num_docs()
