"""Atomic, streaming Parquet output: a file appears under its name only once it is complete.

Also the rules every writer follows: temporary files get unique names (`.NAME.tmp-<pid>-<random>`, so two
processes never write the same one), no file is written through a symbolic link (`refuse_links`, the one guard), a
run that replaces a whole folder builds the new one beside it (`staged_folder`), and the kit replaces only folders it
made itself (`claim_folder`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from generation.storage.schema import arrow_schema, conform

COMPRESSION = "zstd"
MARKER = ".researchy-subq"  # written into every folder the kit may later wipe and rebuild


class OwnershipError(RuntimeError):
    """A folder the kit would replace, but did not make."""


class LinkRefused(OwnershipError):
    """A path the kit would write that is a symbolic link, or leads out of the folder it was given."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def tmp_path(final: str | Path) -> Path:
    """A unique temporary name beside `final`: `.NAME.tmp-<pid>-<random>`. Every writer starts here, so this is where
    `final` is checked by the one link guard (`refuse_links`): a link at `final` is refused before anything is
    written, never replaced by the rename nor written through."""
    final = Path(final)
    refuse_links(final.parent, final.name)
    return final.with_name(f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def commit(tmp: Path, final: Path) -> None:
    """fsync `tmp`, rename it onto `final` and fsync the folder, so a crash leaves old or new, never half."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(final.parent)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """`text` as the whole of `path`, atomically (`replace_file`): every text and JSON file the kit writes."""
    path = Path(path)
    return replace_file(path.parent, path.name, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def refuse_links(folder: str | Path, *names: str | Path, given_as: str = "", instead: str = "folder") -> None:
    """The one link guard, which every writer (`tmp_path`, `refuse_links_under`) and every output option of the CLI
    (builder/cli/support.py `output_option`) goes through. Before the kit writes `names` (relative paths) under
    `folder`: neither a name nor a folder on its way is a symbolic link, and none leads out of `folder`. A user's file
    that a link points to is never written through (nor silently replaced by the kit's); the link is refused with one
    line naming it, after `given_as` (the option and value it came from, e.g. `--out OUT: `), and asking for another
    folder (or `instead`)."""
    folder = Path(folder)
    root = folder.resolve()
    for name in names:
        path = folder
        for part in Path(name).parts:
            path = path / part
            if path.is_symlink():
                raise LinkRefused(
                    f"{given_as}{path}: is a symbolic link (to {os.readlink(path)}); researchy-subq writes no file "
                    f"through a link: remove the link, or choose another {instead}"
                )
        if not path.resolve().is_relative_to(root):
            raise LinkRefused(
                f"{given_as}{path}: leads out of {folder}; researchy-subq writes only inside the folder it is given"
            )


def replace_file(folder: str | Path, name: str | Path, write: Callable[[Path], object]) -> Path:
    """`folder/name` written by `write(temporary path)` and then renamed into place (old or new, never half),
    refusing a link on the way (`refuse_links`)."""
    refuse_links(folder, name)
    final = Path(folder) / name
    tmp = tmp_path(final)
    try:
        write(tmp)
        commit(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# a temporary name, and SQLite's files beside a temporary database (its rollback journal, or WAL and shared memory)
_TMP = re.compile(r"^\.(?P<name>.+)\.tmp(?:-(?P<pid>\d+)(?:-[0-9a-f]+)?)?(?:-journal|-wal|-shm)?$")


def is_temporary(name: str) -> bool:
    """Whether `name` is a writer's temporary file (`tmp_path`), or SQLite's beside one."""
    return _TMP.match(name) is not None


def clean_stale_tmp(folder: str | Path, names: Iterable[str] | None = None) -> list[Path]:
    """Removes temporary files left by killed writers of `names` (all when None) in `folder`: any whose
    writer pid is gone, and old-style ones without a pid; a live writer's file on this host is kept."""
    folder, wanted = Path(folder), None if names is None else set(names)
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for path in folder.iterdir():
        match = _TMP.match(path.name)
        if not match or (wanted is not None and match["name"] not in wanted):
            continue
        if match["pid"] and int(match["pid"]) != os.getpid() and pid_alive(int(match["pid"])):
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def refuse_links_under(folder: str | Path, given_as: str = "") -> None:
    """The guard every writer of a user's output folder shares (texts, training-files, train, pilot, each stage's
    shards, every folder option of the CLI): no path already under `folder` is a symbolic link (`refuse_links` on
    each, since a file can only be written through a link that exists). `folder` itself may be a link: the user
    named it."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    present = []
    for top, dirs, files in os.walk(folder):  # does not follow links: a linked folder is refused, not entered
        present += [Path(top, name).relative_to(folder) for name in (*dirs, *files)]
    refuse_links(folder, *present, given_as=given_as)


def files_under(folder: str | Path) -> list[str]:
    """Every file under `folder`, as sorted relative POSIX paths; a link under it refused (`refuse_links_under`)."""
    folder = Path(folder)
    refuse_links_under(folder)
    return sorted(Path(top, name).relative_to(folder).as_posix() for top, _, names in os.walk(folder) for name in names)


def prepare_output_folder(folder: str | Path) -> None:
    """Before a writer that owns `folder` (texts, training-files, a model folder) writes into it: no link under it
    (`refuse_links_under`), and the temporary files a killed earlier run left in it or its subfolders removed
    (`clean_stale_tmp`)."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    refuse_links_under(folder)
    for top, _, _ in os.walk(folder):
        clean_stale_tmp(top)


RENAME_EXCHANGE = 2  # linux/fs.h: renameat2 swaps the two paths in one step


def exchange(first: Path, second: Path) -> bool:
    """Swaps two existing paths in one atomic step (Linux `renameat2(RENAME_EXCHANGE)`, man 2 rename); False where the
    system or the file system has no such call, and nothing was changed."""
    rename = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if rename is None:
        return False
    at_cwd = -100  # AT_FDCWD: the paths are relative to the working directory (or absolute)
    if rename(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(error, os.strerror(error), str(first), None, str(second))


@contextmanager
def staged_folder(final: str | Path) -> Iterator[Path]:
    """A new run's folder, written beside `final` under a temporary name (`.NAME.tmp-<pid>-<random>`) and swapped in
    for `final` only when the block ends without an error; on an error or a refusal it is removed and `final` is as it
    was. The swap is one atomic exchange where the system has it (Linux), so a kill at any moment leaves `final` whole,
    the earlier run or the new one; elsewhere it is two renames (`final` aside, the new folder in), and a kill between
    them (microseconds) leaves no `final`. Either way the folder left beside it is removed by the next run
    (`clean_stale_tmp`). When `final` is a link the user named, the swap happens where it points."""
    final = Path(final)
    real = final.resolve() if final.is_symlink() else final
    real.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_tmp(real.parent, [real.name])
    stage = tmp_path(real)
    stage.mkdir()
    try:
        yield stage
        if real.exists() and exchange(stage, real):
            fsync_dir(real.parent)  # `stage` now holds the earlier run, removed below
        else:
            earlier = tmp_path(real) if real.exists() else None
            if earlier is not None:
                os.rename(real, earlier)
            os.rename(stage, real)
            fsync_dir(real.parent)
            if earlier is not None:
                shutil.rmtree(earlier)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def claim_folder(path: str | Path, what: str, owned_by: tuple[str, ...] = (MARKER,)) -> Path:
    """Makes `path` ready to be (re)built by the kit: absent or empty folders are created and marked; a
    folder holding one of `owned_by` (a marker or manifest the kit wrote there) is the kit's and may be
    replaced; anything else is refused with one line. `--force` is deliberately not an option here."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OwnershipError(f"{path}: is a file, not a folder; choose another {what} folder")
    if path.is_dir() and any(path.iterdir()) and not any((path / name).is_file() for name in owned_by):
        raise OwnershipError(
            f"{path}: exists and was not made by researchy-subq (no {' or '.join(owned_by)} in it); "
            f"it is left untouched: choose a new or empty {what} folder"
        )
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER
    if not marker.exists():
        write_text_atomic(marker, json.dumps({"made_by": "researchy-subq", "what": what}) + "\n")
    return path


def reset_claimed_folder(path: str | Path, what: str) -> Path:
    """`claim_folder`, then empty it (it is the kit's) and mark it again."""
    path = claim_folder(path, what)
    shutil.rmtree(path)
    return claim_folder(path, what)


def read_batches(files: Iterable[Path], table: str, batch_rows: int) -> Iterator[tuple[Path, pa.Table]]:
    """The rows of `files` (shards of the schema-module `table`), `batch_rows` at a time, each batch in the current
    layout of `table` (`conform`), with the file it came from."""
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows):
            yield path, conform(pa.Table.from_batches([batch]), table)


class ParquetSink:
    """Writes rows of one schema-module table to `path` in row groups, then renames it into place."""

    def __init__(self, path: str | Path, table: str, rows_per_batch: int = 50_000):
        self.path = Path(path)
        self.schema = arrow_schema(table)
        self.rows_per_batch = rows_per_batch
        self.rows = 0
        self._pending: list[dict] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = tmp_path(self.path)
        self._writer = pq.ParquetWriter(self._tmp, self.schema, compression=COMPRESSION)

    def write_rows(self, rows: Iterable[dict]) -> None:
        self._pending.extend(rows)
        if len(self._pending) >= self.rows_per_batch:
            self._flush()

    def write_table(self, table: pa.Table) -> None:
        self._flush()
        self._writer.write_table(table.select(self.schema.names).cast(self.schema))
        self.rows += table.num_rows

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.Table.from_pylist(self._pending, schema=self.schema))
            self.rows += len(self._pending)
            self._pending = []

    def close(self) -> Path:
        self._flush()
        self._writer.close()
        commit(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        self._writer.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> ParquetSink:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
