"""Document text and url_hash by docid, read back from the Lucene index's stored raw JSON."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path


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


def cut_words(text: str, max_words: int | None) -> str:
    """The first `max_words` whitespace-separated words joined by single spaces, as the authors' code does
    (`" ".join(text.split()[:2048])`, crux/augmentation/gen_ratings.py), short texts included; the text
    untouched when `max_words` is None."""
    if max_words is None:
        return text
    return " ".join(text.split()[:max_words])


class DocStore:
    def __init__(self, index: Path, cache_size: int = 4096):
        from generation.java import java_class

        self.index = require_index(index)
        self._searcher = java_class("io.anserini.search.SimpleSearcher")(str(index))
        self._get = lru_cache(maxsize=cache_size)(self._fetch)

    def _fetch(self, docid: str) -> dict:
        doc = self._searcher.doc(docid)
        if doc is None:
            raise MissingDocument(f"document {docid!r} is not in the index {self.index}: the index was built from "
                                  "another corpus than the runs or candidates")
        return json.loads(doc.get("raw"))

    def text(self, docid: str) -> str:
        return self._get(docid)["contents"]

    def url_hash(self, docid: str) -> str | None:
        return self._get(docid).get("url_hash") or None

    def __len__(self) -> int:
        return self._searcher.get_total_num_docs()
