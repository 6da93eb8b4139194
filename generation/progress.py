"""Progress bars for long stages (rich): count, rate and elapsed time; and the two consoles every command prints
on: `console` (stderr: progress, notices, errors) and `results` (stdout: results, tables, YAML, JSON)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console, ConsoleDimensions
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn,
                           TimeElapsedColumn)
from rich.text import Text


class FullWidthConsole(Console):
    """A terminal's width on a terminal; unbounded when piped or logged, so no table cell is cut to fit 80 columns
    (rich's default width when it finds no terminal) and a line is one line in a log."""
    UNBOUNDED = 100_000

    @property
    def size(self) -> ConsoleDimensions:
        return super().size if self.is_terminal else ConsoleDimensions(self.UNBOUNDED, super().size.height)

    @size.setter
    def size(self, new_size) -> None:
        Console.size.fset(self, new_size)


console = FullWidthConsole(stderr=True)  # progress, notices, errors
results = FullWidthConsole()  # results, tables, YAML: what a script reads


class RateColumn(ProgressColumn):
    def __init__(self, unit: str):
        super().__init__()
        self.unit = unit

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} {self.unit}/s" if speed else f"- {self.unit}/s", style="cyan")


@contextmanager
def counter(description: str, total: int | None = None, unit: str = "records",
            enabled: bool = True) -> Iterator[Callable[..., None]]:
    """Yields advance(n=1, total=None) for a bar (a spinner until a total is known)."""
    if not enabled:
        yield lambda n=1, total=None: None
        return
    columns = [SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               RateColumn(unit), TimeElapsedColumn()]
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(description, total=total)

        def advance(n: int = 1, total: int | None = None) -> None:
            if total is not None:
                progress.update(task, total=total)
            progress.advance(task, n)

        yield advance
