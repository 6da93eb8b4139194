"""`slurm judge --from-plan PLAN.json`: the array's wall time from `researchy-subq plan --json PLAN.json`, checked
against the job it times. The plan must be of the same judge configuration (the job's --profile gives the same judge
config hash) and of the same pairs (the same --subquestions and --candidates folders); its row "these pairs" at the
profile's precision (fp8 when judge.quantization is fp8, else bf16) gives the GPU-hours (prefill and decode),
without the prefix cache's saving (the plan's upper figure: a task cut short costs more than a task that ends
early)."""

from __future__ import annotations

import json
from pathlib import Path

from generation.executors.errors import SlurmError
from generation.judging.prompts import get_prompt
from generation.profiles.profile import ProfileError, load_profile

MEASURED_ROW = "these pairs"


def option_values(arguments: list[str]) -> dict[str, str]:
    """{"--profile": "paper", ...} from a command's arguments (`--x v` and `--x=v`)."""
    values: dict[str, str] = {}
    for i, argument in enumerate(arguments):
        if argument.startswith("--"):
            name, given, value = argument.partition("=")
            if given:
                values[name] = value
            elif i + 1 < len(arguments) and not arguments[i + 1].startswith("--"):
                values[name] = arguments[i + 1]
    return values


def read_plan(path: Path) -> dict:
    try:
        plan = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SlurmError(f"{path}: not a plan from `researchy-subq plan --json` ({e})") from None
    if not isinstance(plan, dict) or not {"profile", "rows", "inputs"} <= set(plan):
        raise SlurmError(f"{path}: not a plan from `researchy-subq plan --json FILE` (needs profile, rows, inputs)")
    return plan


def same_folder(a: str, b: str) -> bool:
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def gpu_hours_from_plan(path: Path, stage_name: str, arguments: list[str]) -> tuple[float, str]:
    """The GPU-hours the plan gives the job, and a line saying where they come from."""
    from generation.stages.judge import JudgeStage

    if stage_name != "judge":
        raise SlurmError(f"--from-plan times the judge stage (`plan` plans judging), not {stage_name}")
    plan, given = read_plan(path), option_values(arguments)
    try:
        profile = load_profile(given["--profile"]) if "--profile" in given else None
    except ProfileError as e:
        raise SlurmError(str(e)) from None
    if profile is None:
        raise SlurmError("the judge command needs --profile after `--`")
    planned = plan["profile"]
    if planned.get("judge_config_hash") != JudgeStage.config_hash(profile):
        raise SlurmError(
            f"{path}: planned for profile {planned.get('name')!r} (judge config "
            f"{planned.get('judge_config_hash')}), this job's --profile {given['--profile']} has "
            f"{JudgeStage.config_hash(profile)}: run `plan` with the job's profile"
        )
    for option in ("subquestions", "candidates"):
        job, planned_folder = given.get(f"--{option}"), plan["inputs"].get(option)
        if job is not None and planned_folder is not None and not same_folder(job, planned_folder):
            raise SlurmError(
                f"{path}: planned over --{option} {planned_folder}, this job judges {job}: run `plan` "
                "over the job's folders"
            )
    precision = planned.get("precision", "bf16")
    row = next(
        (
            r
            for r in plan["rows"]
            if r.get("stage") == "judge"
            and r.get("label") == MEASURED_ROW
            and r.get("precision") == precision
            and r.get("prompt", profile.judge.prompt) == profile.judge.prompt  # the job's prompt's row, not its twin
        ),
        None,
    )
    if row is None:
        raise SlurmError(
            f"{path}: no judge row {MEASURED_ROW!r} in {precision} (the calibration measured no "
            f"{precision} figure for this backend?)"
        )
    source = (
        f"{row['hours']:,.1f} GPU-hours: `plan` row {MEASURED_ROW!r}, {precision}, {row['items']:,} pairs, "
        f"{plan.get('device', 'H100')} at {row['share']:.1%} of peak ({row['source']}), "
        + (
            "each document's prefix once"
            if get_prompt(profile.judge.prompt).document_first
            else "no prefix-cache saving"
        )
    )
    return float(row["hours"]), source
