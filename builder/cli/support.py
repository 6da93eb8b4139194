"""What every `researchy-subq` command module shares: `fail` (one red line, exit 1), `notice` (a line on stderr),
`say` (a result line on stdout), `warn_stand_in`, `guard_commands` (an error from bad input becomes that one line,
never a traceback; help reads as English), `output_option` (every option naming a path the command writes),
`with_options` (a command's options from its options record, builder/command_options.py), argument checks, and
`new_app`."""

from __future__ import annotations

import functools
import inspect
import os
import typing
from enum import Enum
from pathlib import Path

import click
import typer
from rich.text import Text
from typer.core import TyperCommand
from typer.exceptions import TyperException
from typer.models import ArgumentInfo, OptionInfo

from builder.command_options import command_options, is_options_record
from generation import __version__
from generation.docstore import MissingDocument, NotAnIndex
from generation.errors import ArgumentError, BackendError, InputError
from generation.executors.errors import ClusterError
from generation.java import JavaError
from generation.models import ModelNotAvailable
from generation.profiles import ProfileError, bundled_profiles, load_profile
from generation.progress import console, counter, results
from generation.shards import Shard, ShardError
from generation.stages.index import IndexBuildError
from generation.storage import LinkRefused, OwnershipError, refuse_links, refuse_links_under

HELP = {"help_option_names": ["-h", "--help"]}
DEBUG_ENV = "RESEARCHY_SUBQ_DEBUG"  # set to 1 to see the traceback behind an error line


def new_app(help: str) -> typer.Typer:
    """A Typer app as every command module makes it: -h, no rich markup (it eats `[low, high]`)."""
    return typer.Typer(
        help=help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings=HELP,
    )


def notice(message: str) -> None:
    console.print(message, highlight=False, markup=False, soft_wrap=True)


