"""Before/after numbers of a bi-encoder on a release split, with the kit's own `evaluate`: dense retrieval over the
texts of the split's judged documents, each sub-question ranking them (nDCG@10 over sub-questions, gain = the
level) and each question ranking them (alpha-nDCG@10 with the sub-questions as aspects, and nDCG@10 with a
document's highest level as its gain, over questions: builder/analysis/evaluate.py `evaluate_run`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds

from builder.analysis.evaluate import evaluate_run, evaluate_subquestion_run, judgment_files
from builder.release.layout import config

QUERY_CHUNK = 1024  # queries scored against the whole document matrix at once (memory: chunk x documents floats)
METRICS = ("ndcg@10 sub-questions", "alpha-ndcg@10 questions", "ndcg@10 questions")


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


def dense_run(
    model, queries: dict[str, str], documents: list[str], document_embeddings, depth: int, batch_size: int = 64
) -> dict[str, list[str]]:
    """query id -> the `depth` best documents by cosine, best first (ties: the lower document index first)."""
    import torch

    ids = list(queries)
    run: dict[str, list[str]] = {}
    for start in range(0, len(ids), QUERY_CHUNK):
        chunk = ids[start : start + QUERY_CHUNK]
        embedded = model.encode_query(
            [queries[q] for q in chunk],
            batch_size=batch_size,
            convert_to_tensor=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        scores = embedded @ document_embeddings.T
        top = torch.topk(scores, k=min(depth, len(documents)), dim=1).indices.tolist()
        run.update((q, [documents[i] for i in row]) for q, row in zip(chunk, top))
    return run


def measure_split(
    model,
    release: Path,
    split: str,
    texts: Callable[[list[str]], dict[str, str]],
    answer_level: int,
    depth: int,
    batch_size: int = 64,
) -> dict[str, float]:
    """The three METRICS of `model` on `split`; `texts(docids)` gives the documents' texts (a judged document the
    user's copy lacks is left out of the ranked collection, and counts as never retrieved)."""
    topics = split_topics(release, split)
    found = texts(topics.documents)
    documents = [d for d in topics.documents if d in found]
    embeddings = model.encode_document(
        [found[d] for d in documents],
        batch_size=batch_size,
        convert_to_tensor=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    by_subq = evaluate_subquestion_run(
        dense_run(model, topics.subquestions, documents, embeddings, depth, batch_size), release, depth=10, split=split
    )
    by_question = evaluate_run(
        dense_run(model, topics.questions, documents, embeddings, depth, batch_size),
        release,
        ["alpha-ndcg@10", "ndcg@10"],
        threshold=answer_level,
        split=split,
    )["metrics"]
    return {
        METRICS[0]: by_subq["mean"],
        METRICS[1]: by_question["alpha-ndcg@10"]["mean"],
        METRICS[2]: by_question["ndcg@10"]["mean"],
        "sub-questions": by_subq["queries"],
        "questions": by_question["ndcg@10"]["queries"],
        "documents": len(documents),
        "documents missing": len(topics.documents) - len(documents),
    }
