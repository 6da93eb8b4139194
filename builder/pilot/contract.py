"""The pilot record's typed contract: exactly what `researchy-subq pilot` writes to `OUT/pilot.json` (run.py
`pilot_record`) and what `build-release --pilot` puts in the manifest (`PilotEntry`, the contract's
`Manifest.pilot`). `read_pilot_record` reads a record through it, so a record with a key missing, added or of
another type is refused naming the key; the release's readers (the card's pilot section, `validate`) read
attributes.

Every model forbids keys it does not name. A record is written with sorted keys and read back whole:
`model_dump()` of a parsed record is the record (tests/builder/release/test_pilot_release.py checks it on a release). Figures a
computation may give as an integer or a float are `Number`, so neither is rewritten as the other. Undefined figures
(an undefined correlation, a precision with no positive predicted) are null."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from generation.profiles.profile import Profile

Number = int | float  # kept as given: an int stays an int, a float a float
Interval = list[float | None]  # a 95% interval [low, high]; null where no resample defined it
Label = Literal["A", "B"]


class PilotContract(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PilotPrompt(PilotContract):
    """A setting's judge prompt."""

    id: str = Field(description="the prompt's id in generation/judging/prompts.py")
    sha256: str = Field(description="sha256 of the prompt's template")
    source: str = Field(description="where the prompt's text comes from (the paper, the authors' code...)")
    document_first: bool = Field(description="the document comes before the sub-question, so its prefix is shared")


class PilotSetting(PilotContract):
    """One setting (record.py `setting_record`)."""

    given: str = Field(description="the profile as given: a bundled name, or a file's name (never a local path)")
    overrides: list[str] = Field(description="the SECTION.KEY=VALUE overrides applied to it")
    profile: Profile = Field(description="the whole profile the setting judged with (a server's address withheld)")
    profile_hash: str = Field(description="the profile's config hash")
    judge_config_hash: str = Field(description="the judge stage's config hash under this profile")
    judge: str = Field(description="the judge, as the judgment records name it")
    prompt: PilotPrompt = Field(description="the judge's prompt")
    scale: list[int] = Field(description="[0, top level]")
    precision: str = Field(description="what `plan` prices it at: bf16 or fp8")


class PilotSampleTaken(PilotContract):
    """What the draw gave."""

    questions: int = Field(description="questions drawn")
    pairs: int = Field(description="pairs drawn from them: the sample")
    pairs_per_question: dict[Literal["min", "max"], int] = Field(
        description="the fewest and the most pairs a drawn question gave"
    )


class PilotSample(PilotContract):
    """How the sample was drawn (generation/pilot/sample.py `draw`), and its file."""

    rule: str = Field(description="how the sample was drawn, in words")
    seed: int = Field(description="the draw's seed (the bootstrap's too)")
    asked: dict[Literal["questions", "pairs"], int] = Field(description="--questions and --pairs as given")
    taken: PilotSampleTaken = Field(description="what the draw gave")
    population: dict[Literal["questions", "pairs"], int] = Field(
        description="the questions with a pair to judge, and their pairs (sub-questions x candidates)"
    )
    inputs: dict[Literal["subquestions_sha256", "candidates_sha256"], str | list[str]] = Field(
        description="sha256 of the sub-questions file, and of each candidates shard (sorted), drawn from"
    )
    file: str = Field(description="the sample's file, in the pilot's --out")
    sha256: str = Field(description="sha256 of that file")


class PilotAnswer(PilotContract):
    """B's precision and recall of A's positives (agreement.py `threshold_precision_recall`)."""

    threshold: int = Field(description="a positive: level >= this")
    precision: float | None = Field(description="both / predicted; null when B names no positive")
    recall: float | None = Field(description="both / reference; null when A names no positive")
    predicted: int = Field(description="B's positives")
    reference: int = Field(description="A's positives")
    both: int = Field(description="pairs both name positive")
    confidence_95: dict[Literal["precision", "recall"], Interval] | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="precision and recall -> 95% interval [low, high]; absent with no resample or no pair",
    )


class PilotExpectedSpearman(PilotContract):
    """Spearman's rho of A's and B's expected levels, over the pairs both graded."""

    value: float | None = Field(description="the rho; null when undefined (a side constant, or under two pairs)")
    a: str = Field(description="what A's expected level is: the distribution's expected value or the level")
    b: str = Field(description="what B's expected level is, as for A")


