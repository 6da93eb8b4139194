"""The stage commands of `researchy-subq`, made from the stage registry (generation/stages/): `retrieve`, `rerank`,
`pool` and `judge` get their options (--profile, the folders they read, --out, --shard/--num-shards) from the
stage's declaration, once (`stage_inputs`, `Sharding`); `questions`, `corpus` and `index` keep their own shapes (raw
inputs, no profile or no shards), each in its options record; the judge's own options are builder/cli/judge.py's.
`stages` prints the pipeline's table; `plan` and `slurm` (builder/cli/planning.py) are registered here too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, make_dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer

from builder.cli.import_labels import import_labels_command
from builder.cli.judge import JudgeOptions, make_judge_stage
from builder.cli.planning import plan, slurm
from builder.cli.reports import stage_report
from builder.cli.shared_options import Sharding, input_field, num_shards_option, profile_option, shard_option
from builder.cli.support import (
    check_folder_arg,
    check_writable_file,
    fail,
    guard_commands,
    new_app,
    notice,
    option_parameters,
    options_command,
    profile_of,
    run_stage,
    say,
    shard_of,
    warn_stand_in,
    with_options,
)
from builder.command_options import REQUIRED, option
from generation.errors import InputError
from generation.profiles.profile import Profile, bundled_profiles, load_profile
from generation.stages import REGISTRY, Stage, StageSummary, pipeline_table
from generation.stages.corpus import CorpusStage, write_url_map
from generation.stages.index import IndexStage
from generation.stages.questions import Decomposition, QuestionsStage
from generation.storage.shards import Shard, ShardError

app = new_app(
    "Stage commands: questions, corpus, index, retrieve, rerank, pool, judge, import-labels, plan, profiles, "
    "stages, slurm."
)


def report_skipped(summary: StageSummary) -> None:
    if summary.skipped:
        notice("shard already complete under this config: skipped (delete its _done record to redo it)")


Summary = TypeVar("Summary", bound=StageSummary)


def execute(stage: Stage[Summary], shard: Shard, label: str | None = None) -> Summary:
    """A stage's run on one shard with a progress bar, and the skipped-shard notice."""
    summary = run_stage(
        label or f"{stage.name} shard {shard.label}", stage.unit, lambda advance: stage.run(shard, progress=advance)
    )
    report_skipped(summary)
    return summary


@dataclass(frozen=True, kw_only=True)
class QuestionsOptions:
    """What `questions` reads and writes, and how."""

    input: list[Path] = option(
        REQUIRED, "--input", help="Researchy records: .jsonl, .jsonl.gz or .parquet (repeatable)"
    )
    out: Path = option(REQUIRED, "--out", output="folder", help="folder for questions.parquet and subquestions.parquet")
    split: str = option("train", help="split name stored with each question")
    decomposition: Decomposition = option(Decomposition.subquestions, help="which sub-questions to keep")
    rejects: Path | None = option(
        None, "--rejects", output="file", help="write malformed records here and go on, instead of stopping"
    )


