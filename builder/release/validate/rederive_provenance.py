"""The re-derivation (rederive.py) of a judgment's pool provenance: `source` is what the profile's pool rule admits
first given `bm25_rank`, `rerank_rank` and `clicked` (generation/stages/pool.py `admitted_by`, the rule the pool
stage selects with); a rank outside 1..the profile's depth, or a row no rule admits, is an error. An imported label
carries no provenance (ranks and source null)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from builder.release.validate.rederive_findings import as_numpy
from generation.stages.pool import admitted_by


def check_provenance(findings, profile, imported: bool, table: pa.Table, offset: int) -> None:
    add, bm25, rerank, pool = findings.add, profile.bm25, profile.rerank, profile.pool
    if imported:
        made = (
            as_numpy(pc.is_valid(table["bm25_rank"]), False)
            | as_numpy(pc.is_valid(table["rerank_rank"]), False)
            | as_numpy(pc.is_valid(table["source"]), False)
        )
        add(
            "provenance",
            "pool provenance on an imported label (the kit made no pool: ranks and source are null)",
            made,
            table,
            offset,
        )
        return
    for column, depth, section in (("bm25_rank", bm25.depth, "bm25"), ("rerank_rank", rerank.depth, "rerank")):
        ranks = as_numpy(table[column].cast(pa.int64()), 1)
        add(
            "provenance",
            f"{column} outside 1..{section}.depth {depth}",
            (ranks < 1) | (ranks > depth),
            table,
            offset,
            lambda r, ranks=ranks, column=column: f"{column} {ranks[r]}",
        )
    derived = admitted_by(table["bm25_rank"], table["rerank_rank"], table["clicked"], pool)
    nothing = as_numpy(pc.is_null(derived), True)
    add(
        "provenance",
        f"no pool rule admits it (BM25 rank > {pool.bm25_top}, rerank rank > {pool.rerank_top}"
        f"{', not clicked' if pool.include_clicked else ''})",
        nothing,
        table,
        offset,
        lambda r: (
            f"bm25_rank {table['bm25_rank'][r]}, rerank_rank {table['rerank_rank'][r]}, clicked {table['clicked'][r]}"
        ),
    )
    differs = ~nothing & ~as_numpy(pc.equal(table["source"], derived), False)
    add(
        "provenance",
        "source is not what the pool rule admits first",
        differs,
        table,
        offset,
        lambda r: f"source {table['source'][r]}, the rule gives {derived[r]}",
    )
