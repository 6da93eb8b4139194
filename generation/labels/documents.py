"""An imported document id -> the kit's (docid, url_hash).

The kit keys documents on the ClueWeb22-ID (`docid`) and keeps the URL-hash beside it (`url_hash`, 32 upper-case hex
digits, = Researchy's `CluewebURLHash`); the authors' ratings key on the URL-hash. With the corpus folder
(`--corpus`, the `corpus` stage's shards and URL-hash map) an imported id is matched against both, so the release
keys documents as a release the kit judged does. Without it, or for an id the corpus does not hold, the id is kept
as given, and its `url_hash` is the id itself when it is one (it is then also what `clicked` and `corpus-ids` are
derived from); how each row's id was resolved is counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pyarrow.parquet as pq

from generation.corpus.url_hashes import URL_MAP, url_hashes_of
from generation.storage.schema import CORPUS
from generation.storage.shards import stage_files

URL_HASH = re.compile(r"^[0-9A-Fa-f]{32}$")

# how a row's document id was resolved (the completion record's and the card's counts)
FROM_CORPUS = "clueweb22_id_in_corpus"  # the id is a docid of the corpus; its url_hash from the corpus
MAPPED = "url_hash_mapped_to_clueweb22_id"  # a URL-hash the corpus's map turned into its ClueWeb22-ID
AS_GIVEN = "url_hash_kept_as_docid"  # a URL-hash the corpus does not hold (or no corpus): docid = the hash
UNRESOLVED = "kept_as_given_without_url_hash"  # neither: kept as given, url_hash null
HOW = (FROM_CORPUS, MAPPED, AS_GIVEN, UNRESOLVED)


class DocumentKeys:
    """Resolves document ids a block at a time (`prefetch`), so the corpus is read once per block, not per id."""

    def __init__(self, corpus: Path | None = None):
        self.corpus = Path(corpus) if corpus is not None else None
        self.files: list[Path] = []
        if self.corpus is not None:
            self.files = stage_files(self.corpus, CORPUS, full=False)
            if not (self.corpus / URL_MAP).is_file():
                raise FileNotFoundError(f"{self.corpus / URL_MAP}: missing; run `researchy-subq corpus` to the end")
        self.known: dict[str, tuple[str, str | None, str]] = {}

    def prefetch(self, docids: Iterable[str]) -> None:
        """Resolves these ids (and forgets the previous block's)."""
        wanted = sorted(set(docids))
        self.known = {}
        in_corpus, by_hash = {}, {}
        if self.corpus is not None and self.files and wanted:
            in_corpus = url_hashes_of(self.files, set(wanted))
            hashes = sorted({d.upper() for d in wanted if URL_HASH.match(d) and d not in in_corpus})
            if hashes:
                table = pq.read_table(self.corpus / URL_MAP, filters=[("url_hash", "in", hashes)])
                by_hash = dict(zip(table["url_hash"].to_pylist(), table["docid"].to_pylist()))
        for docid in wanted:
            if docid in in_corpus:
                self.known[docid] = (docid, in_corpus[docid], FROM_CORPUS)
            elif URL_HASH.match(docid):
                mapped = by_hash.get(docid.upper())
                self.known[docid] = (mapped, docid.upper(), MAPPED) if mapped else (docid, docid.upper(), AS_GIVEN)
            else:
                self.known[docid] = (docid, None, UNRESOLVED)

    def present_url_hashes(self, hashes: Iterable[str]) -> set[str]:
        """Which of these (upper-case) URL-hashes the corpus holds, by its URL-hash map; none without a corpus."""
        wanted = sorted(set(hashes))
        if self.corpus is None or not wanted:
            return set()
        table = pq.read_table(self.corpus / URL_MAP, columns=["url_hash"], filters=[("url_hash", "in", wanted)])
        return set(table["url_hash"].to_pylist())

    def resolve(self, docid: str) -> tuple[str, str | None, str]:
        """(docid, url_hash, how it was resolved: one of HOW) of a prefetched id."""
        return self.known[docid]
