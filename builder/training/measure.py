"""A bi-encoder's numbers on release splits, with the kit's own `evaluate`: dense retrieval (cosine) over a ranking
set, each sub-question ranking it (nDCG@10 over sub-questions, gain = the level) and each question ranking it
(alpha-nDCG@10 with the sub-questions as aspects, and nDCG@10 with a document's highest level as its gain, over
questions: builder/analysis/evaluate.py `evaluate_run`).

The ranking set is named in every table:
- `corpus`: every document of the texts folder (every split's judged documents the user's copy has, and the
  hard-negatives rows' never-judged negatives), as the release card's mteb task ranks them (its corpus is the texts
  folder's `text` column);
- `judged`: only the split's own judged documents (cheaper; an easier task, so higher numbers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from builder.analysis.evaluate import evaluate_run, evaluate_subquestion_run, judgment_files
from builder.release.layout import config
from builder.release.ranking_documents import judged_docids

RANKINGS = ("corpus", "judged")
QUERY_CHUNK = 1024  # queries scored against a chunk of documents at once (memory: QUERY_CHUNK x CORPUS_CHUNK floats)
CORPUS_CHUNK = 20_000  # documents encoded at a time
METRICS = ("ndcg@10 sub-questions", "alpha-ndcg@10 questions", "ndcg@10 questions")
# one split's figures, as training_report.json holds them: METRICS, query counts, documents ranked and missing, the
# ranking set in words
SplitScores = dict[str, float | int | str]


@dataclass(frozen=True)
class SplitTopics:
    """What one split asks and what it judged: sub-question and question texts by id, and its judged docids."""

    subquestions: dict[str, str]
    questions: dict[str, str]
    documents: list[str]


def split_topics(release: Path, split: str) -> SplitTopics:
    subq = ds.dataset(config("subquestions").files(release, split), format="parquet").to_table(
        columns=["subq_id", "text"]
    )
    questions = ds.dataset(config("questions").files(release, split), format="parquet").to_table(
        columns=["qid", "question"]
    )
    judged = ds.dataset(judgment_files(release, split), format="parquet").to_table(columns=["docid"])
    return SplitTopics(
        dict(zip(subq["subq_id"].to_pylist(), subq["text"].to_pylist())),
        dict(zip(questions["qid"].to_pylist(), questions["question"].to_pylist())),
        sorted(pc.unique(judged["docid"]).to_pylist()),
    )


@dataclass(frozen=True)
class RankingSet:
    """What the queries rank: `kind` (RANKINGS), the texts folder's Parquet files, and a docid -> text lookup."""

    kind: str
    text_files: list[Path]
    texts: Callable[[list[str]], dict[str, str]]

    def chunks(self, topics: SplitTopics | None) -> Iterator[tuple[list[str], list[str]]]:
        """(docids, texts), CORPUS_CHUNK at a time: the whole texts folder, or the split's judged documents that
        have a text."""
        if self.kind == "corpus":
            for path in self.text_files:
                for batch in pq.ParquetFile(path).iter_batches(batch_size=CORPUS_CHUNK, columns=["docid", "text"]):
                    yield batch["docid"].to_pylist(), batch["text"].to_pylist()
            return
        assert topics is not None  # only the corpus ranking set is the same for every split
        for start in range(0, len(topics.documents), CORPUS_CHUNK):
            found = self.texts(topics.documents[start : start + CORPUS_CHUNK])
            docids = [d for d in topics.documents[start : start + CORPUS_CHUNK] if d in found]
            yield docids, [found[d] for d in docids]

    def describe(self, documents: int, judged: int | None = None) -> str:
        """What was ranked, in words; for the corpus, its documents by kind (`judged` of them judged in the release)."""
        if self.kind == "corpus":
            assert judged is not None  # measure_splits counts the judged documents of a corpus ranking set
            return (
                f"the texts corpus: {documents:,} documents ({judged:,} judged in the release, {documents - judged:,} "
                "never judged: the hard-negatives rows' unjudged negatives; as the card's mteb task)"
            )
        return f"the split's judged documents ({documents:,})"

    def judged_in(self, release: Path) -> int:
        """How many documents of the texts folder the release judged (the rest are unjudged negatives)."""
        ids = [pq.read_table(path, columns=["docid"])["docid"] for path in self.text_files]
        if not ids:
            return 0
        docids = pc.unique(pa.chunked_array(ids))
        return int(pc.sum(pc.is_in(docids, value_set=judged_docids(release)["docid"].combine_chunks())).as_py() or 0)