class PilotStatuses(PilotContract):
    """What a setting made of the sample's pairs."""

    pairs: int = Field(description="the sample's pairs it judged")
    graded: int = Field(description="of them, those given a level")
    statuses: dict[str, int] = Field(description="status -> pairs (the judgments' `status` column)")


class PilotPerLevel(PilotContract):
    """One level, B's labels as the reference (agreement.py `per_level`)."""

    precision: float | None = Field(description="of the pairs A gave this level, the share B gave it; null if none")
    recall: float | None = Field(description="of the pairs B gave this level, the share A gave it; null if none")
    support: int = Field(description="pairs B gave this level")


class PilotBinary(PilotContract):
    """A's and B's labels made yes or no: is a pair's level at least the key?"""

    agreement: float | None = Field(description="the share of pairs on which they answer alike")
    kappa: float | None = Field(description="Cohen's kappa of their answers; null when undefined")


class PilotConfusion(PilotContract):
    """The confusion table, from which `figures.py` derives every figure the verdict reads."""

    levels: list[int] = Field(description="the scale's levels: the rows' and the columns' order")
    rows_a_columns_b: list[list[int]] = Field(description="pairs both graded: A's level (rows) by B's (columns)")


class PilotCoverage(PilotContract):
    """Which pairs each setting graded."""

    both: int = Field(description="pairs both graded: the measures are over these")
    only_a: int = Field(description="pairs A graded and B did not")
    only_b: int = Field(description="pairs B graded and A did not")


class PilotAgreement(PilotContract):
    """`agreement.compare` of A and B over the pairs both graded, and the pilot's own figures
    (measures.py `measure_agreement`)."""

    levels: list[int] = Field(description="the scale: 0 to A's top level")
    coverage: PilotCoverage = Field(description="which pairs each setting graded")
    measures: dict[str, float | None] = Field(
        description="measure -> value: kappa (unweighted, linear, quadratic), Krippendorff's ordinal alpha, "
        "Spearman, Kendall's tau-b, exact and within-one-level agreement; null when undefined"
    )
    confusion: PilotConfusion = Field(description="A's level by B's, over the pairs both graded")
    per_level: dict[str, PilotPerLevel] = Field(description="level -> A's precision and recall against B's labels")
    binary: dict[str, PilotBinary] = Field(description="level t (1 to the top) -> agreement on 'level >= t'")
    confidence_95: dict[str, Interval] | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="measure -> its 95% interval [low, high]; absent with no resample or no pair",
    )
    settings: dict[Label, PilotStatuses] = Field(description="A and B: the pairs judged and graded, by status")
    expected_spearman: PilotExpectedSpearman = Field(description="Spearman of the expected levels")
    answer: PilotAnswer = Field(description="B's precision and recall of A's positives: what the verdict reads")
    questions: int = Field(description="questions of the pairs both graded")
    weights: str = Field(description="the weighted kappa the verdict reads: linear or quadratic")
    answer_level: int = Field(description="a positive: level >= this")
    resamples: int = Field(description="bootstrap resamples of the intervals (0: none)")
    interval: str = Field(description="how the intervals were made")


class PilotStability(PilotContract):
    """Level flips and the largest |dP(level)| (stability.py `label_stability`)."""

    pairs: int = Field(description="pairs both settings graded")
    level_flips: int = Field(description="of them, those B gave another level than A")
    with_distribution: int = Field(description="of them, those with a distribution in both (distribution mode)")
    max_abs_dp: float | None = Field(description="the largest |dP(level)| over those; null when there are none")
    worst: dict[Literal["subq_id", "docid"], str] | None = Field(description="the pair it is on; null likewise")


class PilotPlanRow(PilotContract):
    """A paper-scale judge row of `plan` (measures.py `paper_bill`)."""

    label: str = Field(
        description="the scenario: 'paper, measured' (the sampled prompts) or 'paper, assumed' (documents at the cut)"
    )
    prompt: str = Field(description="the judge prompt it prices")
    items: int = Field(description="pairs judged: the paper's 24,316,320")
    tokens: Number = Field(description="mean prompt tokens a pair")
    share: Number = Field(description="the share of the GPU's peak FLOP/s the prefill is priced at")
    source: str = Field(description="where that share comes from")
    hours: Number = Field(description="GPU-hours: prefill and decode")
    cached_hours: Number = Field(description="GPU-hours with the shared prompt prefix cached")


