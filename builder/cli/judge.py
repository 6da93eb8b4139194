"""The `judge` command's own options (after the ones every sharded stage gets from its declaration, builder/cli/
stages.py), gathered in one typed `JudgeOptions`, and `JUDGE_VARIANTS`, the one table of the stages they choose:
the full judge, `--budget` (a bandit chooses the pairs), `--limit` (a smoke test) and `--export-batch`/
`--import-batch` (OpenAI Batch files). `--backend`/`--endpoint`/`--concurrency` are no variant of their own: they
change the judge section every variant judges with (a section of its own, written beside the judgments).
builder/cli/stages.py registers the command with `JudgeOptions`' options."""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

from builder.cli.support import Policy, check_folder_arg, fail, notice, positive, say, warn_stand_in
from builder.command_options import option
from generation.profiles.profile import Profile
from generation.stages import Stage
from generation.stages.budgeted import BudgetedJudgeStage
from generation.stages.judge import JudgeStage
from generation.storage.shards import Shard


@dataclass(frozen=True, kw_only=True)
class JudgeOptions:
    """Everything a `judge` run is built from: the declaration's inputs (the stage command gives them), then the
    command's own options (builder/command_options.py)."""

    profile: Profile
    out: Path
    subquestions: Path
    candidates: Path
    index: Path
    shard: Shard
    budget: float | None = option(None, help="judge only this share (0, 1] of the pairs, chosen by --policy")
    policy: Policy = option(Policy("topk-bernoulli"), help="bandit policy for --budget (see `simulate`)")
    limit: int | None = option(
        None,
        min=1,
        help="a smoke test before a long job: judge only the first N pairs of the shard, into OUT.limit-N beside "
        "--out (files limited-judgments-*, which no release reads)",
    )
    backend: str | None = option(
        None, help="the judge backend, instead of the profile's: transformers, vllm, ray, openai, bi-encoder"
    )
    endpoint: str | None = option(
        None, help="backend openai: the server's API base URL, e.g. http://gpu-node:8000/v1 (instead of the profile's)"
    )
    concurrency: int | None = option(None, min=1, help="backend openai: requests in flight")
    export_batch: Path | None = option(
        None,
        output="folder",
        help="write the shard's pairs still missing as OpenAI Batch request files (and manifest.json) into this folder",
    )
    import_batch: list[Path] | None = option(
        None,
        help="result file of those requests (`vllm run-batch` output, OpenAI Batch output or error file); "
        "repeat for several",
    )
    batch_manifest: Path | None = option(
        None, help="the export's manifest.json (default: beside the first result file, or in its parent folder)"
    )


def write_overridden_profile(profile, out: Path):
    """A judge section that --backend / --endpoint changed is a profile of its own (its own config hash): written
    beside the judgments, so build-release and later runs can name it."""
    from builder.pasteable import profile_argument

    check_folder_arg(out, "--out")
    path = profile_argument(profile, out)
    notice(
        f"judge: --backend/--endpoint make a judge section of its own (another config hash than the profile's): "
        f"it is written to {path}; pass that file as --profile to build-release and to later judge runs"
    )
    return profile


def judged_profile(options: JudgeOptions) -> Profile:
    """The profile every variant judges with: the given one, or with --backend/--endpoint/--concurrency a judge
    section of its own, written beside the judgments."""
    from generation.profiles.profile import judge_run_profile

    try:
        profile, own_section = judge_run_profile(
            options.profile, options.backend, options.endpoint, options.concurrency
        )
    except ValueError as e:
        fail(str(e))
    if own_section and options.export_batch is None and not options.import_batch:
        from generation.backends import refuse_unrunnable

        refuse_unrunnable(profile.judge)  # before the section is written: a refused run leaves nothing
    return write_overridden_profile(profile, options.out) if own_section else profile


def inputs(profile: Profile, options: JudgeOptions) -> tuple[Profile, Path, Path, Path, Path]:
    """The first five arguments of every judge stage."""
    return profile, options.out, options.subquestions, options.candidates, options.index


def batch_mode_alone(options: JudgeOptions) -> None:
    if (
        options.budget is not None
        or options.limit is not None
        or (options.export_batch is not None and options.import_batch)
    ):
        fail(
            "--export-batch and --import-batch judge the whole shard, one at a time: leave out --budget, --limit "
            "and the other batch option"
        )


