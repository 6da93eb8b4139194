"""How far two settings' labels move pair by pair: level flips and the largest |dP(level)|. A pilot whose settings
differ only in how many pairs share a forward (`--b-set judge.batch_size=1` on the transformers backend,
`judge.engine_args={max_num_seqs: 1}` on vLLM: generation/pilot/settings.py check_batch_comparison) measures how
much a pair's label depends on its batch mates; every pilot reports it beside the agreement."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa

from builder.pilot.contract import PilotStability
from generation.profiles.profile import Profile


def label_stability(a: pa.Table, b: pa.Table) -> PilotStability:
    """Over the pairs both settings graded: how many changed level, and the largest absolute difference of one
    level's probability (over the pairs both gave a distribution: distribution mode), with the pair it is on."""
    columns = ["subq_id", "docid", "level", "probs"]
    right = {(r["subq_id"], r["docid"]): r for r in b.select(columns).to_pylist() if r["level"] is not None}
    pairs = flips = with_distribution = 0
    largest: float | None = None
    worst: dict[Literal["subq_id", "docid"], str] | None = None
    for row in a.select(columns).to_pylist():
        other = right.get((row["subq_id"], row["docid"]))
        if row["level"] is None or other is None:
            continue
        pairs += 1
        flips += row["level"] != other["level"]
        if row["probs"] is None or other["probs"] is None:
            continue
        with_distribution += 1
        moved = float(np.abs(np.asarray(row["probs"], np.float64) - np.asarray(other["probs"], np.float64)).max())
        if largest is None or moved > largest:
            largest, worst = moved, {"subq_id": row["subq_id"], "docid": row["docid"]}
    return PilotStability(
        pairs=pairs, level_flips=flips, with_distribution=with_distribution, max_abs_dp=largest, worst=worst
    )


def batching_only(a: Profile, b: Profile) -> bool:
    """A and B judge alike but for how many pairs share a forward (judge.batch_size, vLLM's max_num_seqs): the pilot
    is a stability check (generation/pilot/settings.py check_batch_comparison)."""

    def rest(profile: Profile) -> Profile:
        engine_args = {k: v for k, v in profile.judge.engine_args.items() if k != "max_num_seqs"}
        judge = profile.judge.model_copy(update={"batch_size": 1, "engine_args": engine_args})
        return profile.model_copy(update={"name": "", "description": "", "judge": judge})

    return a.judge != b.judge and rest(a) == rest(b)


def stability_line(stability: PilotStability, batching: bool) -> str:
    """One line: the levels that changed among the pairs both graded, and the largest |dP(level)| with its pair.
    "label stability" when A and B differ only in batching (`batching`); plain disagreement otherwise."""
    pairs, flips = stability.pairs, stability.level_flips
    share = f" ({flips / pairs:.1%})" if pairs else ""
    line = (
        f"label stability: {flips:,} level flips of {pairs:,} pairs both graded{share}; "
        if batching
        else f"disagreement: B gave another level than A to {flips:,} of {pairs:,} pairs both graded{share}; "
    )
    if stability.max_abs_dp is None or stability.worst is None:
        return line + "largest |dP(level)|: not measured (no pair with a distribution in both: generate mode)"
    worst = stability.worst
    return (
        line + f"largest |dP(level)| {stability.max_abs_dp:.3g} over {stability.with_distribution:,} pairs with "
        f"distributions (pair {worst['subq_id']} x {worst['docid']})"
    )
