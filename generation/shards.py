"""Sharded, resumable stage output, in the manner of datatrove: rank / world_size, completion records.

A stage writes `{out}/{name}-{i:05d}-of-{n:05d}.parquet` atomically, then a completion record
`{out}/_done/{name}-{i:05d}-of-{n:05d}.json` (rows, sha256, config hash, code version). A re-run skips
a shard whose record is present and matches; a record made under another config hash, or shards cut
for another shard count, stop the run with a clear error instead of mixing.
"""
from __future__ import annotations

import hashlib
import json
import os
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence, TypeVar

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from generation import __version__
from generation.storage import commit

T = TypeVar("T")
DONE_DIR = "_done"


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
        return list(items[self.index::self.count])



@dataclass(frozen=True)
class Completion:
    stage: str
    shard: str
    rows: int
    sha256: str
    config_hash: str
    code_version: str
    extra: dict


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
        return [Completion(**json.loads(p.read_text())) for p in sorted(folder.glob(f"{self.name}-*.json"))]

    def check_compatible(self, shard: Shard) -> None:
        for record in self.records():
            if record.config_hash != self.config_hash:
                raise ShardError(
                    f"{self.out}: shard {record.shard} of stage {self.name} was made under config {record.config_hash}, "
                    f"this run's is {self.config_hash}; use another --out or remove the old shards")
            if not record.shard.endswith(f"-of-{shard.count:05d}"):
                raise ShardError(f"{self.out}: holds {self.name} shards cut as {record.shard.split('-of-')[1]}, "
                                 f"this run asks for {shard.count}; use the same --num-shards or another --out")

    def is_done(self, shard: Shard) -> bool:
        self.check_compatible(shard)
        record_path, path = self.record_path(shard), self.path(shard)
        if not record_path.exists():
            return False
        record = Completion(**json.loads(record_path.read_text()))
        if not path.exists() or sha256_file(path) != record.sha256:
            raise ShardError(f"{path}: does not match its completion record {record_path}; remove both to redo it")
        return True

    def mark_done(self, shard: Shard, **extra) -> Completion:
        path = self.path(shard)
        record = Completion(self.name, shard.label, pq.ParquetFile(path).metadata.num_rows, sha256_file(path),
                            self.config_hash, __version__, extra)
        target = self.record_path(shard)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(asdict(record), indent=1))
        commit(tmp, target)
        return record


def skip_if_done(stage: StageOutput, shard: Shard, summary) -> bool:
    """True (and the summary says so) when the shard is already complete under this config."""
    if not stage.is_done(shard):
        return False
    summary.skipped_shards = 1
    summary.outputs.append(stage.path(shard))
    return True


def stage_files(folder: str | Path, name: str) -> list[Path]:
    """The completed shard files of a stage, refusing a folder whose shards are missing or unfinished."""
    folder = Path(folder)
    files = sorted(folder.glob(f"{name}-*-of-*.parquet"))
    if not files:
        raise ShardError(f"{folder}: no {name} shards ({name}-XXXXX-of-YYYYY.parquet); run that stage first")
    counts = {p.stem.rsplit("-of-", 1)[1] for p in files}
    if len(counts) != 1:
        raise ShardError(f"{folder}: {name} shards of different shard counts: {sorted(counts)}")
    expected = int(counts.pop())
    done = {p.stem for p in (folder / DONE_DIR).glob(f"{name}-*.json")}
    missing = [f"{name}-{Shard(i, expected).label}" for i in range(expected)
               if f"{name}-{Shard(i, expected).label}" not in done]
    if missing:
        raise ShardError(f"{folder}: {len(missing)} of {expected} {name} shards are not complete, e.g. {missing[0]}")
    return files


def read_stage(folder: str | Path, name: str) -> ds.Dataset:
    return ds.dataset(stage_files(folder, name), format="parquet")
