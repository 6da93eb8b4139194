"""What a library function says while it goes on: one `warning:` line on stderr naming what it found and what it
assumed. Results go to stdout; errors are exceptions (the CLI prints them)."""

from __future__ import annotations

from rich.text import Text

from generation.progress import console


def warn(message: str) -> None:
    console.print(Text(f"warning: {message}", style="yellow"), highlight=False, soft_wrap=True)
