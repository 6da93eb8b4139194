"""BM25 throughput: our `retrieve` stage vs raw Pyserini `batch_search`, same index, queries and threads.

Builds a Lucene index of the bundled sample's passages (replicated --copies times under new ids so the
index is not trivially small), uses every sample question and sub-question as a query (repeated to
--queries), and prints a table of queries per second at 1 and 2 threads. Overhead = our stage's time
over raw batch_search's, minus 1.

Usage: python scripts/bench_bm25.py [--copies 10] [--queries 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from generation.profiles.profile import load_profile
from generation.sample import RESEARCHY
from generation.stages.corpus import CorpusStage
from generation.stages.index import IndexStage
from generation.stages.questions import QuestionsStage
from generation.stages.retrieve import RetrieveStage, open_searcher
from generation.storage.atomic_files import ParquetSink
from generation.storage.schema import arrow_schema
from generation.storage.shards import stage_files


def synthetic_questions(work: Path, count: int) -> Path:
    """Sample questions and sub-questions as BM25 topics, repeated to `count` (a questions folder)."""
    QuestionsStage(None, work / "sample-questions", list(RESEARCHY.values())).run()
    texts = pq.read_table(work / "sample-questions" / "subquestions.parquet")["text"].to_pylist()
    texts += pq.read_table(work / "sample-questions" / "questions.parquet")["question"].to_pylist()
    folder = work / "questions"
    with ParquetSink(folder / "questions.parquet", "questions") as sink:
        sink.write_rows(
            {"qid": str(i), "question": texts[i % len(texts)], "split": "train", "clicked": []} for i in range(count)
        )
    pq.write_table(arrow_schema("subquestions").empty_table(), folder / "subquestions.parquet")
    return folder


def replicated_corpus(work: Path, copies: int) -> Path:
    from generation.sample import CLUEWEB22

    CorpusStage(None, work / "corpus-sample", [CLUEWEB22]).run()
    rows = pq.read_table(stage_files(work / "corpus-sample", "corpus")[0]).to_pylist()
    jsonl = work / "replicated.jsonl"
    with open(jsonl, "w") as f:
        for c in range(copies):
            for r in rows:
                f.write(
                    json.dumps({"id": f"{r['docid']}-c{c}", "contents": r["text"], "url": f"{r['url']}?c={c}"}) + "\n"
                )
    CorpusStage(None, work / "corpus", [jsonl]).run()
    return work / "corpus"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--queries", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    profile = load_profile("paper")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        summary = IndexStage(None, work / "index", replicated_corpus(work, args.copies), threads=2).run()
        questions = synthetic_questions(work, args.queries)
        qids = pq.read_table(questions / "questions.parquet")["qid"].to_pylist()
        queries = pq.read_table(questions / "questions.parquet")["question"].to_pylist()
        searcher = open_searcher(work / "index", profile.bm25)
        searcher.batch_search(queries[:200], qids[:200], k=100, threads=2)  # JIT warm-up
        table = Table(
            title=f"BM25 top-{profile.bm25.depth}: {len(queries):,} queries, {summary.documents:,} documents "
            f"(median of {args.repeats})"
        )
        for column in ("threads", "raw batch_search q/s", "raw + read hits q/s", "our stage q/s", "overhead"):
            table.add_column(column, justify="right")
        for threads in (1, 2):
            raw, raw_read, ours = [], [], []
            for repeat in range(args.repeats):
                start = time.perf_counter()
                hits = searcher.batch_search(queries, qids, k=profile.bm25.depth, threads=threads)
                raw.append(time.perf_counter() - start)
                [(h.docid, h.score) for q in qids for h in hits[q]]
                raw_read.append(time.perf_counter() - start)
                start = time.perf_counter()
                RetrieveStage(
                    profile, work / f"runs-{threads}-{repeat}", questions, work / "index", threads=threads
                ).run()
                ours.append(time.perf_counter() - start)
            r, rr, o = (statistics.median(x) for x in (raw, raw_read, ours))
            table.add_row(
                str(threads),
                f"{len(queries) / r:,.0f}",
                f"{len(queries) / rr:,.0f}",
                f"{len(queries) / o:,.0f}",
                f"{o / r - 1:+.1%}",
            )
        Console().print(table)


if __name__ == "__main__":
    main()
