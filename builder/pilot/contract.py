"""The pilot record's typed contract: exactly what `researchy-subq pilot` writes to `OUT/pilot.json` (run.py
`pilot_record`) and what `build-release --pilot` puts in the manifest (`PilotEntry`, the contract's
`Manifest.pilot`). `read_pilot_record` reads a record through it, so a record with a key missing, added or of
another type is refused naming the key; the release's readers (the card's pilot section, `validate`) read
attributes.

Every model forbids keys it does not name. A record is written with sorted keys and read back whole:
`model_dump()` of a parsed record is the record (tests/test_pilot_release.py checks it on a release). Figures a
computation may give as an integer or a float are `Number`, so neither is rewritten as the other. Undefined figures
(an undefined correlation, a precision with no positive predicted) are null."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from generation.profiles import Profile

Number = int | float  # kept as given: an int stays an int, a float a float
Interval = list[float | None]  # a 95% interval [low, high]; null where no resample defined it
Label = Literal["A", "B"]


class PilotContract(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PilotPrompt(PilotContract):
    id: str = Field(description="the prompt's id in generation/judging/prompts.py")
    sha256: str = Field(description="sha256 of the prompt's template")
    source: str
    document_first: bool


class PilotSetting(PilotContract):
    """One setting (record.py `setting_record`)."""

    given: str = Field(description="the profile as given: a bundled name, or a file's name (never a local path)")
    overrides: list[str] = Field(description="the SECTION.KEY=VALUE overrides applied to it")
    profile: Profile = Field(description="the whole profile the setting judged with (a server's address withheld)")
    profile_hash: str
    judge_config_hash: str = Field(description="the judge stage's config hash under this profile")
    judge: str = Field(description="the judge, as the judgment records name it")
    prompt: PilotPrompt
    scale: list[int] = Field(description="[0, top level]")
    precision: str = Field(description="what `plan` prices it at: bf16 or fp8")


class PilotSampleTaken(PilotContract):
    questions: int
    pairs: int
    pairs_per_question: dict[Literal["min", "max"], int]


class PilotSample(PilotContract):
    """How the sample was drawn (generation/pilot/sample.py `draw`), and its file."""

    rule: str
    seed: int
    asked: dict[Literal["questions", "pairs"], int]
    taken: PilotSampleTaken
    population: dict[Literal["questions", "pairs"], int]
    inputs: dict[Literal["subquestions_sha256", "candidates_sha256"], str | list[str]]
    file: str
    sha256: str


class PilotAnswer(PilotContract):
    """B's precision and recall of A's positives (agreement.py `threshold_precision_recall`)."""

    threshold: int = Field(description="a positive: level >= this")
    precision: float | None
    recall: float | None
    predicted: int = Field(description="B's positives")
    reference: int = Field(description="A's positives")
    both: int
    confidence_95: dict[Literal["precision", "recall"], Interval] | None = Field(
        default=None, exclude_if=lambda value: value is None, description="absent with no resample or no pair"
    )


class PilotExpectedSpearman(PilotContract):
    value: float | None
    a: str = Field(description="what A's expected level is: the distribution's expected value or the level")
    b: str


class PilotStatuses(PilotContract):
    pairs: int
    graded: int
    statuses: dict[str, int]


class PilotPerLevel(PilotContract):
    precision: float | None
    recall: float | None
    support: int


class PilotBinary(PilotContract):
    agreement: float | None
    kappa: float | None


class PilotConfusion(PilotContract):
    levels: list[int]
    rows_a_columns_b: list[list[int]] = Field(description="pairs both graded: A's level (rows) by B's (columns)")


class PilotCoverage(PilotContract):
    both: int
    only_a: int
    only_b: int


class PilotAgreement(PilotContract):
    """`agreement.compare` of A and B over the pairs both graded, and the pilot's own figures
    (measures.py `measure_agreement`)."""

    levels: list[int]
    coverage: PilotCoverage
    measures: dict[str, float | None]
    confusion: PilotConfusion
    per_level: dict[str, PilotPerLevel]
    binary: dict[str, PilotBinary]
    confidence_95: dict[str, Interval] | None = Field(
        default=None, exclude_if=lambda value: value is None, description="absent with no resample or no pair"
    )
    settings: dict[Label, PilotStatuses]
    expected_spearman: PilotExpectedSpearman
    answer: PilotAnswer
    questions: int
    weights: str
    answer_level: int
    resamples: int
    interval: str


class PilotStability(PilotContract):
    """Level flips and the largest |dP(level)| (stability.py `label_stability`)."""

    pairs: int
    level_flips: int
    with_distribution: int
    max_abs_dp: float | None
    worst: dict[Literal["subq_id", "docid"], str] | None


class PilotPlanRow(PilotContract):
    """A paper-scale judge row of `plan` (measures.py `paper_bill`)."""

    label: str
    prompt: str
    items: int
    tokens: Number
    share: Number
    source: str
    hours: Number
    cached_hours: Number


class PilotBill(PilotContract):
    """A setting's paper-scale bill; `judge_shape`, `device` and `tokenizer` are absent when `plan` had no
    calibration for it."""

    precision: str
    judge_shape: str | None = Field(default=None, exclude_if=lambda value: value is None)
    device: str | None = Field(default=None, exclude_if=lambda value: value is None)
    tokenizer: str | None = Field(default=None, exclude_if=lambda value: value is None)
    rows: list[PilotPlanRow]
    headline: PilotPlanRow | None
    notes: list[str]


class PilotSaving(PilotContract):
    row: str
    column: str
    a: Number
    b: Number
    saved: Number
    share: Number | None


class PilotGpuHours(PilotContract):
    A: PilotBill
    B: PilotBill
    saved: PilotSaving | None


class PilotVerdictRule(PilotContract):
    """verdict.py `VerdictRule`, as the record holds it."""

    measure: str
    threshold: Number
    min_recall: Number
    min_precision: Number
    answer_level: int
    basis: str


class PilotVerdict(PilotContract):
    """verdict.py `decide`."""

    decision: str
    passed: bool
    measure: str
    value: float | None
    interval: Interval
    threshold: Number
    reasons: list[str]
    rule: PilotVerdictRule
    rule_text: str
    line: str


class PilotRecord(PilotContract):
    """`OUT/pilot.json`, schema_version 1."""

    record: Literal["researchy-subq pilot"]
    schema_version: Literal[1]
    code_version: str
    settings: dict[Label, PilotSetting]
    differences: list[str] = Field(description="the judge keys B sets otherwise than A, as `judge.KEY: A -> B`")
    sample: PilotSample
    agreement: PilotAgreement
    stability: PilotStability | None = Field(
        default=None, exclude_if=lambda value: value is None, description="absent from records made before it"
    )
    gpu_hours: PilotGpuHours
    verdict: PilotVerdict
    notes: list[str]

    @field_validator("settings")
    @classmethod
    def both_settings(cls, settings: dict[str, PilotSetting]) -> dict[str, PilotSetting]:
        if set(settings) != {"A", "B"}:
            raise ValueError(f"settings A and B, not {sorted(settings)}")
        return settings


class PilotEntry(PilotContract):
    """The manifest's `pilot`: the record, and which of its settings made the release's labels."""

    labels: Label
    record: PilotRecord
