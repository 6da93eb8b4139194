"""What every `researchy-subq` command module shares: `fail` (one red line, exit 1), `notice` (a line on stderr),
`say` (a result line on stdout), `warn_stand_in`, `guard_commands` (an error from bad input becomes that one line,
never a traceback; help reads as English), `output_option` (every option naming a path the command writes),
`with_options` and `options_command` (a command's options from its options records, builder/command_options.py),
argument checks, and `new_app`."""

from __future__ import annotations

import functools
import inspect
import os
import typing
from collections.abc import Callable, ItemsView
from enum import Enum
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from rich.text import Text
from typer import _click  # typer 0.29 carries its own copy of click: its commands, contexts and errors are these
from typer.core import TyperCommand
from typer.exceptions import TyperException
from typer.models import ArgumentInfo, OptionInfo

from builder.command_options import command_options, is_options_record
from generation import __version__
from generation.corpus.docstore import MissingDocument, NotAnIndex
from generation.corpus.java import JavaError
from generation.errors import ArgumentError, BackendError, InputError
from generation.executors.errors import ClusterError
from generation.profiles.model_paths import ModelNotAvailable
from generation.profiles.profile import Profile, ProfileError, load_profile
from generation.progress import console, counter, results
from generation.stages.index import IndexBuildError
from generation.storage.atomic_files import LinkRefused, OwnershipError, refuse_links, refuse_links_under
from generation.storage.shards import Shard, ShardError

P = ParamSpec("P")
R = TypeVar("R")
Number = TypeVar("Number", int, float)

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


