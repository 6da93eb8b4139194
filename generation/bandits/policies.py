"""Policies that pick the next (arm, rank) to observe: the baselines, epsilon-greedy, Thompson sampling
over Beta posteriors with each Table 1 reward (Algorithm 1), Gaussian Thompson sampling (Algorithm 2),
and the hierarchical correlated bandit of section 3.5 (all of Petcu et al., arXiv:2510.18633). Seeded, so every run is reproducible."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from generation.bandits import rewards as R

POLICIES = (
    "random",
    "random-rank-aware",
    "epsilon-greedy",
    "bernoulli",
    "bernoulli-ucb",
    "topk-bernoulli",
    "bernoulli-rank-aware",
    "gaussian",
    "diversity",
    "diversity-concave",
    "topk-ucb-diversity",
)
NEEDS_EMBEDDINGS = {"diversity", "diversity-concave", "topk-ucb-diversity"}
BETA_POLICIES = {
    "bernoulli",
    "bernoulli-ucb",
    "topk-bernoulli",
    "bernoulli-rank-aware",
    "diversity",
    "diversity-concave",
    "topk-ucb-diversity",
}


@dataclass
class Arm:
    id: str
    size: int  # N: documents in its ranked list
    alpha: float = 1.0
    beta: float = 1.0
    rewards: list[float] = field(default_factory=list)
    observed: set[int] = field(default_factory=set)  # observed ranks, 1-based

    @property
    def next_rank(self) -> int | None:
        """n = min{j | (a, j) not in O}."""
        for j in range(1, self.size + 1):
            if j not in self.observed:
                return j
        return None

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)


@dataclass
class Hierarchy:
    """Headers as parents, their bullets as children (Petcu et al., section 3.5)."""

    children: dict[str, list[str]]
    min_observations: int = 4  # n
    tau: float = 0.77
    inheritance: float = 0.91  # lambda


class Bandit:
    """One question's arms. `relevance(arm, rank)` gives the label of a pair when it is observed;
    `window(arm, rank, k)` the labels top-k rewards average; `embedding(arm, rank)` a unit vector."""

    def __init__(
        self,
        policy: str,
        arms: dict[str, int],
        seed: int,
        k: int = 3,
        epsilon: float = 0.0,
        hierarchy: Hierarchy | None = None,
        embedding: Callable[[str, int], np.ndarray] | None = None,
    ):
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
        if policy in NEEDS_EMBEDDINGS and embedding is None:
            raise ValueError(f"policy {policy} needs document embeddings (pass the Lucene index for their texts)")
        self.policy, self.k, self.epsilon, self.hierarchy, self.embedding = policy, k, epsilon, hierarchy, embedding
        self.rng = np.random.default_rng(seed)
        self.all_arms = {a: Arm(a, n) for a, n in arms.items()}
        hidden = {c for kids in (hierarchy.children.values() if hierarchy else []) for c in kids}
        self.active = [a for a in arms if a not in hidden]
        self.expanded: set[str] = set()
        self.observed: list[tuple[str, int]] = []
        self._vectors: list[np.ndarray] = []
        self._last: tuple[str, float] | None = None

    # --- choosing -------------------------------------------------------------------------------
    def open_arms(self) -> list[Arm]:
        return [self.all_arms[a] for a in self.active if self.all_arms[a].next_rank is not None]

    def choose(self) -> tuple[str, int] | None:
        arms = self.open_arms()
        if not arms:
            return None
        if self.policy == "random":
            arm = arms[self.rng.integers(len(arms))]
            free = [j for j in range(1, arm.size + 1) if j not in arm.observed]
            return arm.id, int(free[self.rng.integers(len(free))])
        if self.policy == "random-rank-aware":
            arm = arms[self.rng.integers(len(arms))]
        elif self.policy == "epsilon-greedy":
            last = self._last
            stay = last is not None and last[1] >= 1 and self.rng.random() >= self.epsilon
            previous = self.all_arms[last[0]] if last is not None and stay else None
            arm = (
                previous
                if previous is not None and previous.next_rank is not None
                else arms[self.rng.integers(len(arms))]
            )
        elif self.policy == "gaussian":
            samples = []
            for a in arms:
                mu, var = R.gaussian_posterior(a.rewards)
                samples.append(self.rng.normal(mu, np.sqrt(var)))
            arm = arms[int(np.argmax(samples))]
        else:
            arm = arms[int(np.argmax([self.rng.beta(a.alpha, a.beta) for a in arms]))]
        rank = arm.next_rank
        assert rank is not None  # every arm chosen above is open: it has a rank left
        return arm.id, rank

    # --- observing ------------------------------------------------------------------------------
    def reward(self, arm: Arm, rank: int, rel: float, window: Sequence[float]) -> float:
        p = self.policy
        if p in {"random", "random-rank-aware", "epsilon-greedy", "bernoulli"}:
            return R.bernoulli(rel)
        if p == "bernoulli-ucb":
            return R.bernoulli_ucb(rel, rank)
        if p == "topk-bernoulli":
            return R.bernoulli_topk(window)
        if p == "bernoulli-rank-aware":
            return R.bernoulli_rank_aware(rel, rank)
        if p == "gaussian":
            return rel
        embedding = self.embedding
        assert embedding is not None  # the policies left need embeddings, which the constructor requires
        vector = embedding(arm.id, rank)
        max_observed = max((float(vector @ v) for v in self._vectors), default=None)
        if p == "diversity":
            return R.diversity(rel, max_observed)
        if p == "diversity-concave":
            same_arm = [float(vector @ embedding(arm.id, j)) for j in sorted(arm.observed) if j < rank]
            return R.diversity_concave(rel, max(same_arm, default=None), max_observed)
        return R.topk_ucb_diversity(window, max_observed, rank)

    def observe(self, arm_id: str, rank: int, rel: float, window: Sequence[float] | None = None) -> float:
        arm = self.all_arms[arm_id]
        r = self.reward(arm, rank, rel, window if window is not None else [rel])
        if self.policy in BETA_POLICIES:
            arm.alpha, arm.beta = R.beta_update(arm.alpha, arm.beta, r)
        arm.rewards.append(r)
        arm.observed.add(rank)
        self.observed.append((arm_id, rank))
        if self.embedding is not None and self.policy in NEEDS_EMBEDDINGS:
            self._vectors.append(self.embedding(arm_id, rank))
        self._last = (arm_id, rel)
        self._expand(arm)
        return r

    def _expand(self, arm: Arm) -> None:
        """An informative parent (>= n observations, posterior mean > tau) adds its children as arms,
        each starting at Beta(lambda alpha, lambda beta)."""
        h = self.hierarchy
        if h is None or arm.id in self.expanded or arm.id not in h.children:
            return
        if len(arm.observed) >= h.min_observations and arm.mean > h.tau:
            self.expanded.add(arm.id)
            for child in h.children[arm.id]:
                self.all_arms[child].alpha = h.inheritance * arm.alpha
                self.all_arms[child].beta = h.inheritance * arm.beta
                self.active.append(child)
