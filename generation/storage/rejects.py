"""The rejects file of a run that goes on past bad records: each one written with its error, or counted by reason."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from generation.errors import InputError
from generation.storage.atomic_files import refuse_links


class Rejects:
    """Where bad records go. With `stop`, the first one raises unless a path is given; without it,
    each is counted by reason (and written to the path when there is one) and the run goes on."""

    def __init__(self, path: str | Path | None, stop: bool = True):
        self.path = Path(path) if path else None
        self.stop = stop
        self.count = 0
        self.reasons: Counter[str] = Counter()
        self._file: TextIO | None = None
        if self.path is not None:  # a link to a user's file is refused before the run writes anything
            refuse_links(self.path.parent, self.path.name)

    def reject(self, error: InputError, raw: Any, reason: str = "malformed") -> None:
        self.reasons[reason] += 1
        if self.path is None:
            if self.stop:
                raise error
            self.count += 1
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_NOFOLLOW: a link made since __init__ is refused by the OS, never written through
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
            self._file = open(os.open(self.path, flags, 0o644), "w", encoding="utf-8")
        self._file.write(json.dumps({**error.as_dict(), "record": raw}, ensure_ascii=False, default=str) + "\n")
        self.count += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Rejects:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
