"""The `judge` command's own options (after the ones every sharded stage gets from its declaration, builder/cli/
stages.py) and how they choose its stage: the full judge, `--budget` (a bandit chooses the pairs), `--limit` (a smoke
test), `--backend`/`--endpoint`/`--concurrency` (a judge section of its own, written beside the judgments), and
`--export-batch`/`--import-batch` (OpenAI Batch files). builder/cli/stages.py registers the command with them."""

from __future__ import annotations

from pathlib import Path

import typer

from builder.cli.support import Policy, check_folder_arg, fail, notice, positive, say, warn_stand_in
from generation.stages import REGISTRY, Stage
from generation.stages.budgeted import BudgetedJudgeStage

# after --profile, the inputs and --out; before --shard and --num-shards (stages.stage_command)
JUDGE_OPTIONS = {
    "budget": (float | None, typer.Option(None, help="judge only this share (0, 1] of the pairs, chosen by --policy")),
    "policy": (Policy, typer.Option("topk-bernoulli", help="bandit policy for --budget (see `simulate`)")),
    "limit": (
        int | None,
        typer.Option(
            None,
            min=1,
            help="a smoke test before a long job: judge only the first N "
            "pairs of the shard, into OUT.limit-N beside --out (files "
            "limited-judgments-*, which no release reads)",
        ),
    ),
    "backend": (
        str | None,
        typer.Option(
            None, help="the judge backend, instead of the profile's: transformers, vllm, ray, openai, bi-encoder"
        ),
    ),
    "endpoint": (
        str | None,
        typer.Option(
            None,
            help="backend openai: the server's API base URL, e.g. http://gpu-node:8000/v1 (instead of the profile's)",
        ),
    ),
    "concurrency": (int | None, typer.Option(None, min=1, help="backend openai: requests in flight")),
    "export_batch": (
        Path | None,
        typer.Option(
            None,
            help="write the shard's pairs still missing as OpenAI Batch "
            "request files (and manifest.json) into this folder",
        ),
    ),
    "import_batch": (
        list[Path] | None,
        typer.Option(
            None,
            help="result file of those requests (`vllm run-batch` "
            "output, OpenAI Batch output or error file); "
            "repeat for several",
        ),
    ),
    "batch_manifest": (
        Path | None,
        typer.Option(
            None, help="the export's manifest.json (default: beside the first result file, or in its parent folder)"
        ),
    ),
}


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


def make_judge_stage(
    profile,
    out,
    subquestions,
    candidates,
    index,
    budget,
    policy,
    limit,
    backend,
    endpoint,
    concurrency,
    export_batch,
    import_batch,
    batch_manifest,
    shard,
) -> Stage:
    """`judge`, or with --budget the budgeted judge (a bandit chooses the pairs), or with --limit a smoke test; with
    --export-batch the shard's missing pairs as OpenAI Batch request files, with --import-batch their results."""
    from generation.profiles import judge_run_profile

    try:
        profile, own_section = judge_run_profile(profile, backend, endpoint, concurrency)
    except ValueError as e:
        fail(str(e))
    if own_section:
        profile = write_overridden_profile(profile, out)
    if export_batch is not None or import_batch:
        return batch_stage(
            profile,
            out,
            subquestions,
            candidates,
            index,
            export_batch,
            import_batch,
            batch_manifest,
            shard,
            budget is not None or limit is not None,
        )
    if limit is not None:
        from builder.cli.reports import limited_run_notice
        from generation.stages.limited import limited_judge_stage

        if budget is not None:
            raise typer.BadParameter("a smoke test of the full judge: leave out --budget", param_hint="--limit")
        stage = limited_judge_stage(profile, out, subquestions, candidates, index, limit)
        notice(limited_run_notice(stage))
        return stage
    if budget is not None:
        positive("--budget", budget, upper=1)
        return BudgetedJudgeStage(profile, out, subquestions, candidates, index, budget, policy.value)
    if profile.judge.backend == "bi-encoder":
        warn_stand_in(
            "judge", profile.judge.model, "MiniLM bi-encoder cosine cut into levels", "the paper's Llama-3.3-70B judge"
        )
    return REGISTRY["judge"](profile, out, subquestions, candidates, index)


def batch_stage(
    profile, out, subquestions, candidates, index, export_batch, import_batch, manifest, shard, other_mode: bool
) -> Stage:
    from generation.stages.judge_batch import BatchImportJudgeStage, export_shard

    if other_mode or (export_batch is not None and import_batch):
        fail(
            "--export-batch and --import-batch judge the whole shard, one at a time: leave out --budget, --limit "
            "and the other batch option"
        )
    if export_batch is not None:
        check_folder_arg(export_batch, "--export-batch")
        stage = REGISTRY["judge"](profile, out, subquestions, candidates, index)
        manifest = export_shard(stage, shard, export_batch)
        if manifest is None:
            say(f"batch export: shard {shard.label} of {out} is already judged and recorded done: nothing to export")
            raise typer.Exit(0)
        files = ", ".join(f["name"] for f in manifest["files"]) or "none"
        say(
            f"batch export: {manifest['pairs']:,} requests ({manifest['request_shape']}, {manifest['url']}) in "
            f"{len(manifest['files'])} files ({files}), {len(manifest['not_exported']):,} prompts over the budget "
            f"recorded -> {export_batch}/manifest.json"
        )
        raise typer.Exit(0)
    for path in import_batch:
        if not path.is_file():
            fail(f"{path}: no such result file")
    manifest = manifest or next(
        (
            folder / "manifest.json"
            for folder in (import_batch[0].parent, import_batch[0].parent.parent)
            if (folder / "manifest.json").is_file()
        ),
        None,
    )
    if manifest is None:
        fail(
            f"no manifest.json beside {import_batch[0]} or in its parent folder: pass --batch-manifest, the "
            "manifest.json --export-batch wrote"
        )
    return BatchImportJudgeStage(profile, out, subquestions, candidates, index, import_batch, manifest)
