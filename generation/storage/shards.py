"""Sharded, resumable stage output, in the manner of datatrove: rank / world_size, completion records.

A stage writes `{out}/{name}-{i:05d}-of-{n:05d}.parquet` atomically, then a completion record
`{out}/_done/{name}-{i:05d}-of-{n:05d}.json` (rows, bytes, sha256, config hash, code version). A re-run
skips a shard whose record is present and matches; a record made under another config hash, or shards cut
for another shard count, stop the run with a clear error instead of mixing.

Lineage: a stage reading another stage's shards checks each file against its completion record (rows,
size, sha256) and that the shards were made under the config hash this profile gives the stage that wrote them
(`Stage.completed_files`, generation/stages/base.py), so a cut file or a run made with another depth is an error,
not a quietly smaller input.
Concurrency: a worker holds `{out}/_locks/{name}-{label}.lock` (host, pid, since) while it writes a shard.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import socket
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TypeVar

import pyarrow.parquet as pq

from generation import __version__
from generation.storage.atomic_files import clean_stale_tmp, pid_alive, refuse_links_under, write_text_atomic

T = TypeVar("T")
DONE_DIR = "_done"
LOCK_DIR = "_locks"


class ShardError(RuntimeError):
    pass


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ShardError(f"shard {self.index} of {self.count}: need 0 <= shard < num-shards")

    @property
    def label(self) -> str:
        return f"{self.index:05d}-of-{self.count:05d}"

    def owns_key(self, key: str) -> bool:
        """Stable assignment of a key (a qid) to a shard, whatever the input order."""
        return zlib.crc32(key.encode("utf-8")) % self.count == self.index

    def take(self, items: Sequence[T]) -> list[T]:
        """Round-robin assignment of an ordered list (input files) to shards."""
        return list(items[self.index :: self.count])


@dataclass(frozen=True)
class Completion:
    stage: str
    shard: str
    rows: int
    sha256: str
    config_hash: str
    code_version: str
    extra: dict
    bytes: int | None = None  # absent in records written before 0.1.1

    @classmethod
    def read(cls, path: Path) -> Completion:
        """A completion record, or a ShardError naming the file when it is not one."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            known = {f.name for f in fields(cls)}
            if not isinstance(data, dict) or not set(data) <= known:
                raise ValueError(f"unexpected keys {sorted(set(data) - known) if isinstance(data, dict) else data!r}")
            record = cls(**data)
            if not isinstance(record.rows, int) or not isinstance(record.sha256, str):
                raise ValueError("rows or sha256 of the wrong type")
            return record
        except (OSError, UnicodeDecodeError, ValueError, TypeError) as e:
            raise ShardError(
                f"{path}: not a valid completion record ({str(e).splitlines()[0][:120]}); "
                "remove it and its shard to redo that shard"
            ) from None


