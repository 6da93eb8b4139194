"""What admitted a candidate to the pool first, from its ranks and clicks: the pool rule of
generation/stages/pool.py `select` (top `bm25_top` BM25 first, then the reranker's top `rerank_top` by rank,
then the question's clicked documents) read back from a row's provenance columns, vectorised over a batch.
Both pool rules (`union`, `sequential`) admit the same documents in the same order, so one function serves both.

`validate` re-derives every judgment's `source` with it; `synthesize` writes its sources with it."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

NO_RULE = None  # a row no pool rule admits: a rank beyond the cut-offs and not clicked


def within(ranks: pa.Array | pa.ChunkedArray, top: int) -> pa.Array | pa.ChunkedArray:
    """rank in 1..top (false for a missing rank)."""
    return pc.and_(pc.greater_equal(ranks, 1), pc.less_equal(ranks, top)).fill_null(False)


def admitted_by(bm25_rank, rerank_rank, clicked, pool) -> pa.Array | pa.ChunkedArray:
    """`bm25`, `rerank` or `clicked` per row, as `pool.select` assigns them; null where no rule admits it."""
    by_click = pc.and_(clicked.fill_null(False), pa.scalar(bool(pool.include_clicked)))
    nothing = pa.scalar(NO_RULE, pa.string())
    return pc.if_else(
        within(bm25_rank, pool.bm25_top),
        "bm25",
        pc.if_else(within(rerank_rank, pool.rerank_top), "rerank", pc.if_else(by_click, "clicked", nothing)),
    )
