"""One way to take options (builder/command_options.py): a command's options are the fields of its options record, in
field order, with their flags, help, defaults, bounds and output guard; the command builds the record from what it
parsed, and Python callers build the same record by keyword."""

from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from builder.cli.judge import JudgeOptions
from builder.cli.main import app
from builder.cli.reports import JsonOutput
from builder.cli.shared_options import Sharding
from builder.cli.stages import CorpusOptions, RetrieveOptions
from builder.cli.support import OPTIONS_RECORDS, OUTPUT_GUARDS, guard_commands, new_app, with_options
from builder.command_options import REQUIRED, command_options, option, refuse_out_of_bounds
from builder.pilot.options import PilotOptions
from builder.release.assemble.options import ReleaseOptions
from builder.training.options import TrainOptions
from generation.errors import ArgumentError
from generation.profiles.profile import Profile

# the group's one option, which no record declares: `--version`, eager, with a callback that exits (typer's idiom)
GROUP_OPTIONS = ["version"]

# a command -> the records its options come from, in order; a stage command's first is made from its stage's
# declaration (builder/cli/stages.py `stage_inputs`)
RECORDED = {
    "retrieve": ("RetrieveStageInputs", RetrieveOptions, Sharding),
    "judge": ("JudgeStageInputs", JudgeOptions, Sharding),
    "rerank": ("RerankStageInputs", Sharding),
    "pilot": (PilotOptions, Sharding, JsonOutput),
    "build-release": (ReleaseOptions,),
    "train": (TrainOptions,),
    "corpus": (CorpusOptions,),
}


def leaf_commands(group, prefix: str = "") -> dict:
    """Every command under `group` (a group's commands walked), by the name typed after `researchy-subq`."""
    found: dict = {}
    for name, command in getattr(group, "commands", {}).items():
        if hasattr(command, "commands"):
            found |= leaf_commands(command, f"{prefix}{name} ")
        else:
            found[prefix + name] = command
    return found


TOP = typer.main.get_command(app)
COMMANDS = leaf_commands(TOP)


def guard_kind(param) -> str | None:
    guard = getattr(param.callback, "__wrapped__", None)
    return next((kind for kind, made in OUTPUT_GUARDS.items() if made is guard), None)


def options_not_from_records(command) -> list[str]:
    """The options of `command` that its options records do not declare, as they declare them (flags, help,
    default, bounds, output guard, order): a typer-declared option, or one that drifted from its field."""
    records = getattr(command.callback, OPTIONS_RECORDS, ())
    declared = [o for record in records for o in command_options(record)]
    given = [p for p in command.params if p.param_type_name == "option"]
    if [p.name for p in given] != [o.name for o in declared]:
        return [p.name for p in given if p.name not in {o.name for o in declared}] or ["(their order)"]
    return [
        param.name
        for o, param in zip(declared, given, strict=True)
        if param.required != (o.default is REQUIRED)
        or param.default != (None if o.default is REQUIRED else o.default)
        or param.help != o.help
        or guard_kind(param) != o.output
        or (param.min, param.max) != (o.bounds.get("min"), o.bounds.get("max"))
        or param.opts != list(o.flags or [o.flag])
    ]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_of_every_command_is_a_field_of_its_records(name):
    assert options_not_from_records(COMMANDS[name]) == []


def test_the_group_takes_no_option_but_version():
    assert len(COMMANDS) == 23 and {"plan", "slurm", "demo", "texts", "stages"} <= set(COMMANDS)
    assert [p.name for p in TOP.params if p.param_type_name == "option"] == GROUP_OPTIONS


@pytest.mark.parametrize("name", RECORDED)
def test_a_command_takes_the_records_it_declares_in_order(name):
    records = getattr(COMMANDS[name].callback, OPTIONS_RECORDS)
    named = [r.__name__ if isinstance(e, str) else r for r, e in zip(records, RECORDED[name], strict=True)]
    assert named == list(RECORDED[name])
    params = [p.name for p in COMMANDS[name].params]
    assert "plan_sample" not in params  # PilotOptions' field that is no option: the command gives it


def test_a_typer_declared_option_is_caught():
    stray = new_app("a command with an option no record declares")

    @stray.command()
    @with_options
    def run(options: Sample) -> None:
        """Declared by a record."""

    @stray.command()
    def loose(name: str = typer.Option("x", help="declared by typer")) -> None:
        """Declared in its signature."""

    commands = leaf_commands(typer.main.get_command(guard_commands(stray)))
    assert options_not_from_records(commands["run"]) == []
    assert options_not_from_records(commands["loose"]) == ["name"]

    def mixed(options: Sample, extra: str = typer.Option("x", help="declared by typer")) -> None:
        """Both."""

    with pytest.raises(TypeError, match="^mixed: extra is neither an options record nor a typer.Argument"):
        with_options(mixed)


