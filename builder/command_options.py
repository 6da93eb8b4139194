"""How a command's options are declared, once: an options record is a frozen, keyword-only dataclass (`PilotOptions`,
`ReleaseOptions`, `TrainOptions`, `JudgeOptions`, ...) whose fields made with `option` are the command's options, in
field order, each with its flag, help and bounds. Nothing here imports typer, so a record lives beside the library
code that reads it; builder/cli/support.py `with_options` turns a record into the command's options and builds the
record from what was parsed. Python callers (tests, examples, scripts) build the same record by keyword."""

from __future__ import annotations

import typing
from dataclasses import field, fields, is_dataclass
from typing import Any, NamedTuple

from generation.errors import ArgumentError

REQUIRED: Any = ...  # an option the command requires (typer's spelling): the field has no default


class CommandOption(NamedTuple):
    """One option of a command, as its record's field declares it."""

    name: str  # the field's name (and the parsed value's keyword)
    kind: Any  # the type the command line gives: the field's, or `parsed_as`
    default: Any  # REQUIRED: none
    flags: tuple[str, ...]  # none: typer names it from the field, `--the-name` (a bool: `--the-name/--no-the-name`)
    help: str
    output: str | None  # "folder" or "file": a path the command writes (builder/cli/support.py `output_option`)
    bounds: dict[str, float]  # typer's `min` and `max`

    @property
    def flag(self) -> str:
        """The flag as messages name the option: its first, or the one typer makes from the field's name."""
        return self.flags[0] if self.flags else "--" + self.name.replace("_", "-")


def option(
    default: Any,
    *flags: str,
    help: str,
    output: str | None = None,
    parsed_as: Any = None,
    min: float | None = None,
    max: float | None = None,
) -> Any:
    """A record's field that is one option of its command: its default (REQUIRED: none; a list: a new empty one each
    time), its flags, its help, `output` for a path the command writes, `parsed_as` where the command line gives a
    narrower type than Python callers may pass (a profile's name, where Python may also pass a Profile), and the
    bounds the command checks."""
    bounds = {name: value for name, value in (("min", min), ("max", max)) if value is not None}
    metadata = {"option": (default, flags, help, output, parsed_as, bounds)}
    if default is REQUIRED:
        return field(metadata=metadata)
    if isinstance(default, list):
        return field(default_factory=list, metadata=metadata)
    return field(default=default, metadata=metadata)


def is_options_record(kind: object) -> bool:
    return isinstance(kind, type) and is_dataclass(kind) and any("option" in f.metadata for f in fields(kind))


def command_options(record: type) -> list[CommandOption]:
    """The options `record` declares, in field order (its other fields are no option: the command gives them)."""
    types = typing.get_type_hints(record)
    declared = []
    for f in fields(record):
        if "option" in f.metadata:
            default, flags, help, output, parsed_as, bounds = f.metadata["option"]
            kind = types[f.name] if parsed_as is None else parsed_as
            declared.append(CommandOption(f.name, kind, default, flags, help, output, bounds))
    return declared


def refuse_out_of_bounds(options: object) -> None:
    """An ArgumentError naming the flag of the first field of the record `options` outside the bounds its option
    declares: the command checks them as it parses; a record that calls this holds them for every Python caller."""
    for o in command_options(type(options)):
        value = getattr(options, o.name)
        if value is not None and "min" in o.bounds and value < o.bounds["min"]:
            raise ArgumentError(f"{o.flag} {value}: must be >= {o.bounds['min']}")
        if value is not None and "max" in o.bounds and value > o.bounds["max"]:
            raise ArgumentError(f"{o.flag} {value}: must be <= {o.bounds['max']}")
