"""Retrieval complexity per question (after seeds/003, with sub-questions as the parts of a question):

- answerable: some candidate reaches the answer level for every sub-question;
- answerable_share: the share of sub-questions some candidate answers;
- completeness: each candidate's levels across the sub-questions as a distribution, its entropy
  normalised by log K, averaged over the candidates with any positive level (1: documents spread over all
  parts; 0: each document is about one part);
- retrieval_complex: not answerable and completeness under the profile's threshold.

Computed with Arrow group-bys, file by file, so memory follows the number of (question, document) pairs.
"""
from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

COLUMNS = ("answerable", "answerable_share", "completeness", "retrieval_complex")


def partial_sums(table: pa.Table, answer_level: int) -> tuple[pa.Table, pa.Table]:
    level = pc.cast(table["level"].fill_null(0), pa.float64())
    l_log_l = pc.if_else(pc.greater(level, 0), pc.multiply(level, pc.ln(pc.max_element_wise(level, 1.0))), 0.0)
    answers = pc.cast(pc.greater_equal(level, answer_level), pa.int64())
    per_doc = pa.table({"qid": table["qid"], "docid": table["docid"], "s": level, "t": l_log_l, "answers": answers})
    per_doc = per_doc.group_by(["qid", "docid"]).aggregate([("s", "sum"), ("t", "sum"), ("answers", "sum")])
    per_subq = pa.table({"qid": table["qid"], "subq_id": table["subq_id"], "answers": answers}).group_by(
        ["qid", "subq_id"]).aggregate([("answers", "max")])
    return per_doc, per_subq


def complexity(files: list[Path], subquestions: pa.Table, answer_level: int, threshold: float) -> dict[str, dict]:
    docs, subqs = [], []
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=262_144, columns=["qid", "subq_id", "docid", "level"]):
            d, s = partial_sums(pa.Table.from_batches([batch]), answer_level)
            docs.append(d.rename_columns(["qid", "docid", "s", "t", "answers"]))
            subqs.append(s.rename_columns(["qid", "subq_id", "answers"]))
    if not docs:
        return {}
    per_doc = pa.concat_tables(docs).group_by(["qid", "docid"]).aggregate([("s", "sum"), ("t", "sum"), ("answers", "sum")])
    per_subq = pa.concat_tables(subqs).group_by(["qid", "subq_id"]).aggregate([("answers", "max")])
    k_of = {}
    for qid in subquestions["qid"].to_pylist():
        k_of[qid] = k_of.get(qid, 0) + 1
    answered: dict[str, int] = {}
    for qid, hit in zip(per_subq["qid"].to_pylist(), per_subq["answers_max"].to_pylist()):
        answered[qid] = answered.get(qid, 0) + (1 if hit else 0)
    entropy_sum: dict[str, float] = {}
    entropy_n: dict[str, int] = {}
    full: set[str] = set()
    for qid, s, t, answers in zip(*(per_doc[c].to_pylist() for c in ("qid", "s_sum", "t_sum", "answers_sum"))):
        k = k_of.get(qid, 0)
        if k and answers >= k:
            full.add(qid)
        if s > 0 and k > 1:
            entropy = (math.log(s) - t / s) / math.log(k)
            entropy_sum[qid] = entropy_sum.get(qid, 0.0) + entropy
            entropy_n[qid] = entropy_n.get(qid, 0) + 1
    out = {}
    for qid in {q for q in per_doc["qid"].to_pylist()}:
        completeness = entropy_sum.get(qid, 0.0) / entropy_n[qid] if entropy_n.get(qid) else 0.0
        answerable = qid in full
        out[qid] = {"answerable": answerable, "answerable_share": answered.get(qid, 0) / max(k_of.get(qid, 1), 1),
                    "completeness": completeness, "retrieval_complex": (not answerable) and completeness < threshold}
    return out


def add_columns(questions: pa.Table, values: dict[str, dict]) -> pa.Table:
    """The questions table with the complexity columns filled (null for questions without judgments)."""
    qids = questions["qid"].to_pylist()
    for name in COLUMNS:
        column = [values.get(q, {}).get(name) for q in qids]
        kind = pa.bool_() if name in ("answerable", "retrieval_complex") else pa.float32()
        questions = questions.set_column(questions.schema.get_field_index(name), name, pa.array(column, kind))
    return questions


def summary(questions: pa.Table) -> dict:
    judged = questions.filter(pc.is_valid(questions["answerable"]))
    n = judged.num_rows
    if n == 0:
        return {"questions": 0}
    completeness = sorted(judged["completeness"].to_pylist())
    quantile = lambda p: round(completeness[min(int(p * (n - 1) + 0.5), n - 1)], 4)  # noqa: E731
    return {"questions": n,
            "answerable_share": round(pc.sum(judged["answerable"]).as_py() / n, 4),
            "mean_subquestions_answerable": round(float(pc.mean(judged["answerable_share"]).as_py()), 4),
            "completeness_quartiles": [quantile(0.25), quantile(0.5), quantile(0.75)],
            "retrieval_complex_share": round(pc.sum(judged["retrieval_complex"]).as_py() / n, 4)}
