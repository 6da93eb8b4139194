"""The commands' error lines for a plain Python script (examples/): `run(main)` calls `main()` as builder/cli/support.py
`guarded` calls a command, so bad input ends in one line `error: ...` on stderr and exit status 1, never a traceback
(RESEARCHY_SUBQ_DEBUG=1 shows it)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import typer

from builder.cli.support import guarded


def run(main: Callable[[], None]) -> None:
    """`main()`, its errors as the commands print them: `fail` (builder/cli/support.py) and the kit's known errors
    end in their one line and exit status 1."""
    try:
        guarded(main)()
    except typer.Exit as e:  # what `fail` raises once its line is printed: a plain script has no typer to catch it
        sys.exit(e.exit_code)
