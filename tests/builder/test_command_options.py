"""One way to take options (builder/command_options.py): a command's options are the fields of its options record, in
field order, with their flags, help, defaults, bounds and output guard; the command builds the record from what it
parsed, and Python callers build the same record by keyword."""

from dataclasses import dataclass, fields
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from builder.cli.judge import JudgeOptions
from builder.cli.main import app
from builder.cli.stages import RetrieveOptions
from builder.cli.support import OUTPUT_GUARDS, guard_commands, new_app, with_options
from builder.command_options import REQUIRED, command_options, option, refuse_out_of_bounds
from builder.pilot.options import PilotOptions
from builder.release.assemble.options import ReleaseOptions
from builder.training.options import TrainOptions
from generation.errors import ArgumentError
from generation.profiles import Profile

# command -> its options record, the parameters the command gives before the record's options, and those after
RECORDED = {
    "retrieve": (RetrieveOptions, ["profile", "questions", "index", "out"], ["shard", "num_shards"]),
    "judge": (JudgeOptions, ["profile", "subquestions", "candidates", "index", "out"], ["shard", "num_shards"]),
    "pilot": (PilotOptions, [], ["shard", "num_shards", "json_out"]),
    "build-release": (ReleaseOptions, [], []),
    "train": (TrainOptions, ["release"], []),
}


def guard_kind(param) -> str | None:
    guard = getattr(param.callback, "__wrapped__", None)
    return next((kind for kind, made in OUTPUT_GUARDS.items() if made is guard), None)


@pytest.mark.parametrize("name", RECORDED)
def test_a_command_s_options_are_its_record_s_fields_in_order(name):
    record, before, after = RECORDED[name]
    command = typer.main.get_command(app).commands[name]
    params = {p.name: p for p in command.params if p.name != "help"}
    declared = command_options(record)
    assert list(params) == before + [o.name for o in declared] + after
    for o in declared:
        param = params[o.name]
        assert param.required == (o.default is REQUIRED), o.name
        assert param.default == (None if o.default is REQUIRED else o.default), o.name
        assert param.help == o.help and guard_kind(param) == o.output, o.name
        assert (param.min, param.max) == (o.bounds.get("min"), o.bounds.get("max")), o.name
        assert param.opts == list(o.flags or [o.flag]) and param.opts[0] == o.flag, o.name
    others = [f.name for f in fields(record) if "option" not in f.metadata]
    assert all(name in before + after for name in others if name in params)  # the command gives them
    assert "plan_sample" not in params  # PilotOptions' field that is no option


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
    def run(first: Path = typer.Argument(..., help="a path"), *, options: Sample, last: bool = False) -> None:
        """Record what was parsed."""
        seen.append((first, options, last))

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
