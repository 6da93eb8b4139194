"""The judge stage's own CPU overhead, with an instant judge backend (a benchmark fixture that answers "3" to
every prompt at no cost): pair layout, document fetch from the Lucene index, the cut to `context_words`,
prompt building, tokenisation and chunk writes, as the `judge` stage runs them.

Inputs are laid out like the paper's: 14 sub-questions per question and 18.87 candidates per question
(24,316,320 / 1,288,976 pairs per sub-question), every candidate a distinct document of web-like length
(log-normal word counts, median --median-words, so some documents pass the 2,048-word cut), drawn from the
words of the bundled ClueWeb22-format sample at their frequencies. The corpus goes through the kit's own `corpus` and `index` stages.

The GPU side it is compared with is one node of 4 H100s, at the pairs/s that `plan`'s FLOP arithmetic gives
for the paper profile (Llama-3.3-70B, the assumed 2,048-word context at 2900/2048 tokens a word, 40% MFU).
The tokenizer is MiniLM's WordPiece standing in for Llama-3's (not on disk), without a chat template.

Usage: python scripts/bench_judge_overhead.py [--questions 200] [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from generation.judging.judges import LLMJudge
from generation.planning.plan import (
    LLAMA3_TOKENS_PER_WORD,
    PAPER_PAIRS,
    PAPER_PAIRS_PER_SUBQUESTION,
    ModelSize,
    Scenario,
    node_pairs_per_second,
)
from generation.profiles.model_paths import MINILM, resolve_model
from generation.profiles.profile import load_profile
from generation.sample import CLUEWEB22
from generation.stages.corpus import CorpusStage
from generation.stages.index import IndexStage
from generation.stages.judge import JudgeStage
from generation.storage.atomic_files import ParquetSink
from generation.storage.schema import conform
from generation.storage.shards import Shard, StageOutput

SUBQUESTIONS_PER_QUESTION = 14
CANDIDATES_PER_QUESTION = round(PAPER_PAIRS_PER_SUBQUESTION)


class InstantBackend:
    """Answers every prompt at once: what remains is the stage's own cost."""

    def __init__(self):
        self.sequences = 0
        self.tokens = 0

    def generate(self, sequences, max_new_tokens: int) -> list[str]:
        self.sequences += len(sequences)
        self.tokens += sum(len(s) for s in sequences)
        return ["3"] * len(sequences)

    def next_token_logprobs(self, sequences, token_ids):
        self.sequences += len(sequences)
        return [[0.0] * len(token_ids) for _ in sequences]


