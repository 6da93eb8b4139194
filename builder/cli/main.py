"""`researchy-subq`, the console entry: puts the stage commands (builder.cli.stages), the release commands
(builder.cli.release), the analysis commands (builder.cli.analysis), the retriever commands (builder.cli.retriever)
and `demo` under one name. It only wires; no library module imports it, and it is the only module that imports all the command modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer
from rich.table import Table

from builder.cli import analysis as analysis_commands
from builder.cli import release as release_commands
from builder.cli import retriever as retriever_commands
from builder.cli import stages as stage_commands
from builder.cli.support import check_folder_arg, guard_commands, new_app, version_callback, with_options
from builder.command_options import option
from generation.progress import results

app = new_app("Regenerate, package, validate and publish the Researchy Questions sub-question judgments.")


@app.callback()
def researchy_subq(
    version: bool | None = typer.Option(
        None, "--version", callback=version_callback, is_eager=True, help="print the version and exit"
    ),
) -> None:
    """Regenerate, package, validate and publish the Researchy Questions sub-question judgments."""


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """Where the demo writes."""

    out: Path = option(
        Path("demo-output"),
        "--out",
        output="folder",
        help="where every stage writes: a new or empty folder, or one an earlier demo made (it is replaced)",
    )


@app.command()
@with_options
def demo(options: DemoOptions) -> None:
    """Run every stage on the bundled sample, offline on a CPU, and say what was written where."""
    from builder.cli.demo import next_steps, run_demo

    out = options.out
    check_folder_arg(out, "--out")
    written = run_demo(out)
    table = Table(title=f"researchy-subq demo: what was written under {out}")
    for column in ("stage", "output", "rows"):
        table.add_column(column)
    for stage, path, rows in written:
        table.add_row(stage, str(path.relative_to(out)), f"{rows:,}" if rows is not None else "")
    results.print(table)
    results.print("\nNext, from this folder (each line runs as printed; the publish line is a dry run):", style="bold")
    for line in next_steps(out):
        results.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)


guard_commands(app)
for commands in (stage_commands, release_commands, analysis_commands, retriever_commands):
    app.add_typer(commands.app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
