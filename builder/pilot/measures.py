"""What a pilot measures once both settings have judged its sample: their agreement (builder/analysis/agreement.py,
with A as the reference) and each setting's paper-scale bill from `plan` (generation/planning/). The verdict on
them is builder/pilot/verdict.py.

Agreement is over the pairs both settings graded (a level, not unparsed or failed); the coverage says how many
each left without one. The 95% intervals resample whole questions, as the sample drew them."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from scipy import stats as sps

from builder.analysis.agreement import Joined, compare, correlation, group_members, threshold_precision_recall
from builder.pilot.contract import PilotAgreement, PilotBill, PilotSaving
from builder.pilot.record import finite
from generation.pilot.judge_stage import PILOT_JUDGMENTS
from generation.pilot.settings import Setting
from generation.storage.shards import stage_files

COLUMNS = ["subq_id", "qid", "docid", "level", "expected", "probs", "status"]


def read_setting(folder, config_hash: str) -> pa.Table:
    """One setting's judged sample (every shard complete and as recorded), sorted by pair."""
    table = ds.dataset(stage_files(folder, PILOT_JUDGMENTS, config_hash), format="parquet").to_table(columns=COLUMNS)
    return table.sort_by([("subq_id", "ascending"), ("docid", "ascending")])


def statuses(table: pa.Table) -> dict:
    """How many of a setting's pairs got a level, and why the others did not."""
    counts = {s["values"]: s["counts"] for s in pc.value_counts(table["status"]).to_pylist()}
    return {"pairs": table.num_rows, "graded": table.num_rows - table["level"].null_count, "statuses": counts}


def joined_levels(a: pa.Table, b: pa.Table) -> tuple[Joined, np.ndarray, dict[str, np.ndarray]]:
    """The pairs both graded: their levels (a Joined), their questions, and each side's expected level (the
    distribution's expected value where a setting has one, else its level)."""
    levels = [c for c in COLUMNS if c != "probs"]  # Arrow joins no list column; the stability reads the probs
    merged = a.select(levels).join(b.select(levels), keys=["subq_id", "docid"], join_type="inner", left_suffix="_a",
                                   right_suffix="_b")  # fmt: skip
    both = merged.filter(pc.and_(pc.is_valid(merged["level_a"]), pc.is_valid(merged["level_b"])))
    both = both.sort_by([("subq_id", "ascending"), ("docid", "ascending")])
    graded_a, graded_b = a.num_rows - a["level"].null_count, b.num_rows - b["level"].null_count
    joined = Joined(
        np.asarray(both["level_a"].to_numpy(), dtype=np.int64),
        np.asarray(both["level_b"].to_numpy(), dtype=np.int64),
        graded_a - both.num_rows,
        graded_b - both.num_rows,
        np.asarray(both["subq_id"].to_pylist(), dtype=object),
        np.asarray(both["docid"].to_pylist(), dtype=object),
    )
    expected = {
        side: np.asarray(
            pc.coalesce(both[f"expected_{side}"], pc.cast(both[f"level_{side}"], pa.float32())).to_numpy(),
            dtype=np.float64,
        )
        for side in ("a", "b")
    }
    return joined, np.asarray(both["qid_a"].to_pylist(), dtype=object), expected


def expected_source(table: pa.Table) -> str:
    """What a setting's `expected` is: the distribution's expected value, or (generate mode, stand-in) its level."""
    return "expected value" if table["expected"].null_count < table.num_rows else "level (no distribution)"


INTERVAL = "95% percentile bootstrap over whole questions"  # how the record's intervals were made


def agreement_figures(
    joined: Joined, levels: list[int], answer_level: int, resamples: int = 0, seed: int = 0, questions=None
) -> dict:
    """`agreement.compare` of A (rows) and B (columns) on `levels`, and B's precision and recall of A's positives
    (level >= answer_level): the figures the pairs' two levels determine, with 95% intervals over whole questions
    when `resamples` (figures.py derives them again from a record's confusion table, with none)."""
    figures = compare(joined, levels, resamples, seed, groups=questions)
    figures["answer"] = threshold_precision_recall(joined.b, joined.a, answer_level)
    if len(joined.a) and resamples:
        figures["answer"]["confidence_95"] = answer_intervals(joined, questions, answer_level, resamples, seed)
    return figures


