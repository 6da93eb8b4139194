"""alpha-nDCG (Clarke et al., 2008) with sub-questions as the aspects (nuggets) of a question.

gain of the document at rank r = sum over aspects it covers of (1 - alpha)^(times the aspect was covered
above r); discounted by log2(r + 1). The ideal ranking is built greedily, as is standard (exact ideal
ordering is NP-hard)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Sequence

import pyarrow.compute as pc
import pyarrow.dataset as ds


def alpha_dcg(ranking: Sequence[str], aspects_of: dict[str, set], alpha: float = 0.5, k: int | None = None) -> float:
    seen: dict = {}
    total = 0.0
    for rank, doc in enumerate(ranking[:k] if k else ranking, start=1):
        gain = 0.0
        for aspect in aspects_of.get(doc, ()):
            gain += (1 - alpha) ** seen.get(aspect, 0)
            seen[aspect] = seen.get(aspect, 0) + 1
        total += gain / math.log2(rank + 1)
    return total


def ideal_ranking(aspects_of: dict[str, set], alpha: float = 0.5, k: int | None = None) -> list[str]:
    remaining, seen, ranking = dict(aspects_of), {}, []
    while remaining and (k is None or len(ranking) < k):
        best = max(sorted(remaining), key=lambda d: sum((1 - alpha) ** seen.get(a, 0) for a in remaining[d]))
        for aspect in remaining.pop(best):
            seen[aspect] = seen.get(aspect, 0) + 1
        ranking.append(best)
    return ranking


def alpha_ndcg(ranking: Sequence[str], aspects_of: dict[str, set], alpha: float = 0.5, k: int | None = 10) -> float:
    ideal = alpha_dcg(ideal_ranking(aspects_of, alpha, k), aspects_of, alpha, k)
    return alpha_dcg(ranking, aspects_of, alpha, k) / ideal if ideal > 0 else 0.0


def release_aspects(release: Path, threshold: int, qids: Iterable[str] | None = None) -> dict[str, dict[str, set]]:
    """qid -> docid -> the sub-questions the document answers at level >= threshold."""
    files = sorted((Path(release) / "data" / "judgments").glob("*/*.parquet"))
    table = ds.dataset(files, format="parquet").to_table(
        columns=["qid", "subq_id", "docid"], filter=pc.field("level") >= threshold)
    out: dict[str, dict[str, set]] = {}
    wanted = set(qids) if qids is not None else None
    for qid, subq, doc in zip(*(table[c].to_pylist() for c in ("qid", "subq_id", "docid"))):
        if wanted is None or qid in wanted:
            out.setdefault(qid, {}).setdefault(doc, set()).add(subq)
    return out


def parse_metric(name: str) -> tuple[str, int | None, float]:
    """'alpha-ndcg@10' or 'alpha-ndcg@20:0.3' (alpha after the colon)."""
    metric, _, rest = name.partition("@")
    if metric != "alpha-ndcg":
        raise ValueError(f"unknown metric {name!r}: use alpha-ndcg@K or alpha-ndcg@K:ALPHA")
    depth, _, alpha = rest.partition(":")
    return metric, int(depth) if depth else None, float(alpha) if alpha else 0.5


def evaluate_run(run: dict[str, list[str]], release: Path, metrics: Sequence[str], threshold: int = 4) -> dict:
    aspects = {q: a for q, a in release_aspects(release, threshold).items() if q in run}  # questions the run answers
    results = {}
    for name in metrics:
        _, depth, alpha = parse_metric(name)
        per_query = {q: alpha_ndcg(run.get(q, []), aspects[q], alpha, depth) for q in aspects}
        results[name] = {"mean": sum(per_query.values()) / len(per_query) if per_query else 0.0,
                         "queries": len(per_query), "per_query": per_query}
    return results