def sample_vocabulary() -> tuple[list[str], list[int]]:
    """Words of the bundled ClueWeb22-format sample with their frequencies (English web text)."""
    counts: Counter = Counter()
    for path in sorted(CLUEWEB22.rglob("*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                counts.update(json.loads(line)["Clean-Text"].split())
    words = counts.most_common()
    return [w for w, _ in words], [n for _, n in words]


def web_text(rng: random.Random, vocabulary: list[str], weights: Sequence[float], words: int) -> str:
    return " ".join(rng.choices(vocabulary, weights, k=words))


def make_inputs(work: Path, questions: int, median_words: int, profile, seed: int = 0) -> dict:
    rng = random.Random(seed)
    vocabulary, weights = sample_vocabulary()
    documents = questions * CANDIDATES_PER_QUESTION
    raw = work / "raw" / "docs.jsonl"
    raw.parent.mkdir(parents=True, exist_ok=True)
    with open(raw, "w") as f:
        for i in range(documents):
            words = max(20, min(20_000, int(rng.lognormvariate(math.log(median_words), 0.9))))
            f.write(
                json.dumps(
                    {
                        "id": f"doc{i:08d}",
                        "contents": web_text(rng, vocabulary, weights, words),
                        "url": f"https://example.org/{i}",
                    }
                )
                + "\n"
            )
    CorpusStage(None, work / "corpus", [raw]).run()
    IndexStage(None, work / "index", work / "corpus").run()
    folder = work / "questions"
    folder.mkdir(parents=True, exist_ok=True)
    qids = [str(1_000_000 + q) for q in range(questions)]
    pq.write_table(
        conform(
            pa.table(
                {
                    "qid": qids,
                    "question": [f"question {q}?" for q in qids],
                    "split": ["train"] * questions,
                    "clicked": [[]] * questions,
                }
            ),
            "questions",
        ),
        folder / "questions.parquet",
    )
    pq.write_table(
        conform(
            pa.table(
                {
                    "subq_id": [f"{q}-{k}" for q in qids for k in range(SUBQUESTIONS_PER_QUESTION)],
                    "qid": [q for q in qids for _ in range(SUBQUESTIONS_PER_QUESTION)],
                    "text": [
                        web_text(rng, vocabulary, weights, 12) + "?"
                        for _ in range(questions * SUBQUESTIONS_PER_QUESTION)
                    ],
                }
            ),
            "subquestions",
        ),
        folder / "subquestions.parquet",
    )
    stage = StageOutput(work / "candidates", "candidates", profile.config_hash("bm25", "rerank", "pool"))
    stage.out.mkdir(parents=True, exist_ok=True)
    with ParquetSink(stage.path(Shard()), "candidates") as sink:
        sink.write_rows(
            {
                "qid": q,
                "docid": f"doc{i * CANDIDATES_PER_QUESTION + r:08d}",
                "url_hash": None,
                "bm25_rank": r + 1,
                "rerank_rank": r + 1,
                "clicked": False,
                "click_share": None,
                "source": "bm25",
            }
            for i, q in enumerate(qids)
            for r in range(CANDIDATES_PER_QUESTION)
        )
    stage.mark_done(Shard())
    return {"questions": folder, "candidates": work / "candidates", "index": work / "index"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200, help="questions of 14 sub-questions x 19 candidates")
    parser.add_argument("--median-words", type=int, default=900, help="median document length in words")
    parser.add_argument("--utilisation", type=float, default=0.4)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-judge-"))
    profile = load_profile("paper")
    profile = profile.model_copy(update={"judge": profile.judge.model_copy(update={"chat_template": False})})
    inputs = make_inputs(work, args.questions, args.median_words, profile)
    from transformers import AutoTokenizer

    backend = InstantBackend()
    judge = LLMJudge(
        profile.judge, backend, AutoTokenizer.from_pretrained(str(resolve_model(MINILM))), "instant (benchmark fixture)"
    )
    wall, cpu = time.perf_counter(), time.process_time()
    summary = JudgeStage(
        profile, work / "judgments", inputs["questions"], inputs["candidates"], inputs["index"], judge=judge
    ).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    per_core = summary.pairs / cpu
    model = ModelSize()
    table = Table(
        title=f"judge stage with an instant backend: {summary.pairs:,} pairs "
        f"({args.questions} questions x {SUBQUESTIONS_PER_QUESTION} x {CANDIDATES_PER_QUESTION}), "
        f"mean prompt {backend.tokens / max(backend.sequences, 1):,.0f} MiniLM tokens"
    )
    for column in (
        "wall s",
        "CPU s",
        "pairs/s per core",
        "CPU-hours for 24.3M pairs",
        "precision",
        "4-GPU H100 node pairs/s",
        "one core / node",
    ):
        table.add_column(column, justify="right")
    overhead = 250  # non-context prompt tokens of the paper prompt (plan measures ~170-260 with MiniLM)
    paper = Scenario(
        "paper, assumed", "", PAPER_PAIRS, overhead + 2048 * LLAMA3_TOKENS_PER_WORD, 0, PAPER_PAIRS_PER_SUBQUESTION, 3
    )
    for precision in ("bf16", "fp8"):
        node = node_pairs_per_second(paper.flops(model), precision, args.utilisation)
        table.add_row(
            f"{wall:.1f}",
            f"{cpu:.1f}",
            f"{per_core:,.0f}",
            f"{PAPER_PAIRS / per_core / 3600:,.1f}",
            precision,
            f"{node:.2f}",
            f"{per_core / node:,.0f}x",
        )
    Console(width=200).print(table)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
