"""The pilot's verdict: may setting B replace setting A? One rule, written into the record (`verdict.rule`), printed,
and applied again by `build-release --pilot` and `validate` to the record's own figures (`verdict_problems`).

The rule (`rule_text` says it in words):
- CANNOT DECIDE when the figures cannot carry a verdict: a setting gave fewer than two levels to the pairs both
  graded, the weighted kappa is undefined, or A names no positive (level >= the answer level) so B's recall of
  them is undefined. A judge that says one level for everything never passes: its kappa is undefined (sklearn's
  `cohen_kappa_score` returns NaN there too).
- PASS when the weighted kappa reaches the threshold, and B's recall and precision of A's positives (level >= the
  answer level: training's positives) each reach their bound; with `basis` "lower end", the bootstrap interval's
  lower end of each must, instead of the point estimate.
- FAIL otherwise; the reasons name each figure that missed its bound.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from builder.pilot.contract import Interval, PilotAgreement, PilotVerdict, PilotVerdictRule
from generation.errors import ArgumentError

PASS, FAIL, UNDECIDED = "PASS", "FAIL", "CANNOT DECIDE"
BASES = ("point", "lower end")
WEIGHTS = ("linear", "quadratic")  # the weighted kappa the verdict reads: agreement.cohen_kappa's weights


@dataclass(frozen=True)
class VerdictRule:
    measure: str = "kappa_linear"  # the weighted kappa of agreement.point_measures
    threshold: float = 0.8  # the kappa B must reach
    min_recall: float = 0.9  # B's recall of A's positives must reach this
    min_precision: float = 0.9  # B's precision on A's positives must reach this
    answer_level: int = 4  # a positive: level >= this (training's answer level)
    basis: str = "point"  # "point" estimates, or the bootstrap's "lower end"

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise ArgumentError(f"--threshold {self.threshold}: a weighted kappa in (0, 1]")
        for name, value in (("--min-recall", self.min_recall), ("--min-precision", self.min_precision)):
            if not 0 <= value <= 1:
                raise ArgumentError(f"{name} {value}: a share in [0, 1]")
        if self.basis not in BASES:
            raise ArgumentError(f"verdict basis {self.basis!r}: one of {', '.join(BASES)}")

    def text(self) -> str:
        """The rule in one sentence, as the output, the record and the card state it."""
        kappa = self.measure.removeprefix("kappa_") + "-weighted kappa"
        which = "the 95% interval's lower end of each" if self.basis == "lower end" else "each point estimate"
        return (
            f"PASS when the {kappa} >= {self.threshold:.2f}, B's recall of A's positives (level >= "
            f"{self.answer_level}) >= {self.min_recall:.2f} and B's precision on them >= {self.min_precision:.2f} "
            f"({which}); CANNOT DECIDE when a setting gives fewer than two levels, the kappa is undefined or A "
            "names no positive; else FAIL"
        )


def rule_of(verdict: PilotVerdict) -> VerdictRule:
    """The rule a record's verdict was given under (an ArgumentError for one the pilot does not apply)."""
    return VerdictRule(**verdict.rule.model_dump())


def levels_given(confusion: list[list[int]]) -> tuple[int, int]:
    """How many levels A (rows) and B (columns) gave to the pairs both graded."""
    rows = [sum(row) for row in confusion]
    columns = [sum(column) for column in zip(*confusion)] if confusion else []
    return sum(1 for n in rows if n), sum(1 for n in columns if n)


