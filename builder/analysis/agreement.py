"""How well two sets of graded labels agree: kappa (unweighted, linear, quadratic), Krippendorff's
alpha (ordinal), Spearman and Kendall, the confusion matrix, per-level precision and recall, binary
agreement at each threshold, bootstrap confidence intervals, coverage, and the agreement of system
rankings (Kendall tau between run orderings scored with each label set)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import stats as sps

from builder.analysis.labels import apply_mapping, read_labels, read_trec_run
from generation.errors import InputError, read_json_file


@dataclass
class Joined:
    a: np.ndarray
    b: np.ndarray
    only_a: int
    only_b: int
    queries: np.ndarray
    docids: np.ndarray


def join(a: pa.Table, b: pa.Table) -> Joined:
    # pyarrow's hash join returns rows in a thread-dependent order; sorted, the seeded bootstrap is reproducible
    merged = a.join(b, keys=["query", "docid"], join_type="inner", left_suffix="_a", right_suffix="_b").sort_by(
        [("query", "ascending"), ("docid", "ascending")]
    )
    both = merged.num_rows
    return Joined(
        np.asarray(merged["grade_a"].to_numpy(), dtype=np.int64),
        np.asarray(merged["grade_b"].to_numpy(), dtype=np.int64),
        a.num_rows - both,
        b.num_rows - both,
        np.asarray(merged["query"].to_pylist(), dtype=object),
        np.asarray(merged["docid"].to_pylist(), dtype=object),
    )


def confusion(a: np.ndarray, b: np.ndarray, levels: list[int]) -> np.ndarray:
    index = {lv: i for i, lv in enumerate(levels)}
    matrix = np.zeros((len(levels), len(levels)), dtype=np.int64)
    np.add.at(matrix, ([index[x] for x in a], [index[y] for y in b]), 1)
    return matrix


def cohen_kappa(a: np.ndarray, b: np.ndarray, levels: list[int], weights: str | None = None) -> float:
    """Cohen's kappa; weights None (unweighted), "linear" or "quadratic" disagreement weights."""
    observed = confusion(a, b, levels).astype(float)
    n = observed.sum()
    if n == 0:
        return float("nan")
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / n
    k = len(levels)
    i, j = np.indices((k, k))
    if weights is None:
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j) / max(k - 1, 1)
    else:
        w = ((i - j) / max(k - 1, 1)) ** 2
    denominator = (w * expected).sum()
    # undefined when both sides give one level (sklearn's cohen_kappa_score returns NaN there too)
    return float(1 - (w * observed).sum() / denominator) if denominator else float("nan")


def krippendorff_alpha_ordinal(a: np.ndarray, b: np.ndarray, levels: list[int]) -> float:
    """Krippendorff's alpha, ordinal metric, two coders, every unit coded by both."""
    k = len(levels)
    coincidence = np.zeros((k, k))
    c = confusion(a, b, levels).astype(float)
    coincidence += c + c.T  # each unit contributes both ordered pairs (m_u - 1 = 1)
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    if n == 0:
        return float("nan")
    delta = np.zeros((k, k))
    for g in range(k):
        for h in range(k):
            lo, hi = min(g, h), max(g, h)
            delta[g, h] = (n_c[lo : hi + 1].sum() - (n_c[g] + n_c[h]) / 2) ** 2
    observed = (coincidence * delta).sum() / n
    expected = (np.outer(n_c, n_c) * delta).sum() / (n * (n - 1))
    # undefined when every value is one level (no expected disagreement), as the kappas are: the `krippendorff`
    # package's `alpha` gives 0/0 = NaN there too (pln-fing-udelar/fast-krippendorff, krippendorff.py `alpha`)
    return float(1 - observed / expected) if expected else float("nan")


def per_level(a: np.ndarray, b: np.ndarray, levels: list[int]) -> dict:
    """Precision and recall of A's level against B's as the reference."""
    out = {}
    for lv in levels:
        predicted, actual = a == lv, b == lv
        hits = int((predicted & actual).sum())
        out[str(lv)] = {
            "precision": hits / predicted.sum() if predicted.sum() else None,
            "recall": hits / actual.sum() if actual.sum() else None,
            "support": int(actual.sum()),
        }
    return out


def correlation(fn, a: np.ndarray, b: np.ndarray) -> float:
    """`fn` (scipy's spearmanr, kendalltau) of two series; NaN when either is constant or shorter than 2."""
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(fn(a, b)[0])


