"""A pilot record's figures, derived again from its own confusion table, so that a record whose figures were edited
(or made by another kit) is refused by `build-release --pilot` and `validate` (`record_problems`).

The table (A's level by row, B's by column, over the pairs both graded) holds every pair's two levels, so it
determines each point figure of the agreement: the kappas, Krippendorff's alpha, Spearman and Kendall, exact and
within-one agreement, the per-level and binary figures, and B's precision and recall of A's positives, which the
verdict reads. Here the table is expanded into its pairs and measured by the function the pilot measured with
(measures.py `agreement_figures`), into the same typed agreement (contract.py `PilotAgreement`), and a stated figure
that differs beyond float rounding is named. Then the verdict is given again on the record's figures (verdict.py
`verdict_problems`).

The bootstrap intervals resample whole questions, which the table does not hold: they are not derived again. A
verdict with basis "lower end" reads them as the record states them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from builder.analysis.agreement import Joined
from builder.pilot.contract import PilotAgreement, PilotRecord
from builder.pilot.measures import agreement_figures
from builder.pilot.record import finite
from builder.pilot.verdict import verdict_problems

ROUNDING = {"rel_tol": 1e-9, "abs_tol": 1e-12}  # the same figure summed in another order differs by this at most


def table_pairs(table: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The pairs a confusion table counts, as two arrays of level positions (A's, B's), row by row."""
    counts = np.asarray(table, dtype=np.int64)
    rows, columns = np.indices(counts.shape)
    return np.repeat(rows.ravel(), counts.ravel()), np.repeat(columns.ravel(), counts.ravel())


def derived_figures(record: PilotRecord) -> PilotAgreement:
    """The record's agreement as its confusion table gives it: each figure the table determines derived again (the
    coverage, measures, per-level, binary and answer figures; undefined is None), the rest (the intervals, the
    settings' statuses, the expected Spearman) as the record states it."""
    agreement = record.agreement
    levels = agreement.confusion.levels
    a, b = (np.asarray(levels, np.int64)[side] for side in table_pairs(agreement.confusion.rows_a_columns_b))
    none: np.ndarray = np.zeros(0, dtype=object)
    joined = Joined(a, b, agreement.coverage.only_a, agreement.coverage.only_b, none, none)
    derived = agreement_figures(joined, levels, agreement.answer.threshold)  # no resample: the intervals as stated
    return PilotAgreement.model_validate(finite({**agreement.model_dump(), **derived}), strict=True)


def table_problems(record: PilotRecord) -> list[str]:
    """What makes the confusion table no table of the pilot's scale: its levels, its shape, a negative count."""
    agreement = record.agreement
    levels, table = agreement.confusion.levels, agreement.confusion.rows_a_columns_b
    scale = list(range(record.settings["A"].scale[1] + 1))
    if levels != scale or agreement.levels != scale:
        return [f"the confusion table's levels {levels} (the agreement's {agreement.levels}) are not A's scale {scale}"]
    if len(table) != len(levels) or any(len(row) != len(levels) for row in table):
        return [f"the confusion table is not {len(levels)} x {len(levels)} (its levels {levels})"]
    if any(n < 0 for row in table for n in row):
        return ["the confusion table holds a negative count"]
    return []


def rule_problems(record: PilotRecord) -> list[str]:
    """The verdict's rule reads the kappa of the record's weights at the record's answer level."""
    agreement, rule = record.agreement, record.verdict.rule
    problems = []
    if rule.measure != f"kappa_{agreement.weights}":
        problems.append(f"the verdict reads {rule.measure}, the agreement's weights are {agreement.weights}")
    if not rule.answer_level == agreement.answer_level == agreement.answer.threshold:
        problems.append(
            f"the verdict's answer level {rule.answer_level}, the agreement's {agreement.answer_level} and its "
            f"answer threshold {agreement.answer.threshold} differ"
        )
    return problems


def differences(stated: Any, derived: Any, where: str) -> list[str]:
    """Each figure under `where` that the table does not give, by key path."""
    if isinstance(derived, dict):
        if not isinstance(stated, dict) or set(stated) != set(derived):
            keys = sorted(stated) if isinstance(stated, dict) else stated
            return [f"{where} holds {keys}; the confusion table gives {sorted(derived)}"]
        return [line for key in derived for line in differences(stated[key], derived[key], f"{where}.{key}")]
    if isinstance(derived, list):
        if not isinstance(stated, list) or len(stated) != len(derived):
            return [f"{where} is {stated}; the confusion table gives {derived}"]
        return [line for i, (s, d) in enumerate(zip(stated, derived)) for line in differences(s, d, f"{where}.{i}")]
    same = (
        stated is None and derived is None
        if stated is None or derived is None
        else math.isclose(stated, derived, **ROUNDING)
        if isinstance(derived, float)
        else stated == derived
    )
    return [] if same else [f"{where} is {stated}; the confusion table gives {derived}"]


def figure_problems(record: PilotRecord) -> list[str]:
    """Every figure of the record's agreement that its confusion table does not give, the verdict's rule against the
    agreement, and the verdict against its rule (empty when the record holds together)."""
    problems = table_problems(record) + rule_problems(record)
    if problems:
        return problems
    no_interval = {"answer": {"confidence_95"}}  # the table gives no interval (the module's docstring says why)
    stated = record.agreement.model_dump(exclude=no_interval)
    derived = derived_figures(record).model_dump(exclude=no_interval)
    for key in ("coverage", "measures", "per_level", "binary", "answer"):
        problems += differences(stated[key], derived[key], f"agreement.{key}")
    return problems + verdict_problems(record.agreement, record.verdict)