def undefined(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def figure(agreement: PilotAgreement, name: str, basis: str):
    """A figure the rule reads: the point estimate, or its bootstrap interval's lower end."""
    answer = name in ("recall", "precision")
    if basis == "point":
        return getattr(agreement.answer, name) if answer else agreement.measures[name]
    stated = (agreement.answer if answer else agreement).confidence_95 or {}
    intervals: dict[str, Interval] = {key: low_high for key, low_high in stated.items()}
    return (intervals.get(name) or [None])[0]


def decide(agreement: PilotAgreement, rule: VerdictRule) -> PilotVerdict:
    """The verdict on a pilot's agreement (builder/pilot/measures.py `measure_agreement`) under `rule`."""
    kappa_name = rule.measure.removeprefix("kappa_") + "-weighted kappa"
    level_a, level_b = levels_given(agreement.confusion.rows_a_columns_b)
    answer, both = agreement.answer, agreement.coverage.both
    undecided = []
    if both == 0:
        undecided.append("no pair graded by both settings")
    for label, count in (("A", level_a), ("B", level_b)):
        if both and count < 2:
            undecided.append(f"setting {label} gave {'one level' if count else 'no level'} to every pair")
    if undefined(agreement.measures[rule.measure]):
        undecided.append(f"the {kappa_name} is undefined")
    if not answer.reference:
        undecided.append(f"A names no positive (level >= {rule.answer_level}): B's recall of them is undefined")
    where = " (the interval's lower end)" if rule.basis == "lower end" else ""
    values = {
        "kappa": figure(agreement, rule.measure, rule.basis),
        "recall": figure(agreement, "recall", rule.basis),
        "precision": figure(agreement, "precision", rule.basis),
    }
    missed = []
    if not undecided:
        bounds = (
            ("kappa", kappa_name, rule.threshold),
            ("recall", "B's recall of A's positives", rule.min_recall),
            ("precision", "B's precision on A's positives", rule.min_precision),
        )
        for key, label, bound in bounds:
            value = values[key]
            if undefined(value):
                if key == "precision" and rule.basis == "point":
                    missed.append(f"{label} undefined (B names no positive)")
                else:
                    undecided.append(f"{label}{where} undefined")
            elif value < bound:
                missed.append(f"{label}{where} {value:.3f} < {bound:.2f}")
    decision = UNDECIDED if undecided else FAIL if missed else PASS
    reasons = undecided or missed
    figures = (
        f"{kappa_name} {fmt(agreement.measures[rule.measure])}{interval(agreement, rule.measure)}, "
        f"recall {fmt(answer.recall)}, precision {fmt(answer.precision)}"
    )
    consequence = {PASS: "B may replace A", FAIL: "B may not replace A", UNDECIDED: "no verdict; keep A"}[decision]
    line = f"{decision}: {figures}" + (f"; {'; '.join(reasons)}" if reasons else "") + f": {consequence}"
    return PilotVerdict(
        decision=decision,
        passed=decision == PASS,
        measure=rule.measure,
        value=agreement.measures[rule.measure],
        interval=list((agreement.confidence_95 or {}).get(rule.measure) or [None, None]),
        threshold=rule.threshold,
        reasons=reasons,
        rule=PilotVerdictRule(**asdict(rule)),
        rule_text=rule.text(),
        line=line,
    )


def fmt(value) -> str:
    return "undefined" if undefined(value) else f"{value:.3f}"


def interval(agreement: PilotAgreement, name: str) -> str:
    low, high = (agreement.confidence_95 or {}).get(name) or (None, None)
    return "" if undefined(low) or undefined(high) else f" [{low:.3f}, {high:.3f}]"


def verdict_problems(agreement: PilotAgreement, stated: PilotVerdict) -> list[str]:
    """Where a record's verdict (`stated`) is not the one its rule gives on the record's own `agreement` (empty when
    it is)."""
    try:
        rule = rule_of(stated)
    except ArgumentError as e:
        return [f"the verdict states no rule the pilot applies ({type(e).__name__}: {e})"]
    again = decide(agreement, rule)
    wrong = [key for key in PilotVerdict.model_fields if getattr(stated, key) != getattr(again, key)]
    if not wrong:
        return []
    return [
        f"verdict {stated.decision!r} ({', '.join(wrong)} differ), but its rule on the record's own figures "
        f"gives {again.line!r}"
    ]
