"""The pipeline's stages, in order: each module is one stage (generation/stages/base.py gives them their shape).

`PIPELINE` is the order the demo runs and the README's and docs/reference/stages.md's table shows (`researchy-subq stages`), `BESIDE_PIPELINE` the
stages that write what a pipeline stage writes another way (after it in the table); `REGISTRY` finds a
stage by its command name, `WRITERS` by the shard name of what it writes. A new stage is one module and one entry.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds

from generation.stages.base import Input, Stage, StageSummary
from generation.stages.budgeted import BudgetedJudgeStage
from generation.stages.corpus import CorpusStage
from generation.stages.import_labels import ImportLabelsStage
from generation.stages.index import IndexStage
from generation.stages.judge import JudgeStage
from generation.stages.pool import PoolStage
from generation.stages.questions import QuestionsStage
from generation.stages.rerank import RerankStage
from generation.stages.retrieve import RetrieveStage

PIPELINE: tuple[type[Stage], ...] = (
    QuestionsStage,
    CorpusStage,
    IndexStage,
    RetrieveStage,
    RerankStage,
    PoolStage,
    JudgeStage,
)
BESIDE_PIPELINE: tuple[type[Stage], ...] = (BudgetedJudgeStage, ImportLabelsStage)  # write what `judge` writes
REGISTRY: dict[str, type[Stage]] = {stage.name: stage for stage in (*PIPELINE, *BESIDE_PIPELINE)}
WRITERS: dict[str, type[Stage]] = {stage.writes: stage for stage in PIPELINE if stage.writes}

__all__ = [
    "Input",
    "PIPELINE",
    "REGISTRY",
    "Stage",
    "StageSummary",
    "WRITERS",
    "pipeline_table",
    "read_stage",
    "stage_hash",
]


def stage_hash(profile, shard_name: str) -> str:
    """The config hash shards named `shard_name` (bm25, rerank, candidates, judgments, ...) carry under `profile`."""
    return WRITERS[shard_name].config_hash(profile)


def read_stage(folder: str | Path, shard_name: str, profile=None, full: bool = True) -> ds.Dataset:
    """A stage's finished shards as one dataset, each checked against its record (and `profile`'s sections)."""
    return ds.dataset(WRITERS[shard_name].completed_files(Path(folder), profile, full), format="parquet")


def pipeline_table() -> str:
    """The pipeline as a Markdown table: order, command, what each stage reads and writes, and the profile sections
    its shards depend on (the README's and the docs' tables are this, and a test keeps them equal)."""
    rows = ["| # | command | reads | writes | sharded | config hash covers |", "| ---: | --- | --- | --- | --- | --- |"]
    for n, stage in enumerate((*PIPELINE, *BESIDE_PIPELINE), 1):
        reads = ", ".join(
            f"`--{given.option}` ({' + '.join(p.name for p in given.producers)})" for given in stage.reads
        )
        command = "judge --budget" if stage is BudgetedJudgeStage else stage.name
        rows.append(
            f"| {n} | `{command}` | {reads or 'raw input files'} | {stage.produces} | "
            f"{'yes' if stage.sharded else 'no'} | {', '.join(stage.sections) or '-'} |"
        )
    return "\n".join(rows)