class PilotBill(PilotContract):
    """A setting's paper-scale bill; `judge_shape`, `device` and `tokenizer` are absent when `plan` had no
    calibration for it."""

    precision: str = Field(description="the precision `plan` prices the judge at: bf16 or fp8")
    judge_shape: str | None = Field(
        default=None, exclude_if=lambda value: value is None, description="the judge's model shape `plan` priced"
    )
    device: str | None = Field(
        default=None, exclude_if=lambda value: value is None, description="the calibration's device"
    )
    tokenizer: str | None = Field(
        default=None, exclude_if=lambda value: value is None, description="the tokenizer that counted the prompts"
    )
    rows: list[PilotPlanRow] = Field(description="`plan`'s paper-scale judge rows of this prompt and precision")
    headline: PilotPlanRow | None = Field(
        description="the row the saving reads ('paper, assumed', else the first); null without rows"
    )
    notes: list[str] = Field(description="`plan`'s notes: stand-ins, and why no row is priced")


class PilotSaving(PilotContract):
    """What B saves on the headline row (measures.py `saving`)."""

    row: str = Field(description="the row compared: 'paper, assumed'")
    column: str = Field(description="its column: cached_hours")
    a: Number = Field(description="A's GPU-hours")
    b: Number = Field(description="B's GPU-hours")
    saved: Number = Field(description="a - b")
    share: Number | None = Field(description="saved / a; null when a is 0")


class PilotGpuHours(PilotContract):
    """Each setting's paper-scale bill from `plan`, and what B saves."""

    A: PilotBill = Field(description="setting A's bill")
    B: PilotBill = Field(description="setting B's bill")
    saved: PilotSaving | None = Field(description="null when either bill has no headline row")


class PilotVerdictRule(PilotContract):
    """verdict.py `VerdictRule`, as the record holds it."""

    measure: str = Field(description="the weighted kappa read: kappa_linear or kappa_quadratic (--weights)")
    threshold: Number = Field(description="the kappa B must reach (--threshold)")
    min_recall: Number = Field(description="B's recall of A's positives must reach this (--min-recall)")
    min_precision: Number = Field(description="B's precision on A's positives must reach this (--min-precision)")
    answer_level: int = Field(description="a positive: level >= this (--answer-level)")
    basis: str = Field(description="'point' estimates, or each interval's 'lower end' (--require-lower-end)")


class PilotVerdict(PilotContract):
    """May B replace A: the rule's verdict on the agreement (verdict.py `decide`)."""

    decision: str = Field(description="PASS, FAIL or CANNOT DECIDE")
    passed: bool = Field(description="the decision is PASS: B may replace A")
    measure: str = Field(description="the weighted kappa the rule reads")
    value: float | None = Field(description="its point estimate; null when undefined")
    interval: Interval = Field(description="its 95% interval; [null, null] without one")
    threshold: Number = Field(description="the kappa B must reach")
    reasons: list[str] = Field(description="why there is no verdict, or each figure that missed its bound")
    rule: PilotVerdictRule = Field(description="the rule the verdict was given under")
    rule_text: str = Field(description="the rule in one sentence, as printed and as the card states it")
    line: str = Field(description="the verdict as printed: the decision, the figures, the reasons")


class PilotRecord(PilotContract):
    """`OUT/pilot.json`, schema_version 1."""

    record: Literal["researchy-subq pilot"] = Field(description="what the file is")
    schema_version: Literal[1] = Field(description="the record's layout")
    code_version: str = Field(description="the kit's version that ran the pilot")
    settings: dict[Label, PilotSetting] = Field(description="A, the reference, and B, the candidate")
    differences: list[str] = Field(description="the judge keys B sets otherwise than A, as `judge.KEY: A -> B`")
    sample: PilotSample = Field(description="the sample both settings judged")
    agreement: PilotAgreement = Field(description="how B's labels agree with A's")
    stability: PilotStability | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="level flips and the largest |dP(level)|; absent from records made before it",
    )
    gpu_hours: PilotGpuHours = Field(description="each setting's paper-scale GPU-hours, and what B saves")
    verdict: PilotVerdict = Field(description="may B replace A")
    notes: list[str] = Field(description="what the pilot said about the settings")

    @field_validator("settings")
    @classmethod
    def both_settings(cls, settings: dict[str, PilotSetting]) -> dict[str, PilotSetting]:
        if set(settings) != {"A", "B"}:
            raise ValueError(f"settings A and B, not {sorted(settings)}")
        return settings


class PilotEntry(PilotContract):
    """The manifest's `pilot`: the record, and which of its settings made the release's labels."""

    labels: Label = Field(description="the setting whose judge made this release's labels")
    record: PilotRecord = Field(description="the pilot record, as `researchy-subq pilot` wrote it")