def point_measures(a: np.ndarray, b: np.ndarray, levels: list[int]) -> dict:
    return {
        "kappa": cohen_kappa(a, b, levels),
        "kappa_linear": cohen_kappa(a, b, levels, "linear"),
        "kappa_quadratic": cohen_kappa(a, b, levels, "quadratic"),
        "krippendorff_alpha_ordinal": krippendorff_alpha_ordinal(a, b, levels),
        "spearman": correlation(sps.spearmanr, a, b),
        "kendall_tau_b": correlation(sps.kendalltau, a, b),
        "exact_agreement": float((a == b).mean()) if len(a) else float("nan"),
        "within_one_level": float((np.abs(a - b) <= 1).mean()) if len(a) else float("nan"),
    }


def bootstrap(
    a: np.ndarray, b: np.ndarray, levels: list[int], resamples: int, seed: int, groups: np.ndarray | None = None
) -> dict:
    """95% percentile intervals of `point_measures`. Pairs are resampled with replacement; with `groups` (a label
    per pair, e.g. its question), whole groups are, so pairs that share a question are not counted as independent."""
    rng = np.random.default_rng(seed)
    members = [np.arange(len(a))] if groups is None else list(group_members(groups))
    samples: dict[str, list[float]] = {}
    for _ in range(resamples):
        if groups is None:
            pick = rng.integers(0, len(a), len(a))
        else:
            pick = np.concatenate([members[i] for i in rng.integers(0, len(members), len(members))])
        for name, value in point_measures(a[pick], b[pick], levels).items():
            samples.setdefault(name, []).append(value)
    with warnings.catch_warnings():  # a measure undefined in every resample (a constant side) has no interval: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            name: [float(np.nanpercentile(v, 2.5)), float(np.nanpercentile(v, 97.5))] for name, v in samples.items()
        }


def group_members(groups: np.ndarray):
    """The positions of each group's pairs, groups in sorted order (so a seeded bootstrap is reproducible)."""
    order = np.argsort(groups, kind="stable")
    _, starts = np.unique(groups[order], return_index=True)
    return np.split(order, starts[1:])


def threshold_precision_recall(predicted: np.ndarray, reference: np.ndarray, threshold: int) -> dict:
    """`predicted >= threshold` against `reference >= threshold` as the truth: precision, recall and the counts."""
    said, true = predicted >= threshold, reference >= threshold
    both = int((said & true).sum())
    return {
        "threshold": threshold,
        "precision": both / int(said.sum()) if said.sum() else None,
        "recall": both / int(true.sum()) if true.sum() else None,
        "predicted": int(said.sum()),
        "reference": int(true.sum()),
        "both": both,
    }


def ndcg_at(run: dict[str, list[str]], qrels: dict[str, dict[str, int]], k: int = 10) -> float:
    scores = []
    for query, gains in qrels.items():
        ranked = run.get(query, [])[:k]
        dcg = sum((2 ** gains.get(d, 0) - 1) / np.log2(i + 2) for i, d in enumerate(ranked))
        ideal = sorted(gains.values(), reverse=True)[:k]
        idcg = sum((2**g - 1) / np.log2(i + 2) for i, g in enumerate(ideal))
        scores.append(dcg / idcg if idcg else 0.0)
    return float(np.mean(scores)) if scores else 0.0


def system_ranking(runs: list[Path], joined: Joined) -> dict:
    """Each run scored by nDCG@10 with A's and with B's labels (over the jointly judged pairs)."""
    qrels_a: dict[str, dict[str, int]] = {}
    qrels_b: dict[str, dict[str, int]] = {}
    for q, d, x, y in zip(joined.queries, joined.docids, joined.a, joined.b):
        qrels_a.setdefault(q, {})[d] = int(x)
        qrels_b.setdefault(q, {})[d] = int(y)
    scores = {p.name: (ndcg_at(read_trec_run(p), qrels_a), ndcg_at(read_trec_run(p), qrels_b)) for p in runs}
    tau = (
        sps.kendalltau([s[0] for s in scores.values()], [s[1] for s in scores.values()])[0] if len(scores) > 1 else None
    )
    return {
        "runs": {k: {"ndcg@10_a": v[0], "ndcg@10_b": v[1]} for k, v in scores.items()},
        "kendall_tau": None if tau is None or np.isnan(tau) else float(tau),
    }


def mapped(grades: pa.ChunkedArray, mapping, binary_at: int | None, path: Path, option: str) -> pa.Array:
    """`apply_mapping`, with what is wrong named after the labels' file: a grade the mapping gives no target, a
    binary threshold no mapped grade reaches (every pair would be "not relevant" and agree trivially)."""
    try:
        values = apply_mapping(grades, mapping, None)
    except ValueError as e:
        raise InputError(path, 0, f"{option}: {e}") from None
    top = pc.max(values).as_py() if len(values) else None
    if binary_at is not None and top is not None and top < binary_at:
        raise InputError(
            path,
            0,
            f"--binary-at {binary_at}: no label here reaches it (grades after mapping: "
            f"{pc.unique(values).sort().to_pylist()}); every pair would count as not relevant",
        )
    return apply_mapping(values, None, binary_at)


