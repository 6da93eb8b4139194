"""Training rows shaped as the paper's, as the kit's sampler sees them (builder/training/sampler.py): for its tests
and for scripts/bench_sampler.py, where no release of the paper's size exists."""

from __future__ import annotations

import numpy as np

from builder.standins.synthetic import TABLE1
from builder.training.sampler import Csr, FalseNegativeGuard

SUBQUESTIONS, POOL, NEGATIVES = 14, 19, 3  # the paper's ~13.4 sub-questions and ~18.9 judged documents a question


def paper_shaped_guard(questions: int, seed: int = 0) -> FalseNegativeGuard:
    """Rows shaped as the paper's: 14 sub-questions a question over a pool of 19 documents, levels drawn from
    Table 1's mix, one row per positive (level >= 4) with 3 negatives: the sub-question's documents judged <= 1 in
    pool order, then, where it has fewer, the next question's first documents (as other_question fills them)."""
    rng = np.random.default_rng(seed)
    weights = np.array([TABLE1[k] for k in range(6)], float)
    levels = rng.choice(6, size=(questions, SUBQUESTIONS, POOL), p=weights / weights.sum())
    low = levels <= 1
    first_low = np.argsort(~low, axis=2, kind="stable")[:, :, :NEGATIVES]  # the first low documents, pool order
    slot = np.arange(NEGATIVES)
    count = low.sum(axis=2)[:, :, None]
    q = np.arange(questions)[:, None, None]
    negatives = np.where(slot < count, q * POOL + first_low, (q + 1) * POOL + slot - count)
    q_of, s_of, d_of = np.nonzero(levels >= 4)
    anchors = q_of * SUBQUESTIONS + s_of
    documents = np.column_stack([q_of * POOL + d_of, negatives[q_of, s_of]])
    middle = np.nonzero((levels > 1) & (levels < 4))
    size = questions * SUBQUESTIONS
    return FalseNegativeGuard(
        anchors,
        q_of,
        documents,
        Csr(anchors, q_of * POOL + d_of, size),
        Csr(middle[0] * SUBQUESTIONS + middle[1], middle[0] * POOL + middle[2], size),
    )
