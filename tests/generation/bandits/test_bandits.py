import math

import numpy as np
import pytest

from builder.analysis.alpha_ndcg import alpha_dcg, alpha_ndcg, ideal_ranking
from builder.analysis.simulate import Instance, metrics_at, simulate, trajectory
from generation.bandits import rewards as R
from generation.bandits.policies import POLICIES, Bandit, Hierarchy


def test_table1_rewards_by_hand():
    assert R.bernoulli(1) == 1 and R.bernoulli(0) == 0
    assert R.bernoulli_ucb(1, 3, c=0.5) == pytest.approx(1 + 0.5 * math.sqrt(2 / 3))  # log2(4) = 2
    assert R.bernoulli_ucb(0, 1, c=0.1) == pytest.approx(0.1)  # log2(2) / 1 = 1
    assert R.exploration(0) == math.inf
    assert R.bernoulli_topk([1, 0, 1]) == pytest.approx(2 / 3)
    assert R.bernoulli_rank_aware(1, 2) == pytest.approx(1 / 2)  # log2(4) = 2
    assert R.bernoulli_rank_aware(1, 1) == pytest.approx(1 / math.log2(3))
    assert R.diversity(1, 0.5) == pytest.approx(1 - 1.5 / 2)
    assert R.diversity(1, None) == 1.0 and R.diversity(0, -0.2) == 0.0
    assert R.diversity_concave(1, -0.1, 0.9) == 1.0  # no earlier document of the arm is similar
    assert R.diversity_concave(1, 0.3, 0.9) == pytest.approx(math.exp(-5 * 0.9**15))
    assert R.diversity_concave(1, None, 0.9) == 1.0  # n = 1: nothing earlier on the arm
    assert R.topk_ucb_diversity([1, 1, 0], 0.2, 4, c=0.2) == pytest.approx(
        (2 / 3) * (1 - 1.2 / 2) + 0.2 * math.sqrt(math.log2(5) / 4)
    )


def test_posterior_updates_by_hand():
    assert R.beta_update(1, 1, 1) == (2, 1)
    assert R.beta_update(2, 1, 0) == (2, 2)
    assert R.beta_update(1, 1, 0.25) == (1.25, 1.75)
    assert R.beta_update(1, 1, 1.2) == (2.2, 1.0), "UCB's bonus past 1 does not make beta shrink"
    mu, var = R.gaussian_posterior([0.5, 1.0, 0.0])
    assert var == pytest.approx(math.sqrt(1 / (1 + 3))) and mu == pytest.approx(0.5 * 1.5)
    assert R.gaussian_posterior([]) == (0.0, 1.0)


def test_alpha_ndcg_by_hand():
    aspects = {"d1": {"a"}, "d2": {"a", "b"}, "d3": {"b"}}
    # d1, d2, d3 with alpha 0.5: gains 1; (0.5 + 1); 0.5 -> 1 + 1.5/log2(3) + 0.5/2
    assert alpha_dcg(["d1", "d2", "d3"], aspects, 0.5) == pytest.approx(1 + 1.5 / math.log2(3) + 0.25)
    assert ideal_ranking(aspects, 0.5) == ["d2", "d1", "d3"]
    ideal = 2 + 0.5 / math.log2(3) + 0.5 / 2
    assert alpha_ndcg(["d1", "d2", "d3"], aspects, 0.5, None) == pytest.approx((1 + 1.5 / math.log2(3) + 0.25) / ideal)
    assert alpha_ndcg(["d2", "d1", "d3"], aspects, 0.5, None) == pytest.approx(1.0)
    assert alpha_ndcg(["x"], aspects, 0.5, 1) == 0.0


def rich_arm_instance(n_docs=30, seed=0):
    """Five sub-questions; arm 0 has 80% relevant documents, the others 10%."""
    rng = np.random.default_rng(seed)
    levels = np.where(rng.random((5, n_docs)) < np.array([[0.8], [0.1], [0.1], [0.1], [0.1]]), 5, 1)
    return Instance("q", [f"q-{i}" for i in range(5)], [f"d{j}" for j in range(n_docs)], levels, {})


def precision_at(instance, policy, budget, seed, threshold=4):
    steps = int(round(budget * instance.levels.size))
    return metrics_at(instance, trajectory(instance, policy, seed, threshold, steps), threshold)["precision"]


def test_thompson_sampling_beats_random_at_20_percent():
    instance = rich_arm_instance()
    ts = np.mean([precision_at(instance, "bernoulli", 0.2, s) for s in range(200)])
    rnd = np.mean([precision_at(instance, "random", 0.2, s) for s in range(200)])
    assert ts > rnd + 0.2, (ts, rnd)


def test_every_policy_reaches_the_same_precision_at_full_budget():
    instance = rich_arm_instance()
    embeddings = {
        d: v / np.linalg.norm(v)
        for d, v in zip(instance.docs, np.random.default_rng(1).normal(size=(len(instance.docs), 8)))
    }
    full = instance.relevant(4).mean()
    results = simulate([instance], list(POLICIES), [0.2, 1.0], runs=3, embedding=embeddings.__getitem__)
    for policy in POLICIES:
        assert results[policy][1.0]["precision"]["mean"] == pytest.approx(full), policy


def test_runs_are_reproducible():
    instance = rich_arm_instance()
    assert trajectory(instance, "bernoulli", 7, 4, 40) == trajectory(instance, "bernoulli", 7, 4, 40)
    assert trajectory(instance, "bernoulli", 7, 4, 40) != trajectory(instance, "bernoulli", 8, 4, 40)


def test_hierarchical_expansion():
    h = Hierarchy({"p": ["c1", "c2"]}, min_observations=4, tau=0.77, inheritance=0.91)
    bandit = Bandit("bernoulli", {"p": 20, "c1": 20, "c2": 20}, seed=0, hierarchy=h)
    assert bandit.active == ["p"]
    for rank in (1, 2, 3):
        bandit.observe("p", rank, 1.0)  # Beta(4, 1): mean 0.8 > tau, but only 3 observations
        assert bandit.active == ["p"]
    bandit.observe("p", 4, 1.0)  # 4 observations, Beta(5, 1)
    assert bandit.active == ["p", "c1", "c2"]
    assert (bandit.all_arms["c1"].alpha, bandit.all_arms["c1"].beta) == pytest.approx((0.91 * 5, 0.91 * 1))

    low = Bandit("bernoulli", {"p": 20, "c1": 20, "c2": 20}, seed=0, hierarchy=h)
    for rank, rel in zip(range(1, 9), [1, 0, 1, 0, 1, 0, 1, 0]):
        low.observe("p", rank, float(rel))  # mean 5/10 < tau after 8 observations
    assert low.active == ["p"], "an uninformative parent is not expanded"


def test_unknown_policy_and_missing_embeddings_are_refused():
    with pytest.raises(ValueError, match="unknown policy"):
        Bandit("greedy", {"a": 3}, 0)
    with pytest.raises(ValueError, match="needs document embeddings"):
        Bandit("diversity", {"a": 3}, 0)
