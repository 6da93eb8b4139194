"""BM25 over the Lucene index: Pyserini's multi-threaded batch search, k1/b/depth/query from the profile.

Writes a runs shard (qid, docid, rank, score, stage=bm25) and the same run as a TREC run file.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv

from generation.corpus.topics import Topic, load_topics
from generation.profiles.profile import BM25, Profile
from generation.stages.base import Input, ProfiledStage, StageSummary
from generation.stages.index import IndexStage
from generation.stages.questions import QUESTIONS_FOLDER
from generation.storage.atomic_files import ParquetSink, commit, tmp_path
from generation.storage.shards import Shard, StageOutput

NAME = "bm25"
RUN_TAG = "researchy-subq-bm25"


def bm25_query(topic: Topic, config: BM25) -> str:
    if config.query == "question":
        return topic.question
    return " ".join([topic.question, *topic.subquestions])


def query_analyzer(stemmer: str):
    """The analyzer Anserini's IndexCollection builds for `-stemmer` (porter, krovetz or none): its bytecode
    calls DefaultEnglishAnalyzer.fromArguments(stemmer, keepStopwords=false, stopwords=null), so queries are
    analysed exactly as the index was. LuceneSearcher's own default is the Porter instance."""
    from generation.corpus.java import java_class

    return java_class("io.anserini.analysis.DefaultEnglishAnalyzer").fromArguments(stemmer, False, None)


def open_searcher(index: Path, config: BM25):
    from generation.corpus.docstore import require_index
    from generation.corpus.java import lucene_searcher_class
    from generation.stages.index import IndexBuildError, index_stemmer

    built_with = index_stemmer(require_index(index))
    if built_with is not None and built_with != config.stemmer:
        raise IndexBuildError(
            f"{index}: the index was built with stemmer {built_with!r} but the profile's bm25.stemmer "
            f"is {config.stemmer!r}; rebuild it with `researchy-subq index --profile ...`"
        )
    searcher = lucene_searcher_class()(str(index))
    searcher.set_bm25(config.k1, config.b)
    searcher.set_analyzer(query_analyzer(config.stemmer))
    return searcher


def search(searcher, queries: Sequence[str], qids: Sequence[str], depth: int, threads: int) -> dict[str, list]:
    """qid -> hits (docid, score), exactly as Pyserini's batch_search returns them."""
    return searcher.batch_search(list(queries), list(qids), k=depth, threads=threads)


class RunWriter:
    """A runs shard and its TREC run file (`qid Q0 docid rank score tag`), both committed atomically.
    Rows are buffered as columns and written a chunk at a time, so the hot loop builds no dicts."""

    def __init__(self, stage: StageOutput, shard: Shard, tag: str):
        self.parquet = ParquetSink(stage.path(shard), "runs")
        self.trec_path = stage.path(shard).with_suffix(".trec")
        self._trec_tmp = tmp_path(self.trec_path)
        self._trec = open(self._trec_tmp, "wb")
        self.tag, self.stage_name = tag, stage.name
        self._columns: dict[str, list] = {"qid": [], "docid": [], "rank": [], "score": []}

    def write(self, qid: str, ranked: Sequence[tuple[str, float]]) -> None:
        columns = self._columns
        columns["qid"].extend([qid] * len(ranked))
        columns["docid"].extend(d for d, _ in ranked)
        columns["rank"].extend(range(1, len(ranked) + 1))
        columns["score"].extend(s for _, s in ranked)

    def flush(self) -> None:
        columns = self._columns
        if not columns["qid"]:
            return
        n = len(columns["qid"])
        table = pa.table(
            {
                "qid": pa.array(columns["qid"], pa.string()),
                "docid": pa.array(columns["docid"], pa.string()),
                "rank": pa.array(columns["rank"], pa.int32()),
                "score": pa.array(columns["score"], pa.float32()),
                "stage": pa.array([self.stage_name] * n, pa.string()),
            }
        )
        self.parquet.write_table(table)
        trec = pa.table(
            {
                "qid": table["qid"],
                "q0": pa.array(["Q0"] * n),
                "docid": table["docid"],
                "rank": table["rank"],
                "score": pc.round(pa.array(columns["score"], pa.float64()), 6),
                "tag": pa.array([self.tag] * n),
            }
        )
        csv.write_csv(trec, self._trec, csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
        self._columns = {k: [] for k in columns}

    def close(self) -> None:
        self.flush()
        self._trec.close()
        commit(self._trec_tmp, self.trec_path)
        self.parquet.close()

    def abort(self) -> None:
        self._trec.close()
        self._trec_tmp.unlink(missing_ok=True)
        self.parquet.abort()


@dataclass(slots=True)
class RunSummary(StageSummary):
    """A run's shard (`retrieve`, `rerank`): its questions and their ranked documents."""

    queries: int = 0
    rows: int = 0


class RetrieveStage(ProfiledStage[RunSummary]):
    """BM25 top-k per question (Pyserini's batch search; the profile's k1, b, depth and query)."""

    name = "retrieve"
    produces = "`bm25-*.parquet` + `.trec`"
    writes = NAME
    reads = (
        QUESTIONS_FOLDER,
        Input("index", "Lucene index from `researchy-subq index`", (IndexStage,)),
    )
    sections = ("bm25",)
    unit = "queries"
    summary_type = RunSummary

    def __init__(
        self, profile: Profile, out: Path, questions: Path, index: Path, threads: int | None = None, chunk: int = 500
    ):
        super().__init__(profile, out, questions=questions, index=index)
        self.threads, self.chunk = threads, chunk

    def run_shard(self, shard: Shard, output: StageOutput, summary: RunSummary, progress, executor) -> dict:
        config = self.profile.bm25
        topics = load_topics(self.inputs["questions"], shard)
        searcher = open_searcher(self.inputs["index"], config)
        writer = RunWriter(output, shard, RUN_TAG)
        chunks = [topics[start : start + self.chunk] for start in range(0, len(topics), self.chunk)]

        def search_chunk(part: list[Topic]) -> dict[str, list]:
            return search(
                searcher,
                [bm25_query(t, config) for t in part],
                [t.qid for t in part],
                config.depth,
                self.threads or config.threads,
            )

        # Lucene searches chunk k+1 (the JVM runs without the GIL) while Python writes chunk k.
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(search_chunk, chunks[0]) if chunks else None
            try:
                for k, part in enumerate(chunks):
                    assert pending is not None  # chunk k was submitted before the loop or in the previous round
                    hits = pending.result()
                    pending = pool.submit(search_chunk, chunks[k + 1]) if k + 1 < len(chunks) else None
                    for topic in part:
                        ranked = [(h.docid, h.score) for h in hits.get(topic.qid, [])]
                        writer.write(topic.qid, ranked)
                        summary.rows += len(ranked)
                    writer.flush()
                    summary.queries += len(part)
                    self.tick(progress, len(part))
            except BaseException:
                if pending is not None:
                    pending.cancel()
                writer.abort()
                raise
        writer.close()
        summary.outputs.append(writer.trec_path)
        return {"queries": summary.queries}
