"""Score a TREC run against a judged release: alpha-nDCG with the sub-questions as aspects, and nDCG.

Conventions, as trec_eval and ndeval have them (ir-measures wraps both; tests/builder/analysis/test_evaluate.py checks the
numbers against it):
- the mean is over EVERY question of the release (each question with judgments): a question missing from the
  run scores 0, as `trec_eval -c`; a run query id that is no question of the release is ignored (and counted);
- the run is ordered by score, highest first, ties by document id in reverse order (trec_eval's order); the
  rank column is not used;
- alpha-nDCG@K[:ALPHA]: a document covers a sub-question when its level >= the threshold; ideal ranking greedy;
- nDCG@K: a document's gain for a question is its HIGHEST level over the question's sub-questions (0-5, used
  linearly as trec_eval's ndcg_cut does); unjudged documents and unparsed judgments gain 0.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from builder.analysis.alpha_ndcg import alpha_ndcg

MAX_LISTED = 10  # malformed line numbers named in the warning


class RunWarning(UserWarning):
    pass


@dataclass
class Run:
    ranked: dict[str, list[str]]
    malformed: list[int] = field(default_factory=list)  # 1-based line numbers
    duplicates: list[int] = field(default_factory=list)


def read_run(path: Path) -> Run:
    """A TREC run file (`qid Q0 docid rank score tag`). Blank lines are skipped; a line without six fields or
    with a score that is not a number is left out, and so is a repeated (qid, docid); each kind is reported
    once as a RunWarning naming its line numbers."""
    scored: dict[str, dict[str, float]] = {}
    run = Run({})
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                if len(parts) != 6:
                    raise ValueError
                qid, _, docid, _, score, _ = parts
                value = float(score)
            except ValueError:
                run.malformed.append(number)
                continue
            if math.isnan(value):  # a NaN score cannot be ordered: trec_eval's sort would place it anywhere
                run.malformed.append(number)
                continue
            docs = scored.setdefault(qid, {})
            if docid in docs:
                run.duplicates.append(number)
                continue
            docs[docid] = value
    for qid, docs in scored.items():
        by_docid = sorted(docs, reverse=True)  # stable sort below keeps reverse docid order among equal scores
        run.ranked[qid] = sorted(by_docid, key=lambda d: -docs[d])
    for kind, numbers in (
        ("malformed (not `qid Q0 docid rank score tag` with a score that is a number)", run.malformed),
        ("repeating a (query, document) pair already seen", run.duplicates),
    ):
        if numbers:
            listed = ", ".join(map(str, numbers[:MAX_LISTED])) + (", ..." if len(numbers) > MAX_LISTED else "")
            warnings.warn(
                f"{path}: {len(numbers):,} lines {kind} were left out: line {listed}", RunWarning, stacklevel=2
            )
    return run


def judgment_files(release: Path, split: str | None = None) -> list[Path]:
    pattern = f"*/{split}-*.parquet" if split else "*/*.parquet"
    files = sorted((Path(release) / "data" / "judgments").glob(pattern))
    if not files:
        raise FileNotFoundError(f"{release}: no judgment files matching data/judgments/{pattern}")
    return files


def release_questions(files: list[Path]) -> list[str]:
    """Every question id with judgments in these files."""
    table = ds.dataset(files, format="parquet").to_table(columns=["qid"])
    return sorted(pc.unique(table["qid"]).to_pylist())


def release_labels(files: list[Path], qids: Sequence[str]) -> pa.Table:
    """(qid, subq_id, docid, level) of the given questions' judgments that have a level."""
    return ds.dataset(files, format="parquet").to_table(
        columns=["qid", "subq_id", "docid", "level"],
        filter=pc.field("qid").isin(list(qids)) & pc.field("level").is_valid(),
    )


def aspects_of(labels, threshold: int) -> dict[str, dict[str, set]]:
    """qid -> docid -> the sub-questions the document answers at level >= threshold."""
    kept = labels.filter(pc.greater_equal(labels["level"], threshold))
    out: dict[str, dict[str, set]] = {}
    for qid, subq, doc in zip(*(kept[c].to_pylist() for c in ("qid", "subq_id", "docid"))):
        out.setdefault(qid, {}).setdefault(doc, set()).add(subq)
    return out


