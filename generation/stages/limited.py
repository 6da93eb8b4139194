"""`judge --limit N`: the first N pairs of a shard, judged as the full run would judge them, as a smoke test before a
long job (the model loads, the GPUs are placed, the prompts fit, the levels look sane).

A limited run can never be mistaken for, or merged into, a full shard:
- it writes into its own folder beside `--out`, never inside it: `OUT.limit-N` (`work/judgments/train.limit-500`);
- its files are `limited-judgments-XXXXX-of-YYYYY.parquet` with their `_done/limited-judgments-*.json` records, a
  name no stage, release or analysis reads as judgments (they glob `judgments-*`): `build-release` on that folder
  finds no judgment shards;
- its config hash is the judge's with the limit in it, and its record says `limit` and the shard's full pair count.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from generation.profiles.profile import Profile
from generation.stages.base import Executor
from generation.stages.judge import JudgeStage, ShardJob
from generation.stages.judge_record import JudgeSummary
from generation.storage.shards import Shard, StageOutput

LIMITED = "limited-judgments"


def limited_folder(out: Path, limit: int) -> Path:
    """Where `judge --limit N --out OUT` writes: OUT.limit-N, beside OUT."""
    out = Path(out)
    return out.with_name(f"{out.name}.limit-{limit}")


class LimitedShardJob(ShardJob):
    """The shard's pairs in the full run's order, cut to the first `limit`."""

    stage: LimitedJudgeStage

    def __init__(self, stage: LimitedJudgeStage, shard: Shard):
        super().__init__(stage, shard)
        stage.shard_pairs = len(self.pairs)
        self.pairs = self.pairs[: stage.limit]
        self.n_chunks = -(-len(self.pairs) // self.chunk_size)

    def recipe(self) -> tuple[type, dict, int, int]:
        stage_class, arguments, index, count = super().recipe()
        return stage_class, {**arguments, "limit": self.stage.limit}, index, count


class LimitedJudgeStage(JudgeStage):
    """The first `limit` pairs of a shard, judged into `limited_folder(out, limit)`."""

    name = "judge-limited"
    writes = LIMITED
    produces = "`limited-judgments-*.parquet` (a smoke test: no release reads them)"
    retries_failed = False  # a smoke test: its failed pairs say what to fix, and no release reads it

    def __init__(
        self, profile: Profile, out: Path, subquestions: Path, candidates: Path, index: Path, limit: int, judge=None
    ):
        if limit < 1:
            raise ValueError(f"limit {limit}: must be >= 1")
        super().__init__(profile, out, subquestions, candidates, index, judge)
        self.limit, self.shard_pairs = limit, 0

    def output(self) -> StageOutput:
        limited = hashlib.sha256(f"{self.config_hash(self.profile)}:limit={self.limit}".encode()).hexdigest()[:16]
        return StageOutput(self.out, self.writes, limited)

    def new_summary(self, shard: Shard) -> JudgeSummary:
        summary = super().new_summary(shard)
        summary.limit = self.limit
        return summary

    def chunk_work(self, shard: Shard) -> LimitedShardJob:
        return LimitedShardJob(self, shard)

    def run_shard(
        self, shard: Shard, output: StageOutput, summary: JudgeSummary, progress, executor: Executor | None
    ) -> dict:
        record = super().run_shard(shard, output, summary, progress, executor)
        summary.shard_pairs = self.shard_pairs
        return {**record, "limit": self.limit, "shard_pairs": self.shard_pairs}


def limited_judge_stage(
    profile: Profile, out: Path, subquestions: Path, candidates: Path, index: Path, limit: int
) -> LimitedJudgeStage:
    return LimitedJudgeStage(profile, limited_folder(out, limit), subquestions, candidates, index, limit)