def measure_agreement(
    a: pa.Table, b: pa.Table, max_level: int, answer_level: int, resamples: int, seed: int, weights: str
) -> PilotAgreement:
    """The pilot's agreement of A (rows) and B (columns) on the scale 0..max_level, intervals over questions
    (`agreement_figures`); each setting's statuses, the Spearman of the expected level, and how it was measured
    (`weights`: the kappa the verdict reads). An undefined figure is None."""
    joined, questions, expected = joined_levels(a, b)
    figures = agreement_figures(joined, list(range(max_level + 1)), answer_level, resamples, seed, questions)
    measured = {
        **figures,
        "settings": {"A": statuses(a), "B": statuses(b)},
        "expected_spearman": {
            "value": correlation(sps.spearmanr, expected["a"], expected["b"]),
            "a": expected_source(a),
            "b": expected_source(b),
        },
        "questions": len(set(questions.tolist())),
        "weights": weights,
        "answer_level": answer_level,
        "resamples": resamples,
        "interval": INTERVAL,
    }
    return PilotAgreement.model_validate(finite(measured), strict=True)


def answer_intervals(joined: Joined, questions: np.ndarray, answer_level: int, resamples: int, seed: int) -> dict:
    """95% percentile intervals of B's precision and recall of A's positives, resampling whole questions as
    `agreement.bootstrap` does (a resample where one is undefined is left out of its interval)."""
    rng = np.random.default_rng(seed)
    members = list(group_members(questions))
    samples: dict[str, list[float]] = {"precision": [], "recall": []}
    for _ in range(resamples):
        pick = np.concatenate([members[i] for i in rng.integers(0, len(members), len(members))])
        found = threshold_precision_recall(joined.b[pick], joined.a[pick], answer_level)
        for name, values in samples.items():
            values.append(float("nan") if found[name] is None else found[name])
    with warnings.catch_warnings():  # undefined in every resample: no interval (NaN, null in the record)
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            name: [float(np.nanpercentile(v, 2.5)), float(np.nanpercentile(v, 97.5))] for name, v in samples.items()
        }


def paper_bill(setting: Setting, subquestions, candidates, index, sample: int = 200) -> PilotBill:
    """`plan`'s paper-scale judge rows for this setting's profile at its precision (GPU-hours, and with the prefix
    cached), and plan's notes; no row where plan prices none (a stand-in judge, a backend without a calibration)."""
    from generation.judging.calibration import CalibrationError
    from generation.planning.cost_report import plan_json
    from generation.planning.costing import costing_for
    from generation.planning.plan import measure

    profile = setting.profile
    try:
        costing, stand_ins = costing_for(profile)
    except CalibrationError as e:
        return PilotBill(precision=setting.precision, rows=[], headline=None, notes=[str(e)])
    planned = plan_json(measure(profile, subquestions, candidates, index, sample), costing, profile, 0)
    rows = [
        {k: row[k] for k in ("label", "prompt", "items", "tokens", "share", "source", "hours", "cached_hours")}
        for row in planned["rows"]
        if row["stage"] == "judge"
        and row["label"].startswith("paper")
        and row["precision"] == setting.precision
        and row.get("prompt", profile.judge.prompt) == profile.judge.prompt  # its own prompt's rows, not the twin's
    ]
    headline = next((r for r in rows if r["label"] == HEADLINE_ROW), rows[0] if rows else None)
    notes = list(stand_ins)
    if not rows:
        why = [n for n in planned["notes"] if n.startswith("paper") and setting.precision in n]
        notes.append(
            f"plan prices no paper-scale {setting.precision} judge row for {setting.describe()}"
            + (f" ({why[0]})" if why else "")
        )
    bill = {
        "precision": setting.precision,
        "judge_shape": planned["judge"],
        "device": planned["device"],
        "tokenizer": planned["tokenizer"],
        "rows": rows,
        "headline": headline,
        "notes": notes,
    }
    return PilotBill.model_validate(finite(bill), strict=True)


HEADLINE_ROW = "paper, assumed"  # every document at the profile's cut: the plan's paper-scale row
HEADLINE_COLUMN = "cached_hours"  # the backends cache prompt prefixes (vLLM's prefix caching, transformers' pass)


def saving(bill_a: PilotBill, bill_b: PilotBill) -> PilotSaving | None:
    """A's headline GPU-hours less B's, and the share of A's that is; None when either has no figure."""
    if bill_a.headline is None or bill_b.headline is None:
        return None
    hours_a, hours_b = getattr(bill_a.headline, HEADLINE_COLUMN), getattr(bill_b.headline, HEADLINE_COLUMN)
    return PilotSaving(
        row=HEADLINE_ROW,
        column=HEADLINE_COLUMN,
        a=hours_a,
        b=hours_b,
        saved=hours_a - hours_b,
        share=(hours_a - hours_b) / hours_a if hours_a else None,
    )