def export_batch_stage(profile: Profile, options: JudgeOptions) -> Stage:
    """Writes the shard's missing pairs as OpenAI Batch request files and exits: the command runs no stage."""
    from generation.stages.judge_batch import export_shard

    batch_mode_alone(options)
    folder, shard = typing.cast(Path, options.export_batch), options.shard
    check_folder_arg(folder, "--export-batch")
    manifest = export_shard(JudgeStage(*inputs(profile, options)), shard, folder)
    if manifest is None:
        say(
            f"batch export: shard {shard.label} of {options.out} is already judged and recorded done: nothing to export"
        )
        raise typer.Exit(0)
    files = ", ".join(f.name for f in manifest.files) or "none"
    say(
        f"batch export: {manifest.pairs:,} requests ({manifest.request_shape}, {manifest.url}) in "
        f"{len(manifest.files)} files ({files}), {len(manifest.not_exported):,} prompts over the budget "
        f"recorded -> {folder}/manifest.json"
    )
    raise typer.Exit(0)


def import_batch_stage(profile: Profile, options: JudgeOptions) -> Stage:
    from generation.stages.judge_batch import BatchImportJudgeStage

    batch_mode_alone(options)
    results = options.import_batch or []
    for path in results:
        if not path.is_file():
            fail(f"{path}: no such result file")
    manifest = options.batch_manifest or next(
        (
            folder / "manifest.json"
            for folder in (results[0].parent, results[0].parent.parent)
            if (folder / "manifest.json").is_file()
        ),
        None,
    )
    if manifest is None:
        fail(
            f"no manifest.json beside {results[0]} or in its parent folder: pass --batch-manifest, the "
            "manifest.json --export-batch wrote"
        )
    return BatchImportJudgeStage(*inputs(profile, options), results, manifest)


def limited_stage(profile: Profile, options: JudgeOptions) -> Stage:
    from builder.cli.reports import limited_run_notice
    from generation.stages.limited import limited_judge_stage

    if options.budget is not None:
        raise typer.BadParameter("a smoke test of the full judge: leave out --budget", param_hint="--limit")
    stage = limited_judge_stage(*inputs(profile, options), typing.cast(int, options.limit))
    notice(limited_run_notice(stage))
    return stage


def budgeted_stage(profile: Profile, options: JudgeOptions) -> Stage:
    budget = typing.cast(float, options.budget)
    positive("--budget", budget, upper=1)
    return BudgetedJudgeStage(*inputs(profile, options), budget, options.policy.value)


def full_stage(profile: Profile, options: JudgeOptions) -> Stage:
    if profile.judge.backend == "bi-encoder":
        warn_stand_in(
            "judge", profile.judge.model, "MiniLM bi-encoder cosine cut into levels", "the paper's Llama-3.3-70B judge"
        )
    return JudgeStage(*inputs(profile, options))


@dataclass(frozen=True)
class JudgeVariant:
    """One stage the `judge` command can run: the options that choose it and how it is built."""

    name: str
    chosen_by: str
    chosen: Callable[[JudgeOptions], bool]
    build: Callable[[Profile, JudgeOptions], Stage]


# The first variant whose `chosen` holds is built; each refuses the options that do not go with it.
JUDGE_VARIANTS: tuple[JudgeVariant, ...] = (
    JudgeVariant("batch export", "--export-batch", lambda o: o.export_batch is not None, export_batch_stage),
    JudgeVariant("batch import", "--import-batch", lambda o: bool(o.import_batch), import_batch_stage),
    JudgeVariant("smoke test", "--limit", lambda o: o.limit is not None, limited_stage),
    JudgeVariant("budgeted", "--budget (and --policy)", lambda o: o.budget is not None, budgeted_stage),
    JudgeVariant("full judge", "none of the above", lambda o: True, full_stage),
)


def make_judge_stage(options: JudgeOptions) -> Stage:
    """The stage `options` choose (`JUDGE_VARIANTS`), judging with the profile --backend/--endpoint may change."""
    profile = judged_profile(options)
    variant = next(v for v in JUDGE_VARIANTS if v.chosen(options))
    return variant.build(profile, options)