def guarded(callback: Callable[P, R]) -> Callable[P, R]:
    """A command callback whose exceptions end in one error line (unless RESEARCHY_SUBQ_DEBUG=1)."""

    @functools.wraps(callback)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return callback(*args, **kwargs)
        except (typer.Exit, typer.Abort, TyperException, _click.ClickException, KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - the one place errors become lines
            if os.environ.get(DEBUG_ENV) == "1":
                raise
            fail(error_line(e))  # EOFError too: click would print only "Aborted!"

    return run


def guard_commands(typer_app: typer.Typer) -> typer.Typer:
    for command in typer_app.registered_commands:
        callback = command.callback
        assert callback is not None, f"{command.name}: a command registered with its function"
        name_metavars(callback)
        if command.cls in (None, TyperCommand):
            command.cls = PlainCommand
        if not getattr(callback, "__wrapped__", None):
            command.callback = guarded(callback)
    return typer_app


# -- help that reads as English: `--out PATH`, `RELEASE`, not typer's `<path>`, `{release}`, `<list[Path]>` ----------
METAVARS = {Path: "PATH", int: "N", float: "NUMBER", str: "TEXT"}


def metavar_of(annotation: Any) -> str | None:
    """PATH, N, NUMBER, TEXT or [a|b|c] for an option's type (a list: its items' type; a flag: none)."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is not None and arguments:
        return metavar_of(arguments[0])
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "[" + "|".join(str(m.value) for m in annotation) + "]"
    return METAVARS.get(annotation)


def name_metavars(callback: Callable[..., Any]) -> None:
    hints = typing.get_type_hints(callback) if not hasattr(callback, "__signature__") else {}
    for name, parameter in inspect_parameters(callback):
        info, annotation = parameter.default, hints.get(name, parameter.annotation)
        if isinstance(info, ArgumentInfo) and info.metavar is None:
            info.metavar = name.upper()
        elif isinstance(info, OptionInfo) and info.metavar is None and annotation is not bool:
            info.metavar = metavar_of(annotation)


def inspect_parameters(callback: Callable[..., Any]) -> ItemsView[str, inspect.Parameter]:
    return inspect.signature(callback).parameters.items()


class PlainCommand(TyperCommand):
    """Usage `researchy-subq validate [OPTIONS] RELEASE` and argument rows `RELEASE  what it is`, as click writes
    them, instead of typer's `{release}` and `release <path>`."""

    def collect_usage_pieces(self, ctx: _click.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or param.name.upper()
                pieces.append((name if param.required else f"[{name}]") + ("..." if param.nargs != 1 else ""))
        return pieces

    def format_options(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
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


def positive(name: str, value: Number | None, upper: float | None = None, include_upper: bool = True) -> Number | None:
    """A number > 0 (and <= upper, or < upper), or a usage error naming the option."""
    if value is None:
        return value
    inside = value > 0 and (upper is None or (value <= upper if include_upper else value < upper))
    if not inside:
        bound = "" if upper is None else f" and {'<=' if include_upper else '<'} {upper:g}"
        raise typer.BadParameter(f"must be > 0{bound}, got {value!r}", param_hint=name)
    return value


def _output_guard(kind: str) -> Callable[[_click.Context, _click.Parameter, Any], Any]:
    """The callback of an `output_option` of `kind` (folder or file): the one link guard on the value as the command
    line is read, so a link is refused, naming the option and the path, before the command writes anything."""

    def guard(ctx: _click.Context, param: _click.Parameter, value: Any) -> Any:
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


def output_option(default: Any, *flags: str, output: str = "folder", **settings: Any) -> Any:
    """The typer.Option of a path the command writes: a folder (`--out`) or a file (`output="file"`: `--rejects`,
    `--json`). Every such option is made here, so each goes through the one link guard
    (generation/storage/atomic_files.py `refuse_links`); tests/reliability/test_output_links.py walks every command and
    fails on a path option that is neither this nor a declared input."""
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


OPTIONS_RECORDS = "options_records"  # the attribute naming the records a command's options come from, in order


def with_options(callback: Callable[..., Any]) -> Callable[..., Any]:
    """The command `callback` with each parameter annotated by an options record (PilotOptions, Sharding, ...)
    standing for that record's options, in its place among the callback's arguments; the callback gets each record
    built from the parsed values. Its other parameters are its arguments (typer.Argument): a command's options come
    from records alone. What typer reads is the signature made here."""
    hints = typing.get_type_hints(callback)
    signature = inspect.signature(callback)
    records = {n: hints[n] for n in signature.parameters if is_options_record(hints.get(n))}
    if not records:
        raise TypeError(f"{callback.__name__}: no parameter is annotated with an options record")
    params: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        if parameter.name in records:
            params += option_parameters(records[parameter.name])
        elif not isinstance(parameter.default, ArgumentInfo):
            raise TypeError(
                f"{callback.__name__}: {parameter.name} is neither an options record nor a typer.Argument "
                "(an option is a record's field, builder/command_options.py)"
            )
        else:
            params.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[parameter.name]))

    def command(**values: Any) -> Any:
        built = {
            name: record(**{o.name: values.pop(o.name) for o in command_options(record)})
            for name, record in records.items()
        }
        return callback(**values, **built)

    return options_command(
        command, params, tuple(records.values()), callback.__name__, callback.__doc__, callback.__module__
    )


def options_command(
    command: Callable[..., Any],
    params: list[inspect.Parameter],
    records: tuple[type, ...],
    name: str,
    doc: str | None,
    module: str,
) -> Callable[..., Any]:
    """`command`, which takes its parsed values by keyword, as typer reads it: the signature `params` (its arguments
    and the options of `records`, made by `option_parameters`), its name, help and module, and the records its options
    come from (`OPTIONS_RECORDS`: tests/builder/test_command_options.py holds every command to them)."""
    assert len({p.name for p in params}) == len(params), f"{name}: two of its options or arguments share a name"
    made: Any = command
    made.__signature__ = inspect.Signature(params)
    made.__name__, made.__doc__, made.__module__ = name, doc, module
    setattr(made, OPTIONS_RECORDS, records)
    return made


def check_folder_arg(path: Path | None, option: str) -> None:
    if path is not None and path.exists() and not path.is_dir():
        fail(f"{path}: is a file; {option} takes a folder")


def check_writable_file(path: Path | None, option: str) -> None:
    if path is not None and path.is_dir():
        fail(f"{path}: is a folder; {option} takes a file name")


# -- what more than one command module needs: the release argument, profiles, shards, a stage run with progress ----
RELEASE = typer.Argument(..., help="the release folder (= the Hub repository's files)")


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


def profile_of(name: str) -> Profile:
    try:
        return load_profile(name)
    except ProfileError as e:
        fail(str(e))


def run_stage(description: str, unit: str, work: Callable[[Callable[..., None]], R], total: int | None = None) -> R:
    """Runs a library call with a progress bar (errors: see `guard_commands`)."""
    with counter(description, total=total, unit=unit) as advance:
        return work(advance)


def policy_names() -> list[str]:
    from generation.bandits.policies import POLICIES

    return list(POLICIES)


# so -h lists the choices; the members come from the policy registry, which mypy's Enum() types only as a literal
Policy = Enum("Policy", {name: name for name in policy_names()}, type=str)  # type: ignore[misc]