@app.command()
@with_options
def questions(options: QuestionsOptions) -> None:
    """Read Researchy Questions records into the questions and subquestions tables."""
    input, out, split, rejects = options.input, options.out, options.split, options.rejects
    for path in input:
        if not path.is_file():
            fail(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    check_writable_file(rejects, "--rejects")
    check_folder_arg(out, "--out")
    stage = QuestionsStage(None, out, input, split, options.decomposition, rejects)
    try:
        summary = execute(stage, shard_of(0, 1), f"reading {split} questions")
    except InputError as e:
        fail(f"{e}\n(pass --rejects FILE to set malformed records aside and go on)")
    say(stage_report(summary, None, out))
    if rejects is not None:
        say(f"{summary.rejected:,} malformed records -> {rejects}")


@dataclass(frozen=True, kw_only=True)
class CorpusOptions:
    """What `corpus` reads and writes, and which shard of it."""

    input: list[Path] = option(
        REQUIRED, "--input", help="ClueWeb22 txt folders/files (*.json.gz) or JSONL (repeatable)"
    )
    out: Path = option(REQUIRED, "--out", output="folder", help="folder for the corpus shards and the url-hash map")
    shard: int = shard_option()
    num_shards: int = num_shards_option()
    rejects: Path | None = option(
        None, "--rejects", output="file", help="write each rejected line here, with its reason"
    )


@app.command()
@with_options
def corpus(options: CorpusOptions) -> None:
    """Read ClueWeb22 txt records or JSONL into corpus shards and a URL-hash -> docid map."""
    out, rejects = options.out, options.rejects
    check_writable_file(rejects, "--rejects")
    check_folder_arg(out, "--out")
    summary = execute(CorpusStage(None, out, options.input, rejects), shard_of(options.shard, options.num_shards))
    say(stage_report(summary, None, out))
    try:
        path, rows = write_url_map(out)
        say(f"url-hash map: {rows:,} entries -> {path}")
    except ShardError:
        notice("url-hash map: waiting for the other corpus shards")


@dataclass(frozen=True, kw_only=True)
class IndexOptions:
    """The corpus `index` reads, the index it writes, and Anserini's resources."""

    corpus: Path = option(REQUIRED, "--corpus", help="folder of corpus shards")
    index: Path = option(REQUIRED, "--index", output="folder", help="where the Lucene index goes")
    threads: int = option(2, "--threads", min=1, help="Anserini indexing threads")
    memory_mb: int = option(2048, "--memory-mb", min=256, help="Java heap for Anserini, in MB")
    profile: str = option("paper", "--profile", help="the profile whose bm25.stemmer the index uses")


@app.command()
@with_options
def index(options: IndexOptions) -> None:
    """Build the Lucene index with Anserini (the profile's bm25.stemmer, raw JSON stored)."""
    profile = profile_of(options.profile)
    stage = IndexStage(profile, options.index, options.corpus, options.threads, options.memory_mb)
    summary = run_stage("exporting corpus to Anserini", "docs", lambda advance: stage.run(progress=advance))
    say(stage_report(summary, None, options.index))


# -- the profile-driven, sharded stages: one command shape, made from each stage's declaration ---------------------
def stage_inputs(stage_class: type[Stage]) -> type:
    """The record of the options a sharded stage command takes from its stage's declaration: --profile, a --FOLDER
    per input the stage reads (its help from the declaration), and --out."""
    folders = [(given.option, Path, input_field(stage_class, given.option)) for given in stage_class.reads]
    out = option(REQUIRED, "--out", output="folder", help=f"folder for the {stage_class.writes} shards")
    fields = [("profile", str, profile_option()), *folders, ("out", Path, out)]
    return make_dataclass(f"{stage_class.__name__}Inputs", fields, frozen=True, kw_only=True)


def stage_command(
    stage_class: type[Stage],
    options: type | None = None,
    make: Callable[..., Stage] | None = None,
    before: Callable[[Profile], None] | None = None,
) -> None:
    """Registers the command `stage_class.name`, its options those of three records in turn: `stage_inputs` (--profile,
    the folders the stage reads, --out), `options` (the stage's own, builder/command_options.py) and `Sharding`.
    `make` builds the stage from the parsed values, by keyword, when the constructor alone does not (so a record whose
    other fields the command gives, as `JudgeOptions`, is built there); `before` warns or checks before the run."""
    records = (stage_inputs(stage_class), *((options,) if options is not None else ()), Sharding)
    params = [parameter for record in records for parameter in option_parameters(record)]

    def command(**values: Any) -> None:
        profile = profile_of(values.pop("profile"))
        shard = shard_of(values.pop("shard"), values.pop("num_shards"))
        out = values.pop("out")
        check_folder_arg(out, "--out")
        if before is not None:
            before(profile)
        stage = make(profile=profile, out=out, shard=shard, **values) if make else stage_class(profile, out, **values)
        say(stage_report(execute(stage, shard), profile, out))

    made = options_command(command, params, records, stage_class.name, stage_class.__doc__, __name__)
    app.command(name=stage_class.name)(made)


def warn_rerank_stand_in(profile: Profile) -> None:
    if profile.rerank.backend == "bi-encoder":
        warn_stand_in("reranker", profile.rerank.model, "MiniLM bi-encoder cosine", "Qwen3-Reranker")


@dataclass(frozen=True, kw_only=True)
class RetrieveOptions:
    """`retrieve`'s own option, which the stage takes by keyword."""

    threads: int | None = option(None, min=1, help="search threads (default: the profile's)")


stage_command(REGISTRY["retrieve"], RetrieveOptions)
stage_command(REGISTRY["rerank"], before=warn_rerank_stand_in)
stage_command(REGISTRY["pool"])
stage_command(REGISTRY["judge"], JudgeOptions, make=lambda **values: make_judge_stage(JudgeOptions(**values)))
app.command(name="import-labels")(import_labels_command(execute))
app.command()(plan)


@dataclass(frozen=True, kw_only=True)
class ProfilesOptions:
    """What `profiles` prints instead of a profile."""

    reference: bool = option(
        False, "--reference", help="print every key a profile may hold, with its type, default and meaning (Markdown)"
    )


@app.command()
@with_options
def profiles(
    name: str | None = typer.Argument(None, help="a bundled profile name or a YAML path"), *, options: ProfilesOptions
) -> None:
    """List the bundled profiles, or validate one and print its file as it is (`profiles paper > mine.yaml`, edit,
    then `--profile mine.yaml`)."""
    from builder.cli.reports import print_profile, print_reference

    if options.reference:
        return print_reference()
    if name is None:
        for bundled in bundled_profiles():
            say(f"{bundled:10} {load_profile(bundled).description}")
        return
    print_profile(name, profile_of(name))


@app.command()
def stages() -> None:
    """The pipeline's stages in order: what each reads and writes, and the profile sections its shards depend on."""
    typer.echo(pipeline_table())


app.command()(slurm)
guard_commands(app)