def fail(message: str) -> typing.NoReturn:
    text = Text("error: ", style="bold red")
    text.append(str(message))
    console.print(text, highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def say(line: str) -> None:
    results.print(line, highlight=False, markup=False, soft_wrap=True)


def warn_stand_in(role: str, model: str, what: str, real: str) -> None:
    console.print(Text(f"{role}: {model} is a STAND-IN ({what}), not {real}", style="yellow"))


# Errors that bad input, a bad folder or a missing model raise on purpose, each with a message naming the
# file (and line): the guard prints the message alone.
KNOWN_ERRORS = (
    InputError,
    ArgumentError,
    ShardError,
    ProfileError,
    JavaError,
    IndexBuildError,
    ModelNotAvailable,
    OwnershipError,
    MissingDocument,
    NotAnIndex,
    ClusterError,
    BackendError,
)


def error_line(error: BaseException) -> str:
    """One line for an error from a library the kit calls (the OS, gzip, pyarrow, Java)."""
    if isinstance(error, KNOWN_ERRORS):
        return str(error.args[0]) if isinstance(error, MissingDocument) else str(error)
    if isinstance(error, EOFError):
        return f"an input ended early (a truncated file?): {error}"
    if isinstance(error, UnicodeDecodeError):
        return f"an input is not UTF-8 text ({error.reason} at byte {error.start})"
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{error.strerror or error}"
    if type(error).__module__.startswith("pyarrow"):
        return f"an input is not readable Parquet/Arrow data: {str(error).splitlines()[0]}"
    module = type(error).__module__
    if module.startswith(("httpx", "httpcore", "requests", "urllib3")):
        return f"cannot reach the network ({str(error).splitlines()[0]}); check the connection, or HF_ENDPOINT"
    if module.startswith("huggingface_hub"):
        return f"Hugging Face Hub: {str(error).splitlines()[0]}"
    if type(error).__name__ == "JavaException":  # pyjnius
        return f"Java: {str(error).splitlines()[0]}"
    return (
        f"internal error {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''} "
        f"(please report it; {DEBUG_ENV}=1 shows the traceback)"
    )


def guarded(callback):
    """A command callback whose exceptions end in one error line (unless RESEARCHY_SUBQ_DEBUG=1)."""

    @functools.wraps(callback)
    def run(*args, **kwargs):
        try:
            return callback(*args, **kwargs)
        except (typer.Exit, typer.Abort, TyperException, click.ClickException, KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - the one place errors become lines
            if os.environ.get(DEBUG_ENV) == "1":
                raise
            fail(error_line(e))  # EOFError too: click would print only "Aborted!"

    return run


def guard_commands(typer_app: typer.Typer) -> typer.Typer:
    for command in typer_app.registered_commands:
        name_metavars(command.callback)
        if command.cls in (None, TyperCommand):
            command.cls = PlainCommand
        if not getattr(command.callback, "__wrapped__", None):
            command.callback = guarded(command.callback)
    return typer_app


# -- help that reads as English: `--out PATH`, `RELEASE`, not typer's `<path>`, `{release}`, `<list[Path]>` ----------
METAVARS = {Path: "PATH", int: "N", float: "NUMBER", str: "TEXT"}


def metavar_of(annotation) -> str | None:
    """PATH, N, NUMBER, TEXT or [a|b|c] for an option's type (a list: its items' type; a flag: none)."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is not None and arguments:
        return metavar_of(arguments[0])
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "[" + "|".join(str(m.value) for m in annotation) + "]"
    return METAVARS.get(annotation)


def name_metavars(callback) -> None:
    hints = typing.get_type_hints(callback) if not hasattr(callback, "__signature__") else {}
    for name, parameter in inspect_parameters(callback):
        info, annotation = parameter.default, hints.get(name, parameter.annotation)
        if isinstance(info, ArgumentInfo) and info.metavar is None:
            info.metavar = name.upper()
        elif isinstance(info, OptionInfo) and info.metavar is None and annotation is not bool:
            info.metavar = metavar_of(annotation)


def inspect_parameters(callback):
    return inspect.signature(callback).parameters.items()


class PlainCommand(TyperCommand):
    """Usage `researchy-subq validate [OPTIONS] RELEASE` and argument rows `RELEASE  what it is`, as click writes
    them, instead of typer's `{release}` and `release <path>`."""

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or param.name.upper()
                pieces.append((name if param.required else f"[{name}]") + ("..." if param.nargs != 1 else ""))
        return pieces

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        params = [p for p in self.get_params(ctx) if not getattr(p, "hidden", False)]
        arguments = [
            (p.metavar or p.name.upper(), getattr(p, "help", None) or "")
            for p in params
            if p.param_type_name == "argument"
        ]
        options = [record for p in params if p.param_type_name != "argument" and (record := p.get_help_record(ctx))]
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"researchy-subq {__version__}")
        raise typer.Exit()


def positive(name: str, value, upper: float | None = None, include_upper: bool = True):
    """A number > 0 (and <= upper, or < upper), or a usage error naming the option."""
    if value is None:
        return value
    inside = value > 0 and (upper is None or (value <= upper if include_upper else value < upper))
    if not inside:
        bound = "" if upper is None else f" and {'<=' if include_upper else '<'} {upper:g}"
        raise typer.BadParameter(f"must be > 0{bound}, got {value!r}", param_hint=name)
    return value


def _output_guard(kind: str):
    """The callback of an `output_option` of `kind` (folder or file): the one link guard on the value as the command
    line is read, so a link is refused, naming the option and the path, before the command writes anything."""

    def guard(ctx, param, value):
        if value is None or str(value) == "-":  # `--json -`: stdout
            return value
        option, path = (param.opts or [param.name])[0], Path(value)
        try:
            if kind == "folder":  # no link under it (the folder itself the user named, as every folder writer takes it)
                refuse_links_under(path, given_as=f"{option} {path}: ")
            else:
                refuse_links(path.parent, path.name, given_as=f"{option} ", instead="file")
        except LinkRefused as e:
            fail(str(e))
        return value

    return guard


OUTPUT_GUARDS = {"folder": _output_guard("folder"), "file": _output_guard("file")}


def output_option(default, *flags: str, output: str = "folder", **settings):
    """The typer.Option of a path the command writes: a folder (`--out`) or a file (`output="file"`: `--rejects`,
    `--json`). Every such option is made here, so each goes through the one link guard (generation/storage.py
    `refuse_links`); tests/test_output_links.py walks every command and fails on a path option that is neither this
    nor a declared input."""
    return typer.Option(default, *flags, callback=OUTPUT_GUARDS[output], **settings)


def option_parameters(record: type) -> list[inspect.Parameter]:
    """The keyword parameters, in field order, that make `record`'s options (builder/command_options.py) a command's:
    each a typer.Option, or an `output_option` for a path the command writes."""
    made = []
    for o in command_options(record):
        settings: dict[str, typing.Any] = {"help": o.help, **o.bounds}
        default = (
            typer.Option(o.default, *o.flags, **settings)
            if o.output is None
            else output_option(o.default, *o.flags, output=o.output, **settings)
        )
        made.append(inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, annotation=o.kind, default=default))
    return made


