"""Bad input: one error type that names where it is. A run that goes on writes its rejects with storage/rejects.py."""

from __future__ import annotations

import gzip
import json
import traceback
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError


class InputError(ValueError):
    """A record that cannot be used, with its file, line (or row) and field."""

    reason = "malformed"  # the class of problem, as rejects count them (generation/labels/importer.py sets others)

    def __init__(
        self, path: str | Path, line: int, message: str, field: str | None = None, record_id: str | None = None
    ):
        self.path, self.line, self.message = str(path), line, message
        self.field, self.record_id = field, record_id
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}"
        if self.record_id is not None:
            where += f" (id {self.record_id})"
        field = f" field {self.field!r}:" if self.field else ""
        return f"{where}:{field} {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.path, "line": self.line, "id": self.record_id, "field": self.field, "error": self.message}


def read_json_file(path: str | Path, what: str) -> Any:
    """The JSON document in `path`; an InputError naming the file (and line) when it cannot be read or parsed, saying
    it should be `what` (e.g. "the file `researchy-subq agreement --json` wrote")."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(path, 0, f"cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise InputError(path, 0, f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise InputError(path, e.lineno, f"not JSON ({e.msg}); pass {what}") from None


def first_problem(error: ValidationError) -> str:
    """The first problem of a pydantic ValidationError, as `key.path: message`. A value of the wrong type is shown as
    JSON (a kit file is read strictly: "4486" is not a count and true is not 1, and the reader sees which it held)."""
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top)"
    message = first["msg"]
    if first["type"].endswith("_type") and not isinstance(first.get("input"), dict | list):
        message += f", not {json.dumps(first.get('input'), default=str)[:60]}"
    return f"{where}: {message}"


class ArgumentError(ValueError):
    """A command-line value a library function refuses (named with its option), e.g. `--split ../x`."""


class BackendError(RuntimeError):
    """A judge backend that cannot judge under this profile (a server down, a wrong URL, key or model): one line,
    named with the backend, before or instead of a chunk."""


def read_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, raw bytes) of a text file, gunzipped when it ends in .gz; a file that cannot be read
    to its end (not gzip, truncated, unreadable) is an InputError naming it and the line reached."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rb") as f:
            for lineno, line in enumerate(f, start=1):
                yield lineno, line
    except EOFError:
        raise InputError(path, lineno + 1, "truncated gzip file (it ends before its end-of-stream marker)") from None
    except (OSError, zlib.error) as e:
        kind = "not a gzip file or corrupt" if path.name.lower().endswith(".gz") else "cannot be read"
        detail = (e.strerror if isinstance(e, OSError) else None) or e  # zlib.error has no strerror
        raise InputError(path, lineno + 1, f"{kind} ({detail})") from None


class PartlyFailed(RuntimeError):
    """A backend call that answered some of its items and not others: `answers` holds a place for every item (what
    stands at a failed one means nothing), `failures` the error of each failed position. The judge keeps the
    answers and marks the failed pairs, instead of trying the whole call again."""

    def __init__(self, answers, failures: dict[int, BaseException]):
        self.answers, self.failures = answers, failures
        super().__init__(
            f"{len(failures)} of {len(answers)} items failed, the first with: {next(iter(failures.values()))}"
        )

    def merged(self) -> list:
        return [self.failures.get(i, answer) for i, answer in enumerate(self.answers)]


def without_frames(error: BaseException) -> BaseException:
    """`error` with its traceback's frames cleared and dropped: a failed forward's locals (its GPU tensors) are
    freed now, not when the stored error is graded with the rest of its chunk."""
    traceback.clear_frames(error.__traceback__)  # frames still executing are left as they are
    return error.with_traceback(None)
