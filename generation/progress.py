"""Progress for long stages, on stderr. On a terminal: a rich bar with count, rate and elapsed time. In a log
(stderr to a file, a Slurm or Ray job's output): a plain line every `log_interval()` seconds with what is done, the
rate and the time left, as datatrove's workers log theirs, and one line when the stage ends, so a batch job that
stalls or runs shows it (a live bar draws nothing into a file). The two consoles every command prints on:
`console` (stderr: progress, notices, errors) and `results` (stdout: results, tables, YAML, JSON)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console, ConsoleDimensions
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text


class FullWidthConsole(Console):
    """A terminal's width on a terminal; unbounded when piped or logged, so no table cell is cut to fit 80 columns
    (rich's default width when it finds no terminal) and a line is one line in a log."""

    UNBOUNDED = 100_000

    @property
    def size(self) -> ConsoleDimensions:
        return super().size if self.is_terminal else ConsoleDimensions(self.UNBOUNDED, super().size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        # rich's own setter: mypy reads `Console.size` as the getter, so take the property object from the class
        vars(Console)["size"].fset(self, new_size)


console = FullWidthConsole(stderr=True)  # progress, notices, errors
results = FullWidthConsole()  # results, tables, YAML: what a script reads

INTERVAL_ENV = "RESEARCHY_SUBQ_PROGRESS_INTERVAL"  # seconds between progress lines in a log
DEFAULT_INTERVAL = 30.0


def rate_text(per_second: float | None, unit: str) -> str:
    """A rate with two significant digits below 10 ("0.35 questions/s", never a rounded "0 questions/s")."""
    if not per_second:
        return f"- {unit}/s"
    return f"{per_second:,.0f} {unit}/s" if per_second >= 10 else f"{per_second:.2g} {unit}/s"


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def log_interval() -> float:
    value = os.environ.get(INTERVAL_ENV)
    if value is None:
        return DEFAULT_INTERVAL
    try:
        seconds = float(value)
        if seconds > 0:
            return seconds
    except ValueError:
        pass
    console.print(
        f"notice: {INTERVAL_ENV}={value!r} is not a number of seconds > 0; progress lines every {DEFAULT_INTERVAL:g} s",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return DEFAULT_INTERVAL


def counting(done: int, total: int | None) -> bool:
    """False for work that has neither counted anything nor a total (validate's checks): it shows as running, with
    its elapsed time, not as "0/?" or "0 checks/s"."""
    return bool(done) or total is not None


class CountColumn(ProgressColumn):
    """ "done/total", or the count alone while the total is unknown (never "n/?")."""

    def render(self, task) -> Text:
        if not counting(task.completed, task.total):
            return Text("")
        done = f"{int(task.completed):,}"
        return Text(f"{done}/{int(task.total):,}" if task.total is not None else done, style="progress.download")


class RateColumn(ProgressColumn):
    def __init__(self, unit: str):
        super().__init__()
        self.unit = unit

    def render(self, task) -> Text:
        if not counting(task.completed, task.total):
            return Text("")
        return Text(rate_text(task.finished_speed or task.speed, self.unit), style="cyan")


class LogLines:
    """The plain progress lines of one stage: a daemon thread prints one every `interval` seconds, whether or not
    the count moved (a stall shows as the same count with a falling rate)."""

    def __init__(self, description: str, total: int | None, unit: str, interval: float):
        self.description, self.total, self.unit, self.interval = description, total, unit, interval
        self.done = 0
        self.started = time.monotonic()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"progress {description}", daemon=True)

    def advance(self, n: int = 1, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        self.done += n

    def line(self, final: bool = False) -> str:
        elapsed = time.monotonic() - self.started
        if not counting(self.done, self.total):
            return f"{self.description}: " + (
                f"done in {clock(elapsed)}" if final else f"running, {clock(elapsed)} elapsed"
            )
        rate = self.done / elapsed if elapsed > 0 else None
        if final:
            return f"{self.description}: done, {self.done:,} {self.unit} in {clock(elapsed)} ({rate_text(rate, self.unit)})"
        count = f"{self.done:,} {self.unit}"
        if self.total:
            count = f"{self.done:,}/{self.total:,} {self.unit} ({self.done / self.total:.0%})"
        parts = [count, rate_text(rate, self.unit)]
        if self.total and rate:
            parts.append(f"ETA {clock(max(self.total - self.done, 0) / rate)}")
        parts.append(f"{clock(elapsed)} elapsed")
        return f"{self.description}: " + ", ".join(parts)

    def _print(self, text: str) -> None:
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            self._print(self.line())

    def __enter__(self) -> LogLines:
        self.thread.start()
        return self

    def __exit__(self, kind, error, trace) -> None:
        self.stopped.set()
        self.thread.join()
        if kind is None:
            self._print(self.line(final=True))


def to_log() -> bool:
    """True when stderr is not a live terminal (a file, a pipe, a batch job's log)."""
    return not console.is_interactive and not console.is_jupyter


@contextmanager
def counter(
    description: str, total: int | None = None, unit: str = "records", enabled: bool = True
) -> Iterator[Callable[..., None]]:
    """Yields advance(n=1, total=None): a bar on a terminal (a running count until a total is known), plain
    lines in a log."""
    if not enabled:
        yield lambda n=1, total=None: None
        return
    if to_log():
        with LogLines(description, total, unit, log_interval()) as lines:
            yield lines.advance
        return
    columns = [
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        CountColumn(),
        RateColumn(unit),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(description, total=total)

        def advance(n: int = 1, total: int | None = None) -> None:
            if total is not None:
                progress.update(task, total=total)
            progress.advance(task, n)

        yield advance
