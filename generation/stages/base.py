"""One shape for every stage, in the manner of datatrove's pipeline steps.

A `Stage` declares what it is: its `name` (the command), the stages whose output it reads (`reads`), the shard name
it writes (`writes`), the profile sections its config hash covers (`sections`), what its progress counts (`unit`)
and its summary's class (`summary_type`). It does only its own work, in `run_shard`. The template `run`
does the rest once for every stage: it refuses a folder of another config or shard count, skips a finished
shard, takes the shard's lock, checks each input against the completion records of the stage that wrote it
(rows, size, sha256 and that stage's config hash under this profile), and writes the completion record.

Work inside a shard can come in chunks (the judge's `chunk_size` pairs): such a stage hands an executor a
`ChunkedWork` (generation/executors/), which runs the pending chunks in this process, or on Ray actors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from generation.profiles.profile import Profile
from generation.storage.shards import Shard, StageOutput, skip_if_done, stage_files


@dataclass(frozen=True)
class Input:
    """A folder a stage reads: the keyword (and `--option`) naming it, what it holds, and the stages that write it."""

    option: str
    help: str
    producers: tuple[type[Stage], ...] = ()  # the stages whose output is read from this folder
    verify_sha256: bool = True  # False: rows and size only (hashing a whole corpus per shard costs more than the stage)


@dataclass(slots=True)
class StageSummary:
    """What one run of a stage on one shard did: whether the shard was already complete, and the files written. Each
    stage declares its own subclass (`summary_type`) whose fields are its counts, breakdowns and notes
    (`JudgeSummary.pairs`). Slotted, so a misspelt field is refused as it is set, not added."""

    stage: str
    shard: str
    skipped: bool = False
    outputs: list[Path] = field(default_factory=list)

    @property
    def skipped_shards(self) -> int:
        return int(self.skipped)

    def as_dict(self) -> dict[str, Any]:
        """Every field as plain values: the outputs as strings, a mapping's keys as strings."""

        def plain(value: Any) -> Any:
            return {str(k): plain(v) for k, v in value.items()} if isinstance(value, dict) else value

        values = {f.name: plain(getattr(self, f.name)) for f in fields(self)}
        return {**values, "outputs": [str(p) for p in self.outputs]}


SummaryT = TypeVar("SummaryT", bound=StageSummary)


class ChunkedWork(Protocol):
    """A shard's work cut into chunks, each written atomically by whoever runs it (executors run them)."""

    def pending(self) -> list[int]: ...

    def chunk_rows(self, k: int) -> int: ...

    def preflight(self, backend: str | None = None) -> None: ...

    def make_worker(self, backend: str | None = None) -> Any: ...

    def run_chunk(self, k: int, worker: Any) -> int: ...

    def recipe(self) -> tuple[type, dict, int, int]: ...


class Executor(Protocol):
    description: str

    def run_chunks(self, work: ChunkedWork, pending: Sequence[int], progress=None) -> int: ...


class Stage(Generic[SummaryT]):
    name: ClassVar[str]
    writes: ClassVar[str | None] = None  # shard name of the output files; None: the stage manages its own output
    produces: ClassVar[str] = (
        ""  # what it writes, for people (`researchy-subq stages`, the README, docs/reference/stages.md)
    )
    reads: ClassVar[tuple[Input, ...]] = ()
    sections: ClassVar[tuple[str, ...]] = ()  # profile sections the output's config hash covers
    unit: ClassVar[str] = "records"
    sharded: ClassVar[bool] = True
    summary_type: type[SummaryT]  # the stage's StageSummary subclass

    def __init__(self, profile: Profile | None, out: str | Path, **inputs: Any):
        self.profile, self.out = profile, Path(out)
        missing = [i.option for i in self.reads if inputs.get(i.option) is None]
        if missing:
            raise TypeError(f"stage {self.name} needs {', '.join(missing)}")
        self.inputs: dict[str, Path] = {i.option: Path(inputs.pop(i.option)) for i in self.reads}
        self.options: dict[str, Any] = inputs
        self.input_files: dict[str, list[Path]] = {}

    # -- what the registry, the lineage checks of later stages and the release read ---------------------------------
    @classmethod
    def config_hash(cls, profile: Profile | None) -> str:
        if profile is None:
            raise TypeError(
                f"stage {cls.name}'s config hash covers profile sections {cls.sections}: it needs a profile"
            )
        return profile.config_hash(*cls.sections)

    @classmethod
    def completed_files(cls, folder: Path, profile: Profile | None, verify_sha256: bool = True) -> list[Path]:
        """This stage's finished output files in `folder`, each checked against its completion record and, given a
        profile, made under that profile's sections."""
        expected = cls.config_hash(profile) if profile is not None and cls.sections else None
        return stage_files(folder, cls.shard_name(), expected, verify_sha256, cls.sections)

    # -- the template ------------------------------------------------------------------------------------------------
    def new_summary(self, shard: Shard) -> SummaryT:
        return self.summary_type(self.name, shard.label)

    def output(self) -> StageOutput:
        return StageOutput(self.out, self.shard_name(), self.config_hash(self.profile))

    @classmethod
    def shard_name(cls) -> str:
        if cls.writes is None:
            raise TypeError(f"stage {cls.name} manages its own output: it has no shard name")
        return cls.writes

    def check_inputs(self) -> None:
        """Each input folder's files, checked once against the records of the stages that wrote them."""
        for given in self.reads:
            for producer in given.producers:
                self.input_files[producer.name] = producer.completed_files(
                    self.inputs[given.option], self.profile, given.verify_sha256
                )

    def run(self, shard: Shard = Shard(), progress=None, executor: Executor | None = None) -> SummaryT:
        summary = self.new_summary(shard)
        output = self.output()
        self.prepare()
        if skip_if_done(output, shard, summary):
            return summary
        self.check_inputs()
        record = self.run_shard(shard, output, summary, progress, executor)
        output.mark_done(shard, **record)
        self.after_done(shard)
        summary.outputs.insert(0, output.path(shard))
        return summary

    def prepare(self) -> None:
        """Checks that need no lock and no input (the stage's own arguments): before anything is written."""

    def run_shard(
        self, shard: Shard, output: StageOutput, summary: SummaryT, progress, executor: Executor | None
    ) -> dict:
        """Writes `output.path(shard)` (atomically) and fills `summary`; returns the completion record's extra fields."""
        raise NotImplementedError

    def after_done(self, shard: Shard) -> None:
        """Clean-up that must wait until the completion record is written (a kill before it loses nothing)."""

    @staticmethod
    def tick(progress, n: int = 1) -> None:
        if progress is not None:
            progress(n)


class ProfiledStage(Stage[SummaryT]):
    """A stage whose work reads profile sections: it is made with a profile (the corpus, questions and index stages
    are not)."""

    profile: Profile

    def __init__(self, profile: Profile, out: str | Path, **inputs: Any):
        if profile is None:
            raise TypeError(f"stage {self.name} needs a profile")
        super().__init__(profile, out, **inputs)