def test_python_callers_build_the_records_by_keyword(tmp_path):
    given = {"judgments": [tmp_path / "j"], "questions": [tmp_path / "q"], "out": tmp_path / "r", "profile": "paper"}
    assert ReleaseOptions(**given).repo == "ORG/researchy-subq-judgments"
    with pytest.raises(TypeError):
        ReleaseOptions(*given.values())  # type: ignore[misc]
    trained = TrainOptions(texts=tmp_path / "t", out=tmp_path / "m", model="bge", seed=3, push_to_hub="o/n")
    assert trained.train_keys() == {"model": "bge", "seed": 3}  # the fields named as train keys, when given


@dataclass(frozen=True, kw_only=True)
class Sample:
    """A record of every kind of option a record declares."""

    name: str = option(REQUIRED, "--name", help="a name")
    count: int = option(3, min=1, max=9, help="how many")
    tags: list[str] = option([], "--tag", help="repeatable")
    profile: str | Profile | None = option(None, "--profile", parsed_as=str, help="a profile's name")
    out: Path | None = option(None, "--out", output="folder", help="where it writes")
    note: str = "no option"

    def __post_init__(self) -> None:
        refuse_out_of_bounds(self)


@dataclass(frozen=True, kw_only=True)
class Switch:
    """A second record of the same command: its options follow the first's."""

    last: bool = option(False, "--last", help="the last option")


def test_a_record_holds_its_bounds_for_python_callers_too():
    with pytest.raises(ArgumentError, match=r"^--count 10: must be <= 9$"):
        Sample(name="n", count=10)
    with pytest.raises(ArgumentError, match=r"^--count 0: must be >= 1$"):
        Sample(name="n", count=0)
    with pytest.raises(ArgumentError, match=r"^--pairs 0: must be >= 1$"):
        PilotOptions(a="paper", b="paper", subquestions=Path("s"), candidates=Path("c"), index=Path("i"), out=Path("o"),
                     pairs=0)  # fmt: skip


def sample_app(seen: list) -> typer.Typer:
    made = new_app("a command that takes a Sample")

    @made.command()
    @with_options
    def run(first: Path = typer.Argument(..., help="a path"), *, options: Sample, switch: Switch) -> None:
        """Record what was parsed."""
        seen.append((first, options, switch.last))

    @made.command()
    def other() -> None:
        """A second command, so that `run` is named."""

    return guard_commands(made)


def test_the_command_builds_the_record_from_what_it_parsed(tmp_path):
    seen: list = []
    runner = CliRunner()
    given = ["run", "a", "--name", "n", "--count", "9", "--tag", "x", "--tag", "y", "--profile", "paper", "--last"]
    assert runner.invoke(sample_app(seen), given).exit_code == 0
    assert runner.invoke(sample_app(seen), ["run", "b", "--name", "m"]).exit_code == 0
    assert seen == [
        (Path("a"), Sample(name="n", count=9, tags=["x", "y"], profile="paper"), True),
        (Path("b"), Sample(name="m"), False),
    ]
    assert seen[1][1].tags == [] and seen[1][1].tags is not Sample(name="m").tags


def test_the_command_checks_what_the_record_declares(tmp_path):
    seen: list = []
    runner = CliRunner()
    missing = runner.invoke(sample_app(seen), ["run", "a"])
    assert missing.exit_code == 2 and "Missing option '--name'" in missing.output
    over = runner.invoke(sample_app(seen), ["run", "a", "--name", "n", "--count", "10"])
    assert over.exit_code == 2 and "'--count': Input should be less than or equal to 9" in over.output
    users = tmp_path / "users"
    users.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "inside").symlink_to(users)
    linked = runner.invoke(sample_app(seen), ["run", "a", "--name", "n", "--out", str(out)])
    assert linked.exit_code == 1 and f"--out {out}: {out / 'inside'}: is a symbolic link" in linked.output
    assert not seen
    shown = " ".join(runner.invoke(sample_app(seen), ["run", "-h"]).output.split())
    assert "Usage: root run [OPTIONS] FIRST" in shown and "--count N how many [default: 3; 1<=x<=9]" in shown
    assert "--tag TEXT repeatable" in shown and "--profile TEXT a profile's name" in shown and "--note" not in shown