def gains_of(labels) -> dict[str, dict[str, int]]:
    """qid -> docid -> the document's highest level over the question's sub-questions."""
    best = labels.group_by(["qid", "docid"]).aggregate([("level", "max")])
    out: dict[str, dict[str, int]] = {}
    for qid, doc, level in zip(*(best[c].to_pylist() for c in ("qid", "docid", "level_max"))):
        out.setdefault(qid, {})[doc] = level
    return out


def ndcg(ranking: Sequence[str], gains: dict[str, int], k: int | None = 10) -> float:
    """trec_eval's nDCG (ndcg_cut): gain = the label itself, discount log2(rank + 1)."""

    def dcg(values):
        return sum(g / math.log2(rank + 1) for rank, g in enumerate(values, 1) if g > 0)

    ideal = dcg(sorted(gains.values(), reverse=True)[:k])
    return dcg([gains.get(d, 0) for d in ranking[:k]]) / ideal if ideal > 0 else 0.0


def parse_metric(name: str) -> tuple[str, int | None, float]:
    """'alpha-ndcg@10', 'alpha-ndcg@20:0.3' (alpha after the colon) or 'ndcg@10'."""
    metric, _, rest = name.partition("@")
    depth, _, alpha = rest.partition(":")
    if metric not in {"alpha-ndcg", "ndcg"} or (metric == "ndcg" and alpha) or not depth.isdigit():
        raise ValueError(f"unknown metric {name!r}: use alpha-ndcg@K, alpha-ndcg@K:ALPHA or ndcg@K")
    return metric, int(depth), float(alpha) if alpha else 0.5


def evaluate_run(
    run: dict[str, list[str]], release: Path, metrics: Sequence[str], threshold: int = 4, split: str | None = None
) -> dict:
    """Each metric's mean over every question of the release (of `split` when given), with per-question
    values, and how many run query ids are no such question."""
    parsed = {name: parse_metric(name) for name in metrics}
    files = judgment_files(release, split)
    questions = release_questions(files)
    answered = sorted(set(run) & set(questions))
    if not answered:
        raise ValueError(
            f"no query id of the run is a question of {release} (run ids like "
            f"{sorted(run)[:3]}, release question ids like {questions[:3]})"
        )
    labels = release_labels(files, answered)
    aspects = aspects_of(labels, threshold) if any(m == "alpha-ndcg" for m, _, _ in parsed.values()) else {}
    gains = gains_of(labels) if any(m == "ndcg" for m, _, _ in parsed.values()) else {}
    results = {}
    for name, (metric, depth, alpha) in parsed.items():
        per_query = dict.fromkeys(questions, 0.0)
        for q in answered:
            per_query[q] = (
                alpha_ndcg(run[q], aspects.get(q, {}), alpha, depth)
                if metric == "alpha-ndcg"
                else ndcg(run[q], gains.get(q, {}), depth)
            )
        results[name] = {
            "mean": sum(per_query.values()) / len(per_query),
            "queries": len(per_query),
            "in_run": len(answered),
            "per_query": per_query,
        }
    return {"metrics": results, "ignored_run_queries": len(set(run) - set(questions))}


def evaluate_subquestion_run(
    run: dict[str, list[str]], release: Path, depth: int = 10, split: str | None = None
) -> dict:
    """nDCG@depth over sub-questions (trec_eval's ndcg_cut, gain = the level): the run's query ids are subq_ids,
    the mean is over every sub-question with a graded judgment in the release (of `split` when given), a
    sub-question missing from the run scoring 0, as `evaluate_run` does for questions."""
    labels = ds.dataset(judgment_files(release, split), format="parquet").to_table(
        columns=["subq_id", "docid", "level"], filter=pc.field("level").is_valid()
    )
    gains: dict[str, dict[str, int]] = {}
    for subq, doc, level in zip(*(labels[c].to_pylist() for c in ("subq_id", "docid", "level"))):
        gains.setdefault(subq, {})[doc] = level
    per_query = {subq: ndcg(run.get(subq, []), judged, depth) for subq, judged in gains.items()}
    return {
        "mean": sum(per_query.values()) / len(per_query) if per_query else 0.0,
        "queries": len(per_query),
        "in_run": len(set(run) & set(per_query)),
        "per_query": per_query,
    }
