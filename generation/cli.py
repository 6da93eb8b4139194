"""`researchy-subq`: one sub-command per stage, each a thin wrapper over a library function."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from generation.errors import InputError
from generation.profiles import ProfileError, bundled_profiles, load_profile, profile_path
from generation.progress import console, counter
from generation.researchy import Decomposition, read_researchy

app = typer.Typer(help="Regenerate, package and validate the Researchy Questions sub-question judgments.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


def fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(1)


@app.command()
def questions(
    input: List[Path] = typer.Option(..., "--input", help="Researchy records: .jsonl, .jsonl.gz or .parquet (repeatable)"),
    out: Path = typer.Option(..., "--out", help="folder for questions.parquet and subquestions.parquet"),
    split: str = typer.Option("train", help="split name stored with each question"),
    decomposition: Decomposition = typer.Option(Decomposition.subquestions, help="which sub-questions to keep"),
    rejects: Optional[Path] = typer.Option(None, help="write malformed records here and go on, instead of stopping"),
) -> None:
    """Read Researchy Questions records into the questions and subquestions tables."""
    for path in input:
        if not path.exists():
            fail(f"{path}: no such file")
    try:
        with counter(f"reading {split} questions") as advance:
            summary = read_researchy(input, out, split, decomposition, rejects, progress=advance)
    except InputError as e:
        fail(f"{e}\n(pass --rejects FILE to set malformed records aside and go on)")
    console.print(f"{summary.questions:,} questions, {summary.subquestions:,} sub-questions, "
                  f"{summary.clicked:,} clicked documents -> {out}")
    if rejects is not None:
        console.print(f"{summary.rejected:,} malformed records -> {rejects}")


@app.command()
def profiles(name: Optional[str] = typer.Argument(None, help="a bundled profile name or a YAML path")) -> None:
    """List the bundled profiles, or validate and print one."""
    if name is None:
        for bundled in bundled_profiles():
            console.print(f"{bundled:10} {load_profile(bundled).description}")
        return
    try:
        profile = load_profile(name)
    except ProfileError as e:
        fail(str(e))
    console.print(f"# {profile_path(name)} (config hash {profile.config_hash()})")
    console.print(profile_path(name).read_text(), highlight=False, markup=False)


@app.command()
def demo(out: Path = typer.Option(Path("demo-output"), help="where every stage writes")) -> None:
    """Run every stage on the bundled sample, offline on a CPU, and say what was written where."""
    from generation.demo import run_demo

    written = run_demo(out)
    table = Table(title="researchy-subq demo: what was written")
    for column in ("stage", "output", "rows"):
        table.add_column(column)
    for stage, path, rows in written:
        table.add_row(stage, str(path), f"{rows:,}" if rows is not None else "")
    console.print(table)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