def with_options(callback):
    """The command `callback` with its parameter annotated by an options record (PilotOptions, ReleaseOptions, ...)
    standing for the record's options, in their place among its other parameters; the callback gets the record built
    from the parsed values. What typer reads is the signature made here."""
    hints = typing.get_type_hints(callback)
    signature = inspect.signature(callback)
    records = [(n, hints[n]) for n in signature.parameters if is_options_record(hints.get(n))]
    assert len(records) == 1, f"{callback.__name__}: one parameter annotated with an options record"
    ((name, record),) = records
    taken = [o.name for o in command_options(record)]
    params: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        if parameter.name == name:
            params += option_parameters(record)
        else:
            params.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[parameter.name]))
    assert len({p.name for p in params}) == len(params), f"{callback.__name__}: a parameter is also a record's option"

    def command(**values):
        options = record(**{n: values.pop(n) for n in taken})
        return callback(**values, **{name: options})

    typing.cast(typing.Any, command).__signature__ = inspect.Signature(params)
    command.__name__, command.__doc__, command.__module__ = callback.__name__, callback.__doc__, callback.__module__
    return command


def check_folder_arg(path: Path | None, option: str) -> None:
    if path is not None and path.exists() and not path.is_dir():
        fail(f"{path}: is a file; {option} takes a folder")


def check_writable_file(path: Path | None, option: str) -> None:
    if path is not None and path.is_dir():
        fail(f"{path}: is a folder; {option} takes a file name")


# -- what more than one command module needs: the release argument, profiles, shards, a stage run with progress ----
RELEASE = typer.Argument(..., help="the release folder (= the Hub repository's files)")
SHARD = typer.Option(
    0, "--shard", min=0, help="this worker's shard (0-based); with --num-shards, e.g. a Slurm array rank"
)
NUM_SHARDS = typer.Option(1, "--num-shards", min=1, help="how many shards the stage is cut into")
PROFILE = typer.Option(
    ...,
    "--profile",
    help=f"a bundled profile ({', '.join(bundled_profiles())}) or a YAML "
    "file (a .yaml path, or any path with a folder in it)",
)


def existing_release(release: Path) -> Path:
    if not release.exists():
        fail(f"{release}: no such folder")
    if not release.is_dir():
        fail(f"{release}: not a folder (a release is a folder)")
    return release


def shard_of(index: int, count: int) -> Shard:
    try:
        return Shard(index, count)
    except ShardError as e:
        fail(str(e))


def profile_of(name: str):
    try:
        return load_profile(name)
    except ProfileError as e:
        fail(str(e))


def run_stage(description: str, unit: str, work, total: int | None = None):
    """Runs a library call with a progress bar (errors: see `guard_commands`)."""
    with counter(description, total=total, unit=unit) as advance:
        return work(advance)


def policy_names() -> list[str]:
    from generation.bandits.policies import POLICIES

    return list(POLICIES)


Policy = Enum("Policy", {name: name for name in policy_names()}, type=str)  # so -h lists the choices
