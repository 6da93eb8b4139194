"""The stage commands of `researchy-subq`, made from the stage registry (generation/stages/): `retrieve`, `rerank`,
`pool` and `judge` get their options (--profile, the folders they read, --out, --shard/--num-shards) from the
stage's declaration, once; `questions`, `corpus` and `index` keep their own shapes (raw inputs, no profile or no
shards); the judge's own options are builder/cli/judge.py's. `stages` prints the pipeline's table and `slurm` writes
the sbatch array of any sharded stage."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

from builder.cli.import_labels import import_labels_command
from builder.cli.judge import JudgeOptions, make_judge_stage
from builder.cli.reports import JSON_HELP, emit_json, stage_report
from builder.cli.support import (
    NUM_SHARDS,
    PROFILE,
    SHARD,
    check_folder_arg,
    check_writable_file,
    fail,
    guard_commands,
    new_app,
    notice,
    option_parameters,
    output_option,
    positive,
    profile_of,
    run_stage,
    say,
    shard_of,
    warn_stand_in,
)
from builder.command_options import option
from generation.errors import InputError
from generation.profiles import bundled_profiles, load_profile
from generation.progress import results
from generation.shards import ShardError
from generation.stages import PIPELINE, REGISTRY, Stage, StageSummary, pipeline_table
from generation.stages.corpus import CorpusStage, write_url_map
from generation.stages.index import IndexStage
from generation.stages.questions import Decomposition, QuestionsStage
from generation.storage import write_text_atomic

app = new_app(
    "Stage commands: questions, corpus, index, retrieve, rerank, pool, judge, import-labels, plan, profiles, "
    "stages, slurm."
)


def report_skipped(summary: StageSummary) -> None:
    if summary.skipped:
        notice("shard already complete under this config: skipped (delete its _done record to redo it)")


def execute(stage: Stage, shard, label: str | None = None) -> StageSummary:
    """A stage's run on one shard with a progress bar, and the skipped-shard notice."""
    summary = run_stage(
        label or f"{stage.name} shard {shard.label}", stage.unit, lambda advance: stage.run(shard, progress=advance)
    )
    report_skipped(summary)
    return summary


