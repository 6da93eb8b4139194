"""Everything a pilot is built from, in one typed `PilotOptions`: the two settings, the stage folders it reads, the
folder it writes, the sample, the agreement and the verdict's rule. Each field is one option of `researchy-subq
pilot` (builder/cli/pilot.py makes the command's options from them, in this order: builder/command_options.py);
tests, examples and scripts build the same object."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.command_options import REQUIRED, option, refuse_out_of_bounds
from builder.pilot.verdict import WEIGHTS, VerdictRule
from generation.errors import ArgumentError
from generation.pilot.sample import SampleRequest
from generation.pilot.settings import Setting, load_setting

SET_HELP = "a key of setting {label}'s profile, SECTION.KEY=VALUE (e.g. judge.quantization=fp8); repeatable"


@dataclass(frozen=True, kw_only=True)
class PilotOptions:
    """One pilot: settings A and B (profile names or files, with SECTION.KEY=VALUE overrides), the stage folders of
    the pairs, the output folder, the sample asked for, and the verdict's rule."""

    a: str = option(REQUIRED, "--a", help="setting A, the reference: a bundled profile name or a profile file")
    a_set: list[str] = option([], "--a-set", help=SET_HELP.format(label="A"))
    b: str = option(REQUIRED, "--b", help="setting B, the candidate: a bundled profile name or a profile file")
    b_set: list[str] = option([], "--b-set", help=SET_HELP.format(label="B"))
    subquestions: Path = option(REQUIRED, "--subquestions", help="folder from `researchy-subq questions`")
    candidates: Path = option(REQUIRED, "--candidates", help="folder of candidate pool shards")
    index: Path = option(REQUIRED, "--index", help="Lucene index (document text)")
    out: Path = option(
        REQUIRED,
        "--out",
        help="folder for the sample, each setting's judgments (a/, b/) and pilot.json",
        output="folder",
    )
    pairs: int = option(2000, "--pairs", help="pairs in the sample", min=1)
    questions: int = option(100, "--questions", help="questions drawn whole; the pairs come from them", min=1)
    seed: int = option(0, "--seed", help="seed of the draw and of the bootstrap (>= 0)")
    threshold: float = option(0.8, "--threshold", help="the weighted kappa B must reach to replace A")
    weights: str = option("linear", "--weights", help="the kappa's disagreement weights: linear or quadratic")
    answer_level: int | None = option(
        None,
        "--answer-level",
        help="a positive: level >= this (precision and recall; default: A's complexity.answer_level, training's)",
    )
    min_recall: float = option(0.9, "--min-recall", help="B's recall of A's positives must reach this")
    min_precision: float = option(0.9, "--min-precision", help="B's precision on A's positives must reach this")
    require_lower_end: bool = option(
        False, "--require-lower-end", help="the verdict reads each bootstrap interval's lower end, not the estimate"
    )
    resamples: int = option(1000, "--resamples", help="bootstrap resamples (whole questions)", min=0)
    plan_sample: int = 200  # prompts `plan` tokenizes per setting (no option)

    def __post_init__(self) -> None:
        refuse_out_of_bounds(self)  # the bounds the command's options declare hold for every caller
        if self.weights not in WEIGHTS:
            raise ArgumentError(f"--weights {self.weights!r}: one of {', '.join(WEIGHTS)}")
        if self.require_lower_end and not self.resamples:
            raise ArgumentError("--require-lower-end with --resamples 0: no bootstrap interval to read")
        self.request  # noqa: B018  # the sample's bounds (SampleRequest), checked before anything is judged
        self.rule(4)  # the verdict's bounds, likewise

    @property
    def request(self) -> SampleRequest:
        return SampleRequest(self.pairs, self.questions, self.seed)

    def settings(self) -> tuple[Setting, Setting]:
        """Settings A and B, each a profile with its overrides (a ProfileError or ArgumentError names what is wrong)."""
        return load_setting("A", self.a, self.a_set), load_setting("B", self.b, self.b_set)

    def rule(self, answer_level: int) -> VerdictRule:
        return VerdictRule(
            measure=f"kappa_{self.weights}",
            threshold=self.threshold,
            min_recall=self.min_recall,
            min_precision=self.min_precision,
            answer_level=answer_level,
            basis="lower end" if self.require_lower_end else "point",
        )

    def positives_at(self, a: Setting) -> int:
        """The answer level: the option, else setting A's `complexity.answer_level` (what training calls positive)."""
        return a.profile.complexity.answer_level if self.answer_level is None else self.answer_level
