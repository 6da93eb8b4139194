"""Retrieval complexity per question (Gabburo et al., arXiv:2406.03592, with a question's sub-questions as its parts).

Their RRCP treats answerability per part as binary, so every measure here is over binarised answers:
document d answers sub-question j when level(d, j) >= the profile's `answer_level`. With K the question's
sub-questions and m_d the number of them that candidate d answers:

- answerable: some candidate answers every sub-question (max_d m_d = K);
- answerable_share: the share of the K sub-questions some candidate answers;
- completeness = (1 / |D+|) * sum over d in D+ of log(m_d) / log(K), D+ = the candidates with m_d >= 1:
  the normalised entropy of each answering document's (uniform) answer distribution over the parts,
  averaged (1: every answering document covers every part; 0: each covers one part, or none answers);
  with K = 1 an answering document covers the whole question (1);
- retrieval_complex: not answerable and completeness under the profile's threshold.

Accumulated while the judgments stream by (`add` per record batch, on integer positions from
`topic_index`), so no pass re-reads the release; the (question, document) pairs with an answer go to sorted
runs on disk past a fixed memory.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.card_statements import quartiles
from builder.release.contract import ComplexityStats
from builder.release.topic_index import mix
from generation.storage.spill import KeyRuns

PAIR = np.dtype([("key", np.uint64), ("q", np.int64), ("count", np.int64)])  # key = mix(question, document)
COLUMNS = ("answerable", "answerable_share", "completeness", "retrieval_complex")
# completeness = (1/|D+|) * sum_{d in D+} log(m_d) / log(K), where m_d is the number of the question's K
# sub-questions that candidate d answers (level >= answer_level) and D+ the candidates with m_d >= 1


class ComplexityAccumulator:
    def __init__(self, subquestions_of: np.ndarray, subq_question: np.ndarray, answer_level: int, threshold: float):
        self.subquestions_of = subquestions_of  # K per question position
        self.subq_question = subq_question  # question position per sub-question position
        self.answer_level, self.threshold = answer_level, threshold
        self.judged: np.ndarray = np.zeros(len(subquestions_of), bool)
        self.answered: np.ndarray = np.zeros(len(subq_question), bool)  # per sub-question: some candidate answers it
        # distinct (question, document) pairs with an answer per batch, and how many sub-questions each answers
        # there: sorted runs that spill to disk (generation/storage/spill.py), so memory stays flat
        self._pairs = KeyRuns(dtype=PAIR, key="key")

    def add(self, question: np.ndarray, subquestion: np.ndarray, document: np.ndarray, level: pa.Array) -> None:
        self.judged[question] = True
        answers = pc.greater_equal(level, self.answer_level).fill_null(False).to_numpy(zero_copy_only=False)
        self.answered[subquestion[answers]] = True
        question, document = question[answers], document[answers]
        keys, first, counts = np.unique(mix(question, document), return_index=True, return_counts=True)
        pairs: np.ndarray = np.empty(len(keys), PAIR)
        pairs["key"], pairs["q"], pairs["count"] = keys, question[first], counts
        self._pairs.add(pairs)

    def result(self) -> dict[str, np.ndarray]:
        """Arrays per question position; questions without any judgment are masked by `judged`."""
        n = len(self.subquestions_of)
        k: np.ndarray = self.subquestions_of.astype(np.float64)
        # a sub-question of no known question (validate reports it) counts for none
        known = self.subq_question[self.answered]
        answered: np.ndarray = np.bincount(known[known >= 0], minlength=n)
        documents: np.ndarray = np.zeros(n, np.int64)
        spread_sum: np.ndarray = np.zeros(n)
        max_m: np.ndarray = np.zeros(n, np.int64)
        for chunk in self._pairs.chunks():  # sorted by key, a (question, document) pair never spans two chunks
            if not len(chunk):
                continue
            starts = np.flatnonzero(np.r_[True, chunk["key"][1:] != chunk["key"][:-1]])
            m = np.add.reduceat(chunk["count"], starts)  # m_d per (question, document) with an answer
            q = chunk["q"][starts]
            with np.errstate(divide="ignore", invalid="ignore"):
                spread = np.where(k[q] > 1, np.log(m) / np.log(np.maximum(k[q], 2)), 1.0)
            documents += np.bincount(q, minlength=n)
            # the running sums go first, so every question's sum is added in key order whatever the chunks
            spread_sum = np.bincount(np.r_[np.arange(n), q], weights=np.r_[spread_sum, spread], minlength=n)
            np.maximum.at(max_m, q, m)
        completeness = np.where(documents > 0, spread_sum / np.maximum(documents, 1), 0.0)
        answerable = (k > 0) & (max_m >= k)
        return {
            "answerable": answerable,
            "answerable_share": np.where(k > 0, answered / np.maximum(k, 1), 0.0),
            "completeness": completeness,
            # the stored float32 completeness under the threshold, as a user reading the column finds it: a float64
            # mean exactly at the threshold lands a last bit either side with the order of its sum
            "retrieval_complex": ~answerable & (completeness.astype(np.float32).astype(np.float64) < self.threshold),
        }


def add_columns(
    questions: pa.Table, question_positions: np.ndarray, values: dict[str, np.ndarray], judged: np.ndarray
) -> pa.Table:
    """The questions table with the complexity columns filled (null for questions without judgments)."""
    for name in COLUMNS:
        kind = pa.bool_() if name in ("answerable", "retrieval_complex") else pa.float32()
        column = values[name][question_positions]
        mask = ~judged[question_positions]
        questions = questions.set_column(
            questions.schema.get_field_index(name),
            name,
            pa.array(column.astype(np.float32) if kind == pa.float32() else column, kind, mask=mask),
        )
    return questions


def summary(questions: pa.Table) -> ComplexityStats:
    """A split's `complexity` statistics from its questions' columns (only `questions` when none is judged)."""
    judged = questions.filter(pc.is_valid(questions["answerable"]))
    n = judged.num_rows
    if n == 0:
        return ComplexityStats(questions=0)
    return ComplexityStats(
        questions=n,
        answerable_share=round(pc.sum(judged["answerable"]).as_py() / n, 4),
        mean_subquestions_answerable=round(float(pc.mean(judged["answerable_share"]).as_py()), 4),
        completeness_quartiles=quartiles(judged["completeness"].to_numpy()),
        retrieval_complex_share=round(pc.sum(judged["retrieval_complex"]).as_py() / n, 4),
    )