@app.command()
def questions(
    input: list[Path] = typer.Option(
        ..., "--input", help="Researchy records: .jsonl, .jsonl.gz or .parquet (repeatable)"
    ),
    out: Path = output_option(..., "--out", help="folder for questions.parquet and subquestions.parquet"),
    split: str = typer.Option("train", help="split name stored with each question"),
    decomposition: Decomposition = typer.Option(Decomposition.subquestions, help="which sub-questions to keep"),
    rejects: Path | None = output_option(
        None, "--rejects", output="file", help="write malformed records here and go on, instead of stopping"
    ),
) -> None:
    """Read Researchy Questions records into the questions and subquestions tables."""
    for path in input:
        if not path.is_file():
            fail(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    check_writable_file(rejects, "--rejects")
    check_folder_arg(out, "--out")
    stage = QuestionsStage(None, out, input, split, decomposition, rejects)
    try:
        summary = execute(stage, shard_of(0, 1), f"reading {split} questions")
    except InputError as e:
        fail(f"{e}\n(pass --rejects FILE to set malformed records aside and go on)")
    say(stage_report(summary, None, out))
    if rejects is not None:
        say(f"{summary.rejected:,} malformed records -> {rejects}")


@app.command()
def corpus(
    input: list[Path] = typer.Option(
        ..., "--input", help="ClueWeb22 txt folders/files (*.json.gz) or JSONL (repeatable)"
    ),
    out: Path = output_option(..., "--out", help="folder for the corpus shards and the url-hash map"),
    shard: int = SHARD,
    num_shards: int = NUM_SHARDS,
    rejects: Path | None = output_option(
        None, "--rejects", output="file", help="write each rejected line here, with its reason"
    ),
) -> None:
    """Read ClueWeb22 txt records or JSONL into corpus shards and a URL-hash -> docid map."""
    check_writable_file(rejects, "--rejects")
    check_folder_arg(out, "--out")
    summary = execute(CorpusStage(None, out, input, rejects), shard_of(shard, num_shards))
    say(stage_report(summary, None, out))
    try:
        path, rows = write_url_map(out)
        say(f"url-hash map: {rows:,} entries -> {path}")
    except ShardError:
        notice("url-hash map: waiting for the other corpus shards")


@app.command()
def index(
    corpus: Path = typer.Option(..., "--corpus", help="folder of corpus shards"),
    index: Path = output_option(..., "--index", help="where the Lucene index goes"),
    threads: int = typer.Option(2, "--threads", min=1, help="Anserini indexing threads"),
    memory_mb: int = typer.Option(2048, "--memory-mb", min=256, help="Java heap for Anserini, in MB"),
    profile: str = typer.Option("paper", "--profile", help="the profile whose bm25.stemmer the index uses"),
) -> None:
    """Build the Lucene index with Anserini (the profile's bm25.stemmer, raw JSON stored)."""
    stage = IndexStage(profile_of(profile), index, corpus, threads, memory_mb)
    summary = run_stage("exporting corpus to Anserini", "docs", lambda advance: stage.run(progress=advance))
    say(stage_report(summary, None, index))


# -- the profile-driven, sharded stages: one command shape, made from each stage's declaration ---------------------
def input_option(stage_class: type[Stage], name: str):
    """The required --NAME option of an input `stage_class` reads, with the help its declaration gives."""
    given = next(i for i in stage_class.reads if i.option == name)
    return typer.Option(..., f"--{name}", help=given.help)


def stage_command(
    stage_class: type[Stage],
    options: type | None = None,
    make: Callable[..., Stage] | None = None,
    before: Callable[[object], None] | None = None,
) -> None:
    """Registers the command `stage_class.name`: --profile, a --FOLDER option per input the stage reads (its help
    from the declaration), --out, the stage's own options (those of the options record `options`,
    builder/command_options.py), --shard and --num-shards. `make` builds the stage from the parsed values, by keyword,
    when the constructor alone does not; `before` warns or checks before the run."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("profile", keyword, default=PROFILE, annotation=str)]
    params += [
        inspect.Parameter(given.option, keyword, annotation=Path, default=input_option(stage_class, given.option))
        for given in stage_class.reads
    ]
    params.append(
        inspect.Parameter(
            "out",
            keyword,
            annotation=Path,
            default=output_option(..., "--out", help=f"folder for the {stage_class.writes} shards"),
        )
    )
    params += option_parameters(options) if options is not None else []
    params += [
        inspect.Parameter("shard", keyword, annotation=int, default=SHARD),
        inspect.Parameter("num_shards", keyword, annotation=int, default=NUM_SHARDS),
    ]

    def command(**values) -> None:
        profile = profile_of(values.pop("profile"))
        shard = shard_of(values.pop("shard"), values.pop("num_shards"))
        out = values.pop("out")
        check_folder_arg(out, "--out")
        if before is not None:
            before(profile)
        stage = make(profile=profile, out=out, shard=shard, **values) if make else stage_class(profile, out, **values)
        say(stage_report(execute(stage, shard), profile, out))

    command.__signature__ = inspect.Signature(params)
    command.__doc__ = stage_class.__doc__
    command.__name__ = stage_class.name
    app.command(name=stage_class.name)(command)


def warn_rerank_stand_in(profile) -> None:
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


@app.command()
def plan(
    profile: str = PROFILE,
    subquestions: Path = input_option(REGISTRY["judge"], "subquestions"),
    candidates: Path = input_option(REGISTRY["judge"], "candidates"),
    index: Path = input_option(REGISTRY["judge"], "index"),
    sample: int = typer.Option(200, min=1, help="pairs whose prompts are tokenized"),
    tokenizer: str | None = typer.Option(None, help="tokenizer to measure with (default: the judge model's)"),
    utilisation: float | None = typer.Option(
        None, help="share of peak, in (0, 1], for every row instead of the calibration's measured figures"
    ),
    calibration: Path | None = typer.Option(
        None, help="scripts/bench_gpu.py's calibration file (default: the bundled reference, measured on an H100)"
    ),
    rerank_tokens: float = typer.Option(2800, min=1, help="reranker tokens per document assumed for the rerank rows"),
    tokens_per_word: float | None = typer.Option(
        None,
        help="judge tokens per word of web text assumed for the "
        "paper-scale row (default: 2900/2048, about 2,900 Llama-3 tokens "
        "for 2,048 words of ClueWeb22 text)",
    ),
    json_out: Path | None = output_option(
        None, "--json", output="file", help=JSON_HELP + " (`slurm --from-plan` reads the file)"
    ),
    full: bool = typer.Option(
        False, "--full", help="every row, column and note (about 300 columns wide) instead of the 100-column view"
    ),
) -> None:
    """Count pairs, measure prompt tokens and print the FLOPs and GPU-hours of judging them and of reranking: by
    default the profile's own rows first, in 100 columns, with the row to budget."""
    from generation.judging.calibration import CalibrationError
    from generation.planning.cost_report import plan_json, plan_table
    from generation.planning.costing import costing_for
    from generation.planning.plan import LLAMA3_TOKENS_PER_WORD, measure
    from generation.planning.plan_view import compact_view, header, wrapped
    from generation.planning.slurm import TIME_MARGIN_NOTE

    positive("--utilisation", utilisation, upper=1)
    check_writable_file(json_out, "--json")
    config = profile_of(profile)
    try:
        costing, stand_ins = costing_for(config, calibration, utilisation)
    except CalibrationError as e:
        fail(str(e))
    result = run_stage(
        "measuring prompts",
        "pairs",
        lambda advance: measure(
            config,
            subquestions,
            candidates,
            index,
            sample,
            tokenizer,
            tokens_per_word=tokens_per_word or LLAMA3_TOKENS_PER_WORD,
        ),
    )
    planned = {
        **plan_json(result, costing, config, config.rerank.depth, rerank_tokens),
        "inputs": {"subquestions": str(subquestions), "candidates": str(candidates), "index": str(index)},
    }
    planned["notes"] = stand_ins + planned["notes"] + [TIME_MARGIN_NOTE]
    if emit_json(planned, json_out):
        return
    if not full:
        for line in compact_view(
            result, costing, config, config.rerank.depth, rerank_tokens, stand_ins + [TIME_MARGIN_NOTE]
        ):
            say(line)
        return
    table, costing_notes = plan_table(result, costing, config.rerank.depth, rerank_tokens)
    for line in [*header(config, costing), *wrapped(planned["budget"]["line"])]:
        say(line)
    results.print(table)
    for note in result.notes() + stand_ins + costing_notes + [TIME_MARGIN_NOTE]:
        for line in wrapped(note):
            say(line)


@app.command()
def profiles(
    name: str | None = typer.Argument(None, help="a bundled profile name or a YAML path"),
    reference: bool = typer.Option(
        False, "--reference", help="print every key a profile may hold, with its type, default and meaning (Markdown)"
    ),
) -> None:
    """List the bundled profiles, or validate one and print its file as it is (`profiles paper > mine.yaml`, edit,
    then `--profile mine.yaml`)."""
    from builder.cli.reports import print_profile, print_reference

    if reference:
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


@app.command()
def slurm(
    stage: str = typer.Argument(..., help=f"a sharded stage: {', '.join(s.name for s in PIPELINE if s.sharded)}"),
    num_shards: int = typer.Option(..., "--num-shards", min=1, help="how many shards, so how many array tasks"),
    time: str | None = typer.Option(None, help="wall time per task, HH:MM:SS (or give --gpu-hours)"),
    gpu_hours: float | None = typer.Option(
        None, help="the stage's total GPU-hours (`plan` prints them): each task gets its share, plus a margin"
    ),
    from_plan: Path | None = typer.Option(
        None,
        help="judge: the GPU-hours from `plan --json FILE` for the same "
        "profile and folders, at the profile's precision",
    ),
    gpus_per_task: int = typer.Option(4, min=0, help="GPUs per array task"),
    venv: Path = typer.Option(Path(".venv"), help="the virtual environment the tasks activate"),
    write: Path | None = output_option(
        None, "--write", output="file", help="write the sbatch file here instead of printing it"
    ),
    arguments: list[str] = typer.Argument(
        None, help="the stage's own options after `--`, e.g. -- --profile paper --subquestions ... --out ..."
    ),
) -> None:
    """An sbatch array file for STAGE, one task per shard, from the same registry as the commands."""
    from generation.planning.slurm import SlurmError, sbatch_script

    try:
        if sum(x is not None for x in (time, gpu_hours, from_plan)) > 1:
            fail("give one of --time, --gpu-hours and --from-plan")
        script = sbatch_script(
            stage,
            num_shards,
            list(arguments or []),
            time=time,
            gpu_hours=gpu_hours,
            gpus_per_task=gpus_per_task,
            venv=venv,
            from_plan=from_plan,
        )
    except SlurmError as e:
        fail(str(e))
    if write is None:
        typer.echo(script, nl=False)
    else:
        write_text_atomic(write, script)
        say(f"sbatch file -> {write}; submit it with: sbatch {write}")


guard_commands(app)
