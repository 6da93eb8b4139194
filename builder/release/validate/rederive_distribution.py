"""The re-derivation (rederive.py) of a distribution-mode judgment: `probs` has one probability per level of the
scale, each in [0, 1], summing to 1 within TOLERANCE; `level` is their argmax as stored, the lowest level on a tie
(as generation/judging/judges.py `distribution` picks it); `expected` is sum p x level; `raw` is the level's digit."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.validate.rederive_findings import as_numpy

TOLERANCE = 1e-4  # |sum(probs) - 1| and |expected - sum p x level|: float32 storage is ~1e-7 off


def check_distribution(findings, max_level: int, table: pa.Table, offset: int, level, ok, underivable) -> None:
    """`level`, `ok` and `underivable` per row as rederive.Rederivation.add computes them."""
    add, levels = findings.add, max_level + 1
    add(
        "distribution",
        "a status other than ok or engine_error (distribution mode never leaves a level unset)",
        ~ok & ~underivable,
        table,
        offset,
        lambda r: f"status {table['status'][r]}",
    )
    lengths = as_numpy(pc.list_value_length(table["probs"]), -1)
    add(
        "distribution",
        f"probs missing or not {levels} values",
        ok & (lengths != levels),
        table,
        offset,
        lambda r: f"{lengths[r]} values",
    )
    rows = np.flatnonzero(ok & (lengths == levels))
    if not len(rows):
        return
    part = table.take(pa.array(rows))
    probs = np.asarray(pc.list_flatten(part["probs"]).to_numpy(zero_copy_only=False), np.float64)
    probs = probs.reshape(len(rows), levels)
    finite = np.isfinite(probs).all(axis=1) & (probs >= 0).all(axis=1) & (probs <= 1).all(axis=1)
    total = np.where(finite, probs.sum(axis=1), np.nan)
    expected = as_numpy(part["expected"].cast(pa.float64()), math.nan)
    mean = (probs * np.arange(levels)).sum(axis=1)
    argmax = np.argmax(np.where(np.isnan(probs), -np.inf, probs.astype(np.float32)), axis=1)

    def spread(mask):
        out = np.zeros(table.num_rows, bool)
        out[rows[mask]] = True
        return out

    add("distribution", "probs not each in [0, 1]", spread(~finite), table, offset)
    add(
        "distribution",
        f"probs do not sum to 1 (within {TOLERANCE:g})",
        spread(finite & ~(np.abs(total - 1) <= TOLERANCE)),
        table,
        offset,
        lambda r: f"sum {probs[np.searchsorted(rows, r)].sum():.6f}",
    )
    add(
        "distribution",
        "level is not the argmax of probs (the lowest level on a tie)",
        spread(finite & (argmax != level[rows])),
        table,
        offset,
        lambda r: f"level {level[r]}, argmax {argmax[np.searchsorted(rows, r)]}",
    )
    add(
        "distribution",
        f"expected is not sum p x level (within {TOLERANCE:g})",
        spread(finite & ~(np.abs(expected - mean) <= TOLERANCE)),
        table,
        offset,
        lambda r: (
            f"expected {expected[np.searchsorted(rows, r)]:.4f}, sum p x level {mean[np.searchsorted(rows, r)]:.4f}"
        ),
    )
    digit = pc.equal(part["raw"], pc.cast(part["level"], pa.string())).fill_null(False).to_numpy(zero_copy_only=False)
    add(
        "distribution",
        "raw is not the level's digit",
        spread(~digit),
        table,
        offset,
        lambda r: f"raw {table['raw'][r]}, level {level[r]}",
    )