def read_agreement(path: Path) -> dict:
    """The JSON `agreement --json` wrote, for the card's section; anything else is an InputError naming the file."""
    path = Path(path)
    data = read_json_file(path, "the file `researchy-subq agreement --json` wrote")
    needed = ("a", "b", "coverage", "measures")
    missing = [k for k in needed if k not in data] if isinstance(data, dict) else list(needed)
    if missing:
        raise InputError(path, 0, f"not `researchy-subq agreement --json` output: no {', '.join(missing)}")
    try:
        agreement_markdown(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(path, 0, f"not `researchy-subq agreement --json` output ({type(e).__name__}: {e})") from None
    return data


def agreement(
    path_a: Path,
    path_b: Path,
    map_a=None,
    map_b=None,
    binary_at: int | None = None,
    runs: list[Path] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> dict:
    a, b = read_labels(path_a), read_labels(path_b)
    a = a.set_column(2, "grade", mapped(a["grade"], map_a, binary_at, path_a, "--map-a"))
    b = b.set_column(2, "grade", mapped(b["grade"], map_b, binary_at, path_b, "--map-b"))
    joined = join(a, b)
    result = {"a": str(path_a), "b": str(path_b), **compare(joined, resamples=resamples, seed=seed)}
    if runs:
        result["system_ranking"] = system_ranking(runs, joined)
    return result


def compare(joined: Joined, levels: list[int] | None = None, resamples: int = 1000, seed: int = 0, groups=None) -> dict:
    """Every measure of two label sets on their jointly labelled pairs: the `agreement` result without its paths.
    `levels`: the scale (default: the levels seen); `groups`: resample whole groups in the bootstrap (`bootstrap`)."""
    a, b = joined.a, joined.b
    levels = levels or sorted(set(a.tolist()) | set(b.tolist())) or [0]
    result = {
        "levels": levels,
        "coverage": {"both": len(a), "only_a": joined.only_a, "only_b": joined.only_b},
        "measures": point_measures(a, b, levels),
        "confusion": {"levels": levels, "rows_a_columns_b": confusion(a, b, levels).tolist()},
        "per_level": per_level(a, b, levels),
        "binary": {
            str(t): {
                "agreement": float(((a >= t) == (b >= t)).mean()) if len(a) else None,
                "kappa": cohen_kappa((a >= t).astype(int), (b >= t).astype(int), [0, 1]),
            }
            for t in levels[1:]
        },
    }
    if len(a) and resamples:
        result["confidence_95"] = bootstrap(a, b, levels, resamples, seed, groups)
    return result


def short_path(path: str) -> str:
    """A label set as the card names it: the last two parts of its path (`judgments/train`)."""
    return "/".join(Path(path).parts[-2:])


def measure_text(value) -> str:
    """A measure to 3 places; "undefined" where it has no value (NaN, or null in a record read back)."""
    return "undefined" if value is None or math.isnan(value) else f"{value:.3f}"


def agreement_markdown(result: dict, scope: str | None = None) -> str:
    """The card's label-agreement section; `scope`: which of the release's splits the shared pairs are in
    (builder/release/assemble/agreement_scope.py), a sentence after the first."""
    m, ci = result["measures"], result.get("confidence_95", {})

    def cell(name):
        low_high = f" [{measure_text(ci[name][0])}, {measure_text(ci[name][1])}]" if name in ci else ""
        return f"{measure_text(m[name])}{low_high}"

    lines = [
        f"Labels `{short_path(result['a'])}` against `{short_path(result['b'])}` on {result['coverage']['both']:,} "
        f"shared pairs ({result['coverage']['only_a']:,} only in the first, {result['coverage']['only_b']:,} "
        "only in the second); 95% bootstrap intervals in brackets." + (f" {scope}" if scope else ""),
        "",
        "| measure | value |",
        "| --- | --- |",
    ]
    lines += [f"| {name.replace('_', ' ')} | {cell(name)} |" for name in m]
    if "system_ranking" in result and result["system_ranking"]["kendall_tau"] is not None:
        lines += [
            "",
            f"System ranking agreement (Kendall tau over nDCG@10 of {len(result['system_ranking']['runs'])} "
            f"runs): {result['system_ranking']['kendall_tau']:.3f}.",
        ]
    return "\n".join(lines)
