"""The rewards of Table 1 of Petcu et al., arXiv:2510.18633, each exactly as written there.

Notation: `rel` is Relevance(d_{a_t, n}) (1 or 0, or a graded value in [0, 1]); `n` the 1-based rank
of the observed document in the arm's list; `window` the relevances of d_{a_t, n} .. d_{a_t, n+k-1};
`max_cos_observed` is max over the observed set O of cos(d_{a_t, n}, d_{i, j}) (None when O is empty);
`max_cos_same_arm` is max_{j < n} cos(d_{a_t, n}, d_{a_t, j}) (None when n = 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

DIVERSITY_A, DIVERSITY_B = 5.0, 15.0
UCB_C = 1e-3  # "c -> 0"


def exploration(n: int, c: float = UCB_C) -> float:
    """c * sqrt(log2(n + 1) / n); infinite for an arm with no observation (n = 0)."""
    return math.inf if n == 0 else c * math.sqrt(math.log2(n + 1) / n)


def novelty(max_cos_observed: float | None) -> float:
    """1 - (max cos + 1) / 2; a first observation (empty O) is fully novel."""
    return 1.0 if max_cos_observed is None else 1.0 - (max_cos_observed + 1.0) / 2.0


def bernoulli(rel: float) -> float:
    return rel


def bernoulli_ucb(rel: float, n: int, c: float = UCB_C) -> float:
    return rel + exploration(n, c)


def bernoulli_topk(window: Sequence[float]) -> float:
    """(1/k) sum_{i=n}^{n+k-1} Relevance(d_{a_t, i}); k = len(window) (shorter at the end of the list)."""
    return sum(window) / len(window)


def bernoulli_rank_aware(rel: float, n: int) -> float:
    return rel / math.log2(n + 2)


def diversity(rel: float, max_cos_observed: float | None) -> float:
    return rel * novelty(max_cos_observed)


def diversity_concave(
    rel: float,
    max_cos_same_arm: float | None,
    max_cos_observed: float | None,
    a: float = DIVERSITY_A,
    b: float = DIVERSITY_B,
) -> float:
    if max_cos_same_arm is None or max_cos_same_arm < 0 or max_cos_observed is None:
        return rel
    return rel * math.exp(-a * max_cos_observed**b)


def topk_ucb_diversity(window: Sequence[float], max_cos_observed: float | None, n: int, c: float = UCB_C) -> float:
    """Equation 1: (1/k) sum Relevance(d_{a_t, i}) * novelty + c * sqrt(log2(n + 1) / n)."""
    return bernoulli_topk(window) * novelty(max_cos_observed) + exploration(n, c)


def beta_update(alpha: float, beta: float, reward: float) -> tuple[float, float]:
    """Algorithm 1, lines 12-13: alpha += r, beta += 1 - r (r clipped to [0, 1] for beta, as UCB's
    bonus can push r past 1)."""
    return alpha + reward, beta + (1.0 - min(max(reward, 0.0), 1.0))


def gaussian_posterior(rewards: Sequence[float], sigma0_sq: float = 1.0) -> tuple[float, float]:
    """Algorithm 2, lines 11-12, as printed: sigma^2 = sqrt((1/sigma0^2 + n)^-1), mu = sigma^2 * sum r."""
    variance = math.sqrt(1.0 / (1.0 / sigma0_sq + len(rewards)))
    return variance * sum(rewards), variance
