"""The corpus's URL-hash -> docid map (`URL_MAP`) must give one document per URL-hash: Researchy's clicked
documents are found by their `CluewebURLHash` alone. Two documents with one URL-hash (the same URL crawled twice,
or a copy of a record under another id) are kept in the corpus, and the map takes the first docid in id order,
with a warning saying so and naming an example."""

from __future__ import annotations

from collections.abc import Iterator
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
    warn(
        f"{where}: {int(repeated.sum()):,} documents share a URL-hash with another document (e.g. "
        f"{hashes[first]}: {table['docid'][first - 1]} and {table['docid'][first]}); a clicked document with such a "
        "URL-hash is taken to be the first docid in id order"
    )
    return table.filter(pa.array(~repeated))


def url_hashes_of(corpus_files: list[Path], docids: set[str]) -> dict[str, str]:
    """docid -> url_hash of these docids, read from the corpus's shard files."""
    table = ds.dataset(corpus_files, format="parquet").to_table(
        columns=["docid", "url_hash"], filter=pc.field("docid").isin(sorted(docids))
    )
    return dict(zip(table["docid"].to_pylist(), table["url_hash"].to_pylist()))


def _hashes(docids: pa.Array) -> np.ndarray:
    import polars as pl

    return pl.Series(docids).hash(seed=0).to_numpy()  # 64-bit, vectorised; compared only within this run


def duplicate_docids(batches) -> list[str]:
    """The docids found more than once in `batches` (a callable giving (url_hash, docid) tables anew each time),
    in bounded memory: their 64-bit hashes are sorted in spilled runs, and only the few repeated hashes send a
    second pass after the docids themselves (a hash collision is not taken for a duplicate)."""
    from generation.storage.spill import KeyRuns

    keys = KeyRuns()
    for table in batches():
        keys.add(_hashes(table["docid"]))
    repeated = keys.repeated()
    if not len(repeated):
        return []
    seen: dict[str, int] = {}
    for table in batches():
        picked = table["docid"].filter(pa.array(np.isin(_hashes(table["docid"]), repeated)))
        for docid in picked.to_pylist():
            seen[docid] = seen.get(docid, 0) + 1
    return sorted(d for d, n in seen.items() if n > 1)


def first_document_per_hash(batches, where: Path, memory: int | None = None) -> Iterator[pa.Table]:
    """`one_document_per_hash` over (url_hash, docid) tables too many to hold at once: the rows are sorted by
    url_hash then docid in spilled runs (generation/storage/spill.py) and handed on in sorted chunks, the first docid of
    each url_hash only; the same warning once all are seen. Docids must be distinct (`duplicate_docids`)."""
    from generation.storage.spill import SPILL_ROWS, TableRuns

    runs = TableRuns("key", memory or SPILL_ROWS)
    for table in batches:
        table = table.filter(pc.is_valid(table["url_hash"]))
        # url_hash is 32 hex digits, so the concatenation sorts as (url_hash, docid)
        runs.add(table.append_column("key", pc.binary_join_element_wise(table["url_hash"], table["docid"], "")))
    previous, docid, repeats = None, None, 0
    example: tuple[str, str | None, str] | None = None  # (url_hash, earlier docid, later docid)
    for chunk in runs.merged():
        hashes = chunk["url_hash"].combine_chunks()
        if not len(hashes):
            continue
        before = pa.concat_arrays([pa.array([previous], pa.string()), hashes[:-1]])
        repeated = pc.fill_null(pc.equal(hashes, before), False).to_numpy(zero_copy_only=False)
        if repeated.any():
            repeats += int(repeated.sum())
            if example is None:
                first = int(np.flatnonzero(repeated)[0])
                earlier = docid if first == 0 else chunk["docid"][first - 1].as_py()
                example = (hashes[first].as_py(), earlier, chunk["docid"][first].as_py())
        previous, docid = hashes[-1].as_py(), chunk["docid"][-1].as_py()
        yield chunk.filter(pa.array(~repeated)).select(["url_hash", "docid"])
    if example is not None:  # set at the first repeat
        warn(
            f"{where}: {repeats:,} documents share a URL-hash with another document (e.g. {example[0]}: {example[1]} "
            f"and {example[2]}); a clicked document with such a URL-hash is taken to be the first docid in id order"
        )
