"""`validate`'s own derivation of the questions' retrieval-complexity columns and of their summary in the
statistics, apart from build-release's (builder/release/assemble/complexity.py), so that one mistake is not made
twice. The definitions (docs/analysis.md, after Gabburo et al.): a document answers a sub-question when its level
is at least the profile's `answer_level`; with K the question's sub-questions and m_d the sub-questions document d
answers,

- answerable: some document answers all K;
- answerable_share: the share of the K that some document answers;
- completeness: the mean over the documents with m_d >= 1 of log(m_d) / log(K) (1 when K = 1), 0 when none;
- retrieval_complex: not answerable and completeness under the profile's threshold.

Here every answering judgment's (question, document) goes to sorted runs on disk by question
(generation/storage/spill.py, a fixed memory however many judgments answer), and each chunk of whole questions the merge
gives back is grouped by an exact lexicographic sort of (question, document). The build counts (question, document)
pairs by a 64-bit hash of both instead (assemble/complexity.py). The summary's quartiles come from the one quantile
function the card names (builder/release/card_statements.py `quartiles`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from builder.release.card_statements import quartiles
from builder.release.contract import ComplexityStats
from generation.storage.spill import KeyRuns

COLUMNS = {"answerable": pa.bool_(), "answerable_share": pa.float32(), "completeness": pa.float32()}
COLUMNS["retrieval_complex"] = pa.bool_()


ANSWER = np.dtype([("question", np.uint64), ("document", np.uint64)])  # one answering judgment


class Answers:
    """Per question position: judged or not, and the (question, document) of every answering judgment, in sorted
    runs on disk by question. `columns()` reads the runs back once."""

    def __init__(self, subquestions_of: np.ndarray, subq_question: np.ndarray, answer_level: int, threshold: float):
        self.k: np.ndarray = subquestions_of.astype(np.int64)
        self.subq_question = subq_question
        self.answer_level, self.threshold = answer_level, threshold
        self.judged: np.ndarray = np.zeros(len(self.k), bool)
        self.answered_subquestions: np.ndarray = np.zeros(len(subq_question), bool)
        self.rows = KeyRuns(dtype=ANSWER, key="question")

    def add(self, question: np.ndarray, subquestion: np.ndarray, document: np.ndarray, level: pa.Array) -> None:
        self.judged[question] = True
        levels = level.to_numpy(zero_copy_only=False).astype(np.float64)
        answers = np.nan_to_num(levels, nan=-np.inf) >= self.answer_level
        self.answered_subquestions[subquestion[answers]] = True
        rows: np.ndarray = np.empty(int(answers.sum()), ANSWER)
        rows["question"], rows["document"] = question[answers], document[answers]
        self.rows.add(rows)

    def columns(self) -> dict[str, np.ndarray]:
        n = len(self.k)
        k: np.ndarray = self.k.astype(np.float64)
        owners = self.subq_question[self.answered_subquestions]
        answered = np.bincount(owners[owners >= 0], minlength=n)
        documents: np.ndarray = np.zeros(n, np.int64)
        spread_sum: np.ndarray = np.zeros(n)
        most: np.ndarray = np.zeros(n, np.int64)
        for rows in self.rows.chunks():  # whole questions: a question's rows never span two chunks
            if not len(rows):
                continue
            rows = rows[np.lexsort((rows["document"], rows["question"]))]
            pair = np.stack([rows["question"], rows["document"]], 1)
            starts = np.flatnonzero(np.r_[True, np.any(pair[1:] != pair[:-1], axis=1)])
            m = np.diff(np.r_[starts, len(rows)])  # sub-questions each answering (question, document) answers
            q = rows["question"][starts].astype(np.int64)
            kq = k[q]
            spread = np.ones(len(m))
            several = kq > 1
            spread[several] = np.log(m[several]) / np.log(kq[several])
            np.add.at(documents, q, 1)
            np.add.at(spread_sum, q, spread)  # a question's documents in order, in one chunk: one order of its sum
            np.maximum.at(most, q, m)
        # as stored (float32), so a mean exactly at the threshold is judged by the value a user reads, whatever the
        # order its float64 sum took
        completeness = np.divide(spread_sum, documents, out=np.zeros(n), where=documents > 0).astype(np.float32)
        answerable = (k > 0) & (most >= k)
        return {
            "answerable": answerable,
            "answerable_share": np.divide(answered, k, out=np.zeros(n), where=k > 0),
            "completeness": completeness,
            "retrieval_complex": ~answerable & (completeness.astype(np.float64) < self.threshold),
        }


def with_complexity(questions: pa.Table, answers: Answers) -> pa.Table:
    """The questions (one row per question position, in order) with their complexity columns derived here; null
    where the question has no judgment."""
    values = answers.columns()
    for name, kind in COLUMNS.items():
        column = pa.array(values[name].astype(np.float32) if kind == pa.float32() else values[name], kind)
        column = pa.array([v if j else None for v, j in zip(column.to_pylist(), answers.judged)], kind)
        questions = questions.set_column(questions.schema.get_field_index(name), name, column)
    return questions


def complexity_summary(questions: pa.Table) -> ComplexityStats:
    """A split's `complexity` statistics from its questions' columns (only `questions` when none is judged)."""
    rows = [r for r in questions.select(list(COLUMNS)).to_pylist() if r["answerable"] is not None]
    if not rows:
        return ComplexityStats(questions=0)
    n = len(rows)
    return ComplexityStats(
        questions=n,
        answerable_share=round(sum(bool(r["answerable"]) for r in rows) / n, 4),
        mean_subquestions_answerable=round(sum(r["answerable_share"] for r in rows) / n, 4),
        completeness_quartiles=quartiles([r["completeness"] for r in rows]),
        retrieval_complex_share=round(sum(bool(r["retrieval_complex"]) for r in rows) / n, 4),
    )
