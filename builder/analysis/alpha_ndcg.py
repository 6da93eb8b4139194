"""alpha-nDCG (Clarke et al., 2008) with sub-questions as the aspects (nuggets) of a question.

gain of the document at rank r = sum over aspects it covers of (1 - alpha)^(times the aspect was covered
above r); discounted by log2(r + 1). The ideal ranking is built greedily, as is standard (exact ideal
ordering is NP-hard). Scoring a run against a release: builder/analysis/evaluate.py."""

from __future__ import annotations

import math
from collections.abc import Sequence


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
    remaining = dict(aspects_of)
    seen: dict[str, int] = {}
    ranking: list[str] = []
    while remaining and (k is None or len(ranking) < k):
        best = max(sorted(remaining), key=lambda d: sum((1 - alpha) ** seen.get(a, 0) for a in remaining[d]))
        for aspect in remaining.pop(best):
            seen[aspect] = seen.get(aspect, 0) + 1
        ranking.append(best)
    return ranking


def alpha_ndcg(ranking: Sequence[str], aspects_of: dict[str, set], alpha: float = 0.5, k: int | None = 10) -> float:
    ideal = alpha_dcg(ideal_ranking(aspects_of, alpha, k), aspects_of, alpha, k)
    return alpha_dcg(ranking, aspects_of, alpha, k) / ideal if ideal > 0 else 0.0
