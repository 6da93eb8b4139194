"""The two judge settings a pilot compares: each a profile, or a profile with SECTION.KEY=VALUE overrides
(`generation.profiles.profile.with_overrides`), checked to be comparable before anything is judged.

Comparable means: both judge on the same scale (crux's 0-5 and umbrela's 0-2 levels are not one measure), and both
judge the same pairs (their bm25, rerank and pool sections agree, so one candidates folder serves both)."""

from __future__ import annotations

from dataclasses import dataclass

from generation.errors import ArgumentError
from generation.judging.prompts import Prompt, get_prompt
from generation.profiles.profile import Profile, load_profile, with_overrides

POOL_SECTIONS = ("bm25", "rerank", "pool")  # what makes the pairs; the judge section is what a pilot varies
COMPARED_SECTION = "judge"  # the only section --a-set/--b-set may set
STAND_IN_SCALE = 5  # the bi-encoder stand-in cuts its cosine into levels 0..5 (profile_sections: five cut points)


@dataclass(frozen=True)
class Setting:
    """One side of a pilot: `label` A or B, the profile as given and the overrides applied to it."""

    label: str
    profile: Profile
    given: str
    overrides: tuple[str, ...] = ()

    @property
    def folder(self) -> str:
        """The sub-folder of the pilot's --out its judgments go to: `a` or `b`."""
        return self.label.lower()

    @property
    def prompt(self) -> Prompt:
        return get_prompt(self.profile.judge.prompt)

    @property
    def max_level(self) -> int:
        """The top of the scale this setting's levels are on (0..max_level)."""
        return STAND_IN_SCALE if self.profile.judge.backend == "bi-encoder" else self.prompt.max_level

    @property
    def precision(self) -> str:
        """What `plan` prices it at: fp8 when the judge quantizes to fp8, else bf16 (`cost_report.plan_precision`)."""
        from generation.planning.cost_report import plan_precision

        return plan_precision(self.profile)

    def describe(self) -> str:
        """`paper`, or `paper with judge.prompt=crux-paper-document-first`."""
        return self.given + (f" with {' '.join(self.overrides)}" if self.overrides else "")

    def shares_document_prefix(self) -> str:
        """One line: whether this setting's prompts of one document share a prefix a backend can compute once."""
        judge = self.profile.judge
        if judge.backend == "bi-encoder":
            return f"setting {self.label}: the bi-encoder stand-in builds no prompt (no document prefix to share)"
        if self.prompt.document_first:
            return (
                f"setting {self.label}: prompt {self.prompt.id} puts the document first: its prompts of one document "
                "share a prefix, which the backends compute once per question and document"
            )
        return (
            f"setting {self.label}: prompt {self.prompt.id} puts the sub-question before the document, so its "
            "prompts of one document share no document prefix: each pair is judged whole, as `judge` does"
        )


def load_setting(label: str, given: str, overrides: list[str] | tuple[str, ...] = ()) -> Setting:
    """Setting `label` from a profile name or path and its overrides (a ProfileError names what is wrong). A profile
    with overrides is a profile of its own: named `NAME-pilot-a` (or -b), its description saying what was set."""
    origin = f"--{label.lower()}-set"
    for assignment in overrides:
        section = assignment.partition("=")[0].strip().split(".")[0]
        if section != COMPARED_SECTION:
            raise ArgumentError(
                f"{origin} {assignment!r}: the pilot compares judge settings only, set as judge.KEY=VALUE; it does not "
                f"apply a {section!r} key"
                + ("; the positives' level is --answer-level" if section == "complexity" else "")
            )
    profile = load_profile(given)
    if overrides:
        profile = with_overrides(profile, list(overrides), origin=origin)
        profile = profile.model_copy(
            update={
                "name": f"{profile.name}-pilot-{label.lower()}",
                "description": f"{profile.description} Pilot setting {label}: {' '.join(overrides)}.",
            }
        )
    return Setting(label, profile, given, tuple(overrides))


def judge_differences(a: Setting, b: Setting) -> list[str]:
    """The judge keys the two settings set differently, as `judge.KEY: A -> B` (empty: the same judge)."""
    left, right = a.profile.judge.model_dump(), b.profile.judge.model_dump()
    return [
        f"judge.{key}: {left.get(key)!r} -> {right.get(key)!r}"
        for key in sorted(set(left) | set(right))
        if left.get(key) != right.get(key)
    ]


def check_comparable(a: Setting, b: Setting) -> None:
    """Refuses two settings whose levels or pairs are not the same thing: another scale, another pool."""
    if a.max_level != b.max_level:
        raise ArgumentError(
            f"settings A ({a.describe()}) and B ({b.describe()}) judge on different scales: A 0-{a.max_level} "
            f"(prompt {a.prompt.id}), B 0-{b.max_level} (prompt {b.prompt.id}). Their levels are not one measure, "
            "so the pilot does not compare them; give both settings prompts of one scale (or judge each with "
            "`judge` and compare mapped levels with `agreement --map-a/--map-b`)"
        )
    pool_a, pool_b = a.profile.config_hash(*POOL_SECTIONS), b.profile.config_hash(*POOL_SECTIONS)
    if pool_a != pool_b:
        differ = [s for s in POOL_SECTIONS if a.profile.config_hash(s) != b.profile.config_hash(s)]
        raise ArgumentError(
            f"settings A ({a.describe()}) and B ({b.describe()}) differ outside the judge, in {', '.join(differ)}: "
            "a pilot judges one set of pairs under two judges; give B the profile of A with judge overrides "
            "(--b-set judge.KEY=VALUE)"
        )


# What makes each pair run alone, per engine: the transformers backend cuts its batches at judge.batch_size pairs;
# vLLM schedules a chunk's requests itself, so one sequence a step is its scheduler's max_num_seqs.
ALONE = {"transformers": "judge.batch_size=1", "vllm": "judge.engine_args={max_num_seqs: 1}"}


def check_batch_comparison(a: Setting, b: Setting) -> str | None:
    """A stability check (A and B differ in how many pairs share a forward: judge.batch_size or vLLM's
    max_num_seqs) on a backend that can run a pair alone; None when the pilot is no such check, else the note saying
    which. Refused, naming the setting, where a backend cannot isolate pairs."""
    left, right = a.profile.judge, b.profile.judge
    seqs = left.engine_args.get("max_num_seqs"), right.engine_args.get("max_num_seqs")
    changed = [
        key
        for key, differs in (
            ("judge.batch_size", left.batch_size != right.batch_size),
            ("judge.engine_args.max_num_seqs", seqs[0] != seqs[1]),
        )
        if differs
    ]
    if not changed:
        return None
    for setting in (a, b):
        judge = setting.profile.judge
        engine = judge.ray_backend if judge.backend == "ray" else judge.backend
        if engine == "openai":
            raise ArgumentError(
                f"{changed[0]}: setting {setting.label} (backend openai) cannot run a pair alone: the server batches "
                "the requests it gets with whatever else it serves. Check stability on a transformers or vllm "
                "backend, or start the server with VLLM_BATCH_INVARIANT=1"
            )
        if engine == "vllm" and changed == ["judge.batch_size"]:
            raise ArgumentError(
                f"judge.batch_size: setting {setting.label} (backend vllm) hands vLLM whole chunks, which its "
                f"scheduler batches itself; run a pair alone there with {ALONE['vllm']}"
            )
    return (
        f"A and B differ in {' and '.join(changed)}: a stability check, reported as level flips and the largest "
        "|dP(level)| between the two"
    )
