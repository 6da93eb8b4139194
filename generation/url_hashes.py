"""The corpus's URL-hash -> docid map (`URL_MAP`) must give one document per URL-hash: Researchy's clicked
documents are found by their `CluewebURLHash` alone. Two documents with one URL-hash (the same URL crawled twice, or a
copy of a record under another id) are kept in the corpus, and the map takes the first docid in id order,
with a warning saying so and naming an example."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from generation.notices import warn

URL_MAP = "url_hash_map.parquet"  # the corpus folder's url_hash -> docid map


def one_document_per_hash(table: pa.Table, where: Path) -> pa.Table:
    """(url_hash, docid) rows sorted by url_hash, the first docid (in id order) of each url_hash."""
    table = table.sort_by([("url_hash", "ascending"), ("docid", "ascending")])
    if table.num_rows < 2:
        return table
    hashes = table["url_hash"].combine_chunks()
    repeated = np.r_[False, pc.equal(hashes[1:], hashes[:-1]).to_numpy(zero_copy_only=False)]
    if not repeated.any():
        return table
    first = int(np.flatnonzero(repeated)[0])
    warn(f"{where}: {int(repeated.sum()):,} documents share a URL-hash with another document (e.g. "
         f"{hashes[first]}: {table['docid'][first - 1]} and {table['docid'][first]}); a clicked document with such a "
         "URL-hash is taken to be the first docid in id order")
    return table.filter(pa.array(~repeated))


def url_hashes_of(corpus_files: list[Path], docids: set[str]) -> dict[str, str]:
    """docid -> url_hash of these docids, read from the corpus's shard files."""
    table = ds.dataset(corpus_files, format="parquet").to_table(columns=["docid", "url_hash"],
                                                                filter=pc.field("docid").isin(sorted(docids)))
    return dict(zip(table["docid"].to_pylist(), table["url_hash"].to_pylist()))
