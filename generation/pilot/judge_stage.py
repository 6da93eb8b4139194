"""One setting of `researchy-subq pilot`: the judge stage run over the pilot's sample only.

It is the judge stage (generation/stages/judge.py) with its pairs cut to the sample's, in the order `judge` gives
them, so chunks, resume after a kill, retries of failed pairs, Ray and the completion records are the judge's own.
Like `judge --limit` (generation/stages/limited.py), it can never be taken for a full shard: its files are
`pilot-judgments-XXXXX-of-YYYYY.parquet` (no release or analysis reads them as judgments), and its config hash is
the judge's with the sample's sha256 in it, so a folder judged over another sample is refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from generation.profiles.profile import Profile
from generation.stages.judge import JudgeStage, ShardJob
from generation.storage.shards import Shard, StageOutput, sha256_file

PILOT_JUDGMENTS = "pilot-judgments"


@dataclass(frozen=True)
class SampledShard(Shard):
    """A shard of the sample: the questions it owns among those the sample drew (the same files and label)."""

    questions: frozenset[str] = field(default=frozenset(), compare=False)

    def owns_key(self, key: str) -> bool:
        return key in self.questions and super().owns_key(key)


class SampledShardJob(ShardJob):
    """The shard's pairs in the full run's order, cut to the sample's."""

    stage: PilotJudgeStage

    def __init__(self, stage: PilotJudgeStage, shard: Shard):
        super().__init__(stage, SampledShard(shard.index, shard.count, stage.sample_questions))
        self.auxiliary()  # r3a's round one looks at every candidate of the question, not only the sampled ones
        self.pairs = [p for p in self.pairs if (p["subq_id"], p["docid"]) in stage.sample_pairs]
        self.n_chunks = -(-len(self.pairs) // self.chunk_size)

    def recipe(self) -> tuple[type, dict, int, int]:
        stage_class, arguments, index, count = super().recipe()
        return stage_class, {**arguments, "sample": str(self.stage.sample)}, index, count


class PilotJudgeStage(JudgeStage):
    """The sample's pairs of a shard, judged by one of the pilot's settings."""

    name = "pilot-judge"
    writes = PILOT_JUDGMENTS
    produces = "`pilot-judgments-*.parquet` (one pilot setting; no release reads them)"

    def __init__(
        self,
        profile: Profile,
        out: Path,
        subquestions: Path,
        candidates: Path,
        index: Path,
        sample: Path,
        judge=None,
    ):
        super().__init__(profile, out, subquestions, candidates, index, judge)
        self.sample = Path(sample)
        table = pq.read_table(self.sample, columns=["qid", "subq_id", "docid"])
        self.sample_pairs = set(zip(table["subq_id"].to_pylist(), table["docid"].to_pylist()))
        self.sample_questions = frozenset(table["qid"].to_pylist())
        self.sample_sha256 = sha256_file(self.sample)

    def output(self) -> StageOutput:
        hashed = f"{self.config_hash(self.profile)}:sample={self.sample_sha256}"
        return StageOutput(self.out, self.writes, hashlib.sha256(hashed.encode()).hexdigest()[:16])

    def chunk_work(self, shard: Shard) -> SampledShardJob:
        return SampledShardJob(self, shard)
