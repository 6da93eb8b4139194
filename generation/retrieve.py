"""BM25 over the Lucene index: Pyserini's multi-threaded batch search, k1/b/depth/query from the profile.

Writes a runs shard (qid, docid, rank, score, stage=bm25) and the same run as a TREC run file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from generation.profiles import BM25, Profile
from generation.shards import Shard, StageOutput
from generation.storage import ParquetSink, commit
from generation.topics import Topic, load_topics

NAME = "bm25"
RUN_TAG = "researchy-subq-bm25"


@dataclass
class RunSummary:
    queries: int = 0
    rows: int = 0
    skipped_shards: int = 0
    outputs: list[Path] = field(default_factory=list)


def bm25_query(topic: Topic, config: BM25) -> str:
    if config.query == "question":
        return topic.question
    return " ".join([topic.question, *topic.subquestions])


def open_searcher(index: Path, config: BM25):
    from generation.java import lucene_searcher_class

    searcher = lucene_searcher_class()(str(index))
    searcher.set_bm25(config.k1, config.b)
    return searcher


def search(searcher, queries: Sequence[str], qids: Sequence[str], depth: int, threads: int) -> dict[str, list]:
    """qid -> hits (docid, score), exactly as Pyserini's batch_search returns them."""
    return searcher.batch_search(list(queries), list(qids), k=depth, threads=threads)


def trec_lines(qid: str, ranked: Sequence[tuple[str, float]], tag: str) -> str:
    return "".join(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n" for rank, (docid, score) in enumerate(ranked, 1))


class RunWriter:
    """A runs shard and its TREC run file, both committed atomically."""

    def __init__(self, stage: StageOutput, shard: Shard, tag: str):
        self.parquet = ParquetSink(stage.path(shard), "runs")
        self.trec_path = stage.path(shard).with_suffix(".trec")
        self._trec_tmp = self.trec_path.with_name(f".{self.trec_path.name}.tmp")
        self._trec = open(self._trec_tmp, "w", encoding="utf-8")
        self.tag, self.stage_name = tag, stage.name

    def write(self, qid: str, ranked: Sequence[tuple[str, float]]) -> None:
        self.parquet.write_rows({"qid": qid, "docid": d, "rank": r, "score": s, "stage": self.stage_name}
                                for r, (d, s) in enumerate(ranked, 1))
        self._trec.write(trec_lines(qid, ranked, self.tag))

    def close(self) -> None:
        self._trec.close()
        commit(self._trec_tmp, self.trec_path)
        self.parquet.close()

    def abort(self) -> None:
        self._trec.close()
        self._trec_tmp.unlink(missing_ok=True)
        self.parquet.abort()


def retrieve(profile: Profile, questions: Path, index: Path, out: Path, shard: Shard = Shard(),
             threads: int | None = None, chunk: int = 4096, progress=None) -> RunSummary:
    config = profile.bm25
    stage = StageOutput(out, NAME, profile.config_hash("bm25"))
    summary = RunSummary()
    if stage.is_done(shard):
        summary.skipped_shards = 1
        summary.outputs.append(stage.path(shard))
        return summary
    topics = load_topics(questions, shard)
    searcher = open_searcher(index, config)
    writer = RunWriter(stage, shard, RUN_TAG)
    try:
        for start in range(0, len(topics), chunk):
            part = topics[start:start + chunk]
            hits = search(searcher, [bm25_query(t, config) for t in part], [t.qid for t in part], config.depth,
                          threads or config.threads)
            for topic in part:
                ranked = [(h.docid, h.score) for h in hits.get(topic.qid, [])]
                writer.write(topic.qid, ranked)
                summary.rows += len(ranked)
            summary.queries += len(part)
            if progress is not None:
                progress(len(part))
    except BaseException:
        writer.abort()
        raise
    writer.close()
    stage.mark_done(shard, queries=summary.queries)
    summary.outputs += [stage.path(shard), writer.trec_path]
    return summary