def rank(
    model, queries: dict[str, str], chunks: Iterator[tuple[list[str], list[str]]], depth: int, batch_size: int = 64
) -> tuple[dict[str, list[str]], int]:
    """query id -> the `depth` best documents by cosine, best first, and how many documents were ranked. Memory:
    the queries' embeddings, one chunk of documents', and `depth` candidates a query."""
    import torch

    ids = list(queries)
    embedded = model.encode_query(
        [queries[q] for q in ids],
        batch_size=batch_size,
        convert_to_tensor=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    best = torch.full((len(ids), 0), float("-inf"), device=embedded.device)
    where = torch.zeros((len(ids), 0), dtype=torch.long, device=embedded.device)
    docids: list[pa.Array] = []
    ranked = 0
    for chunk_ids, chunk_texts in chunks:
        if not chunk_ids:
            continue
        documents = model.encode_document(
            chunk_texts,
            batch_size=batch_size,
            convert_to_tensor=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        scores = torch.cat([embedded[s : s + QUERY_CHUNK] @ documents.T for s in range(0, len(ids), QUERY_CHUNK)])
        offsets = torch.arange(ranked, ranked + len(chunk_ids), device=embedded.device).expand(len(ids), -1)
        best, chosen = torch.cat([best, scores], dim=1), torch.cat([where, offsets], dim=1)
        best, top = torch.topk(best, k=min(depth, best.shape[1]), dim=1)
        where = torch.gather(chosen, 1, top)
        docids.append(pa.array(chunk_ids, pa.string()))
        ranked += len(chunk_ids)
    if not ranked:
        return {q: [] for q in ids}, 0
    every = pa.concat_arrays(docids)
    return {q: every.take(pa.array(row)).to_pylist() for q, row in zip(ids, where.tolist())}, ranked


def scores_of(release: Path, split: str, run: dict[str, list[str]], answer_level: int) -> dict[str, float]:
    by_subq = evaluate_subquestion_run(run, release, depth=10, split=split)
    by_question = evaluate_run(run, release, ["alpha-ndcg@10", "ndcg@10"], threshold=answer_level, split=split)
    return {
        METRICS[0]: by_subq["mean"],
        METRICS[1]: by_question["metrics"]["alpha-ndcg@10"]["mean"],
        METRICS[2]: by_question["metrics"]["ndcg@10"]["mean"],
        "sub-questions": by_subq["queries"],
        "questions": by_question["metrics"]["ndcg@10"]["queries"],
    }


def measure_splits(
    model, release: Path, splits: list[str], ranking: RankingSet, answer_level: int, depth: int, batch_size: int = 64
) -> dict[str, SplitScores]:
    """The three METRICS of `model` on each split, with what was ranked (`documents`, `ranking`) and how many of the
    split's judged documents have no text in the user's copy (`documents missing`: never retrieved). The texts
    corpus is encoded once for all the splits."""
    topics = {split: split_topics(release, split) for split in splits}
    if ranking.kind == "corpus":
        queries = {k: v for t in topics.values() for k, v in (*t.subquestions.items(), *t.questions.items())}
        shared = rank(model, queries, ranking.chunks(None), depth, batch_size)
        judged = ranking.judged_in(release)
    results: dict[str, SplitScores] = {}
    for split, topic in topics.items():
        if ranking.kind == "corpus":
            run, documents = shared
        else:
            run, documents = rank(
                model, {**topic.subquestions, **topic.questions}, ranking.chunks(topic), depth, batch_size
            )
        with_text = len(ranking.texts(topic.documents))
        results[split] = {
            **scores_of(release, split, run, answer_level),
            "documents": documents,
            "documents missing": len(topic.documents) - with_text,
            "ranking": ranking.describe(documents, judged if ranking.kind == "corpus" else None),
        }
    return results
