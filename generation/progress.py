"""Progress bars for long stages (rich): count, rate and elapsed time."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn,
                           TimeElapsedColumn)
from rich.text import Text

console = Console(stderr=True)


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