class ShardLock:
    """`{folder}/_locks/{name}.lock` made with O_EXCL, naming its holder. A lock whose holder pid is gone
    on this host is stale and taken over; the same process may take its own lock again."""

    def __init__(self, folder: Path, name: str):
        self.path = Path(folder) / LOCK_DIR / f"{name}.lock"
        self.me = {"host": socket.gethostname(), "pid": os.getpid()}

    def holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                held = self.holder()
                if held is None:
                    continue
                if held.get("host") == self.me["host"] and (
                    held.get("pid") == self.me["pid"] or not pid_alive(int(held.get("pid", 0)))
                ):
                    self.path.unlink(missing_ok=True)  # ours, or its holder died: stale
                    continue
                if held == {}:
                    raise ShardError(
                        f"{self.path}: a lock that cannot be read; if no worker is writing this shard, remove it"
                    ) from None
                raise ShardError(
                    f"{self.path.stem}: held by host {held.get('host')} pid {held.get('pid')} since "
                    f"{held.get('since')}; another worker is writing this shard (if that worker is "
                    f"gone, remove {self.path})"
                ) from None
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps({**self.me, "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
            atexit.register(self.release)  # a run that fails frees its shard; only a kill leaves a (stale) lock
            return
        raise ShardError(f"{self.path}: could not take the lock; try again")

    def release(self) -> None:
        held = self.holder()
        if held and held.get("host") == self.me["host"] and held.get("pid") == self.me["pid"]:
            self.path.unlink(missing_ok=True)


def read_record(path: Path, what: str, remedy: str) -> dict:
    """A JSON object the kit wrote (a marker, a record), or a ShardError naming the file, what it should be and
    what to do."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ShardError(f"{path}: not a valid {what} ({str(e).splitlines()[0][:120]}); {remedy}") from None
    if not isinstance(data, dict):
        raise ShardError(f"{path}: not a valid {what} (a JSON {type(data).__name__}, not an object); {remedy}")
    return data


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class StageOutput:
    """The shards of one stage in one folder."""

    def __init__(self, out: str | Path, name: str, config_hash: str):
        self.out, self.name, self.config_hash = Path(out), name, config_hash

    def path(self, shard: Shard) -> Path:
        return self.out / f"{self.name}-{shard.label}.parquet"

    def record_path(self, shard: Shard) -> Path:
        return self.out / DONE_DIR / f"{self.name}-{shard.label}.json"

    def records(self) -> list[Completion]:
        folder = self.out / DONE_DIR
        if not folder.exists():
            return []
        return [Completion.read(p) for p in sorted(folder.glob(f"{self.name}-*.json"))]

    def lock(self, shard: Shard) -> ShardLock:
        return ShardLock(self.out, f"{self.name}-{shard.label}")

    def start(self, shard: Shard) -> None:
        """Takes the shard's lock and removes temporary files a killed writer of this shard left."""
        if self.out.exists() and not self.out.is_dir():
            raise ShardError(f"{self.out}: is a file, not a folder; choose another --out")
        refuse_links_under(self.out)  # before the lock: `_locks/` or `_done/` may be the link
        self.lock(shard).acquire()
        clean_stale_tmp(
            self.out,
            [f"{self.name}-{shard.label}{ext}" for ext in (".parquet", ".trec")]
            + [f"missing_clicked-{shard.label}.tsv"],
        )
        clean_stale_tmp(self.out / DONE_DIR, [self.record_path(shard).name])
        clean_stale_tmp(self.path(shard).with_suffix(".chunks"))  # the judge's checkpointed chunks

    def check_compatible(self, shard: Shard) -> None:
        for record in self.records():
            if record.config_hash != self.config_hash:
                raise ShardError(
                    f"{self.out}: shard {record.shard} of stage {self.name} was made under config {record.config_hash}, "
                    f"this run's is {self.config_hash}; use another --out or remove the old shards"
                )
            if not record.shard.endswith(f"-of-{shard.count:05d}"):
                made = int(record.shard.split("-of-")[1])
                raise ShardError(
                    f"{self.out}: holds {self.name} shards of a run cut into {made} shard"
                    f"{'s' if made != 1 else ''}, this run asks for {shard.count}; use the same "
                    "--num-shards or another --out"
                )

    def is_done(self, shard: Shard) -> bool:
        self.check_compatible(shard)
        record_path, path = self.record_path(shard), self.path(shard)
        if not record_path.exists():
            return False
        verify(path, Completion.read(record_path), record_path)
        return True

    def mark_done(self, shard: Shard, **extra) -> Completion:
        path = self.path(shard)
        record = Completion(
            self.name,
            shard.label,
            pq.ParquetFile(path).metadata.num_rows,
            sha256_file(path),
            self.config_hash,
            __version__,
            extra,
            path.stat().st_size,
        )
        target = self.record_path(shard)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, json.dumps(asdict(record), indent=1))
        self.lock(shard).release()
        return record


def verify(path: Path, record: Completion, record_path: Path, full: bool = True) -> None:
    """The shard file still is what its completion record says: rows and size, and (full) sha256."""

    def mismatch(detail: str) -> ShardError:
        return ShardError(
            f"{path}: does not match its completion record {record_path}: {detail}; remove both "
            "and rerun that stage's shard"
        )

    if not path.exists():
        raise mismatch("the file is missing")
    size = path.stat().st_size
    if record.bytes is not None and size != record.bytes:
        raise mismatch(f"{size:,} bytes, recorded {record.bytes:,} (changed after it was recorded done)")
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except Exception as e:  # pyarrow raises ArrowInvalid or OSError for a cut or foreign file
        raise mismatch(f"not a readable Parquet file ({str(e).splitlines()[0][:100]})") from None
    if rows != record.rows:
        raise mismatch(f"{rows:,} rows, recorded {record.rows:,} (changed after it was recorded done)")
    if full and sha256_file(path) != record.sha256:
        raise mismatch("another sha256 (changed after it was recorded done)")


def skip_if_done(stage: StageOutput, shard: Shard, summary) -> bool:
    """True (and the summary says so) when the shard is already complete under this config; otherwise
    the caller now holds the shard's lock (released when the shard is marked done)."""
    if stage.is_done(shard):
        summary.skipped = True
        summary.outputs.append(stage.path(shard))
        return True
    stage.start(shard)
    if stage.is_done(shard):  # another worker finished it while we waited for the lock
        stage.lock(shard).release()
        summary.skipped = True
        summary.outputs.append(stage.path(shard))
        return True
    return False


def stage_files(
    folder: str | Path, name: str, config_hash: str | None = None, full: bool = True, sections: tuple[str, ...] = ()
) -> list[Path]:
    """The completed shard files of a stage, refusing a folder whose shards are missing, unfinished, changed
    since they were recorded done (rows, size; sha256 when `full`), or made under another `config_hash`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ShardError(f"{folder}: no such folder" if not folder.exists() else f"{folder}: not a folder")
    files = sorted(folder.glob(f"{name}-*-of-*.parquet"))
    if not files:
        raise ShardError(f"{folder}: no {name} shards ({name}-XXXXX-of-YYYYY.parquet); run that stage first")
    counts = {p.stem.rsplit("-of-", 1)[1] for p in files}
    if len(counts) != 1:
        raise ShardError(f"{folder}: {name} shards of different shard counts: {sorted(counts)}")
    expected = int(counts.pop())
    done = {p.stem for p in (folder / DONE_DIR).glob(f"{name}-*.json")}
    missing = [
        f"{name}-{Shard(i, expected).label}"
        for i in range(expected)
        if f"{name}-{Shard(i, expected).label}" not in done
    ]
    if missing:
        raise ShardError(f"{folder}: {len(missing)} of {expected} {name} shards are not complete, e.g. {missing[0]}")
    for path in files:
        record_path = folder / DONE_DIR / f"{path.stem}.json"
        record = Completion.read(record_path)
        verify(path, record, record_path, full)
        if config_hash is not None and record.config_hash != config_hash:
            raise ShardError(
                f"{path}: made under config {record.config_hash} of the profile sections "
                f"{'+'.join(sections)}, this run's profile gives {config_hash} (another "
                f"profile, or one of those sections changed, e.g. a depth); rerun {name} with this "
                "profile or use the profile it was made with"
            )
    return files
