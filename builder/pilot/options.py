"""Everything a pilot is built from, in one typed `PilotOptions`: the two settings, the stage folders it reads, the
folder it writes, the sample, the agreement and the verdict's rule. Each field is one option of `researchy-subq
pilot` (builder/cli/pilot.py makes the command's options from `option_fields()`, in this order); tests, examples
and scripts build the same object."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import NamedTuple

from builder.pilot.verdict import WEIGHTS, VerdictRule
from generation.errors import ArgumentError
from generation.pilot.sample import SampleRequest
from generation.pilot.settings import Setting, load_setting

REQUIRED = ...  # an option the command requires (typer's spelling): the field has no default
SET_HELP = "a key of setting {label}'s profile, SECTION.KEY=VALUE (e.g. judge.quantization=fp8); repeatable"


class CommandOption(NamedTuple):
    """One option of the command: the field's name and type, its default (REQUIRED: none), its flag, and typer's
    settings of it (help, and bounds such as `min`)."""

    name: str
    kind: object
    default: object
    flag: str
    settings: dict


def option(default, flag: str, help: str, **bounds):
    """A `PilotOptions` field that is the command's option `flag`: its default (REQUIRED: none), its help, and the
    bounds the command checks (typer's `min`), or `output="folder"` for a folder it writes (builder/cli/support.py
    `output_option`)."""
    metadata = {"option": (default, flag, {"help": help, **bounds})}
    if default is REQUIRED:
        return field(metadata=metadata)
    if isinstance(default, list):
        return field(default_factory=list, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class PilotOptions:
    """One pilot: settings A and B (profile names or files, with SECTION.KEY=VALUE overrides), the stage folders of
    the pairs, the output folder, the sample asked for, and the verdict's rule."""

    a: str = option(REQUIRED, "--a", "setting A, the reference: a bundled profile name or a profile file")
    a_set: list[str] = option([], "--a-set", SET_HELP.format(label="A"))
    b: str = option(REQUIRED, "--b", "setting B, the candidate: a bundled profile name or a profile file")
    b_set: list[str] = option([], "--b-set", SET_HELP.format(label="B"))
    subquestions: Path = option(REQUIRED, "--subquestions", "folder from `researchy-subq questions`")
    candidates: Path = option(REQUIRED, "--candidates", "folder of candidate pool shards")
    index: Path = option(REQUIRED, "--index", "Lucene index (document text)")
    out: Path = option(
        REQUIRED, "--out", "folder for the sample, each setting's judgments (a/, b/) and pilot.json", output="folder"
    )
    pairs: int = option(2000, "--pairs", "pairs in the sample", min=1)
    questions: int = option(100, "--questions", "questions drawn whole; the pairs come from them", min=1)
    seed: int = option(0, "--seed", "seed of the draw and of the bootstrap (>= 0)")
    threshold: float = option(0.8, "--threshold", "the weighted kappa B must reach to replace A")
    weights: str = option("linear", "--weights", "the kappa's disagreement weights: linear or quadratic")
    answer_level: int | None = option(
        None,
        "--answer-level",
        "a positive: level >= this (precision and recall; default: A's complexity.answer_level, training's)",
    )
    min_recall: float = option(0.9, "--min-recall", "B's recall of A's positives must reach this")
    min_precision: float = option(0.9, "--min-precision", "B's precision on A's positives must reach this")
    require_lower_end: bool = option(
        False, "--require-lower-end", "the verdict reads each bootstrap interval's lower end, not the estimate"
    )
    resamples: int = option(1000, "--resamples", "bootstrap resamples (whole questions)", min=0)
    plan_sample: int = 200  # prompts `plan` tokenizes per setting (no option)

    def __post_init__(self) -> None:
        for f in fields(self):  # the bounds the command's options declare hold for every caller
            _, flag, settings = f.metadata.get("option", (None, None, {}))
            if "min" in settings and getattr(self, f.name) < settings["min"]:
                raise ArgumentError(f"{flag} {getattr(self, f.name)}: must be >= {settings['min']}")
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


def option_fields() -> list[CommandOption]:
    """The command's options, in `PilotOptions`' order."""
    types = typing.get_type_hints(PilotOptions)
    return [CommandOption(f.name, types[f.name], *f.metadata["option"]) for f in fields(PilotOptions) if f.metadata]
