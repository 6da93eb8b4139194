"""The planning commands of `researchy-subq`: `plan` (the pairs, prompt tokens, FLOPs and GPU-hours of judging and
reranking) and `slurm` (the sbatch array of any sharded stage), each with its options record. builder/cli/stages.py
registers them among the stage commands."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from builder.cli.reports import JSON_HELP, emit_json
from builder.cli.shared_options import input_field, profile_option
from builder.cli.support import check_writable_file, fail, positive, profile_of, run_stage, say, with_options
from builder.command_options import REQUIRED, option
from generation.progress import results
from generation.stages import PIPELINE, REGISTRY
from generation.storage.atomic_files import write_text_atomic


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    """The judge's inputs `plan` measures (as `judge` takes them), what it assumes, and how it reports."""

    profile: str = profile_option()
    subquestions: Path = input_field(REGISTRY["judge"], "subquestions")
    candidates: Path = input_field(REGISTRY["judge"], "candidates")
    index: Path = input_field(REGISTRY["judge"], "index")
    sample: int = option(200, min=1, help="pairs whose prompts are tokenized")
    tokenizer: str | None = option(None, help="tokenizer to measure with (default: the judge model's)")
    utilisation: float | None = option(
        None, help="share of peak, in (0, 1], for every row instead of the calibration's measured figures"
    )
    calibration: Path | None = option(
        None, help="scripts/bench_gpu.py's calibration file (default: the bundled reference, measured on an H100)"
    )
    rerank_tokens: float = option(2800, min=1, help="reranker tokens per document assumed for the rerank rows")
    tokens_per_word: float | None = option(
        None,
        help="judge tokens per word of web text assumed for the "
        "paper-scale row (default: 2900/2048, about 2,900 Llama-3 tokens "
        "for 2,048 words of ClueWeb22 text)",
    )
    json_out: Path | None = option(
        None, "--json", output="file", help=JSON_HELP + " (`slurm --from-plan` reads the file)"
    )
    full: bool = option(
        False, "--full", help="every row, column and note (about 300 columns wide) instead of the 100-column view"
    )


@with_options
def plan(options: PlanOptions) -> None:
    """Count pairs, measure prompt tokens and print the FLOPs and GPU-hours of judging them and of reranking: by
    default the profile's own rows first, in 100 columns, with the row to budget."""
    from generation.judging.calibration import CalibrationError
    from generation.planning.cost_report import plan_json, plan_table
    from generation.planning.costing import costing_for
    from generation.planning.plan import LLAMA3_TOKENS_PER_WORD, measure
    from generation.planning.plan_view import compact_view, header, wrapped
    from generation.planning.slurm import TIME_MARGIN_NOTE

    subquestions, candidates, index = options.subquestions, options.candidates, options.index
    rerank_tokens = options.rerank_tokens
    positive("--utilisation", options.utilisation, upper=1)
    check_writable_file(options.json_out, "--json")
    config = profile_of(options.profile)
    try:
        costing, stand_ins = costing_for(config, options.calibration, options.utilisation)
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
            options.sample,
            options.tokenizer,
            tokens_per_word=options.tokens_per_word or LLAMA3_TOKENS_PER_WORD,
        ),
    )
    planned = {
        **plan_json(result, costing, config, config.rerank.depth, rerank_tokens),
        "inputs": {"subquestions": str(subquestions), "candidates": str(candidates), "index": str(index)},
    }
    planned["notes"] = stand_ins + planned["notes"] + [TIME_MARGIN_NOTE]
    if emit_json(planned, options.json_out):
        return
    if not options.full:
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


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    """The array's size, each task's time (one of three ways) and GPUs, its environment, and where the file goes."""

    num_shards: int = option(REQUIRED, "--num-shards", min=1, help="how many shards, so how many array tasks")
    time: str | None = option(None, help="wall time per task, HH:MM:SS (or give --gpu-hours)")
    gpu_hours: float | None = option(
        None, help="the stage's total GPU-hours (`plan` prints them): each task gets its share, plus a margin"
    )
    from_plan: Path | None = option(
        None,
        help="judge: the GPU-hours from `plan --json FILE` for the same "
        "profile and folders, at the profile's precision",
    )
    gpus_per_task: int = option(4, min=0, help="GPUs per array task")
    venv: Path = option(Path(".venv"), help="the virtual environment the tasks activate")
    write: Path | None = option(
        None, "--write", output="file", help="write the sbatch file here instead of printing it"
    )


@with_options
def slurm(
    stage: str = typer.Argument(..., help=f"a sharded stage: {', '.join(s.name for s in PIPELINE if s.sharded)}"),
    *,
    options: SlurmOptions,
    arguments: list[str] = typer.Argument(
        None, help="the stage's own options after `--`, e.g. -- --profile paper --subquestions ... --out ..."
    ),
) -> None:
    """An sbatch array file for STAGE, one task per shard, from the same registry as the commands."""
    from generation.planning.slurm import SlurmError, sbatch_script

    write = options.write
    try:
        if sum(x is not None for x in (options.time, options.gpu_hours, options.from_plan)) > 1:
            fail("give one of --time, --gpu-hours and --from-plan")
        script = sbatch_script(
            stage,
            options.num_shards,
            list(arguments or []),
            time=options.time,
            gpu_hours=options.gpu_hours,
            gpus_per_task=options.gpus_per_task,
            venv=options.venv,
            from_plan=options.from_plan,
        )
    except SlurmError as e:
        fail(str(e))
    if write is None:
        typer.echo(script, nl=False)
    else:
        write_text_atomic(write, script)
        say(f"sbatch file -> {write}; submit it with: sbatch {write}")
