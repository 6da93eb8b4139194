import json

import krippendorff
import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import cohen_kappa_score

from builder.analysis.agreement import (
    agreement,
    cohen_kappa,
    confusion,
    join,
    krippendorff_alpha_ordinal,
    ndcg_at,
    per_level,
)
from builder.analysis.labels import LABEL_SCHEMA, apply_mapping, parse_mapping, read_trec_qrels
from generation.errors import InputError

# A small table worked by hand: 10 items, levels 0-2.
A = np.array([0, 0, 1, 1, 2, 2, 2, 0, 1, 2])
B = np.array([0, 1, 1, 1, 2, 1, 2, 0, 0, 2])


def test_hand_computed_kappas():
    # observed agreement 7/10; marginals A (3, 3, 4), B (3, 4, 3): expected (9 + 12 + 12) / 100 = 0.33
    assert cohen_kappa(A, B, [0, 1, 2]) == pytest.approx((0.7 - 0.33) / (1 - 0.33))
    # linear weights 0, 0.5, 1: observed disagreement 3 x 0.5 / 10 = 0.15;
    # expected = sum w_ij r_i c_j / 100 = 0.5 (3*4 + 3*3 + 3*3 + 4*4) / 100 + 1 (3*3 + 4*3) / 100 = 0.23 + 0.21 = 0.44
    assert cohen_kappa(A, B, [0, 1, 2], "linear") == pytest.approx(1 - 0.15 / 0.44)
    # quadratic weights 0, 0.25, 1: observed 3 x 0.25 / 10 = 0.075; expected 0.25 x 0.46 + 1 x 0.21 = 0.325
    assert cohen_kappa(A, B, [0, 1, 2], "quadratic") == pytest.approx(1 - 0.075 / 0.325)


def test_kappas_match_scikit_learn():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 6, 500)
    b = np.clip(a + rng.integers(-2, 3, 500), 0, 5)
    levels = list(range(6))
    assert cohen_kappa(a, b, levels) == pytest.approx(cohen_kappa_score(a, b))
    assert cohen_kappa(a, b, levels, "linear") == pytest.approx(cohen_kappa_score(a, b, weights="linear"))
    assert cohen_kappa(a, b, levels, "quadratic") == pytest.approx(cohen_kappa_score(a, b, weights="quadratic"))


def test_alpha_hand_computed_and_against_krippendorff_package():
    # Perfect agreement gives 1; the textbook check: two coders, values (1,1),(2,2),(3,3),(1,2) ordinal.
    assert krippendorff_alpha_ordinal(np.array([0, 1, 2]), np.array([0, 1, 2]), [0, 1, 2]) == pytest.approx(1.0)
    a, b = np.array([1, 2, 3, 1]), np.array([1, 2, 3, 2])
    # coincidences: n_1 = 3, n_2 = 3, n_3 = 2 (n = 8); delta(1,2) = (3 + 3 - 3)^2... computed by the package:
    expected = krippendorff.alpha(reliability_data=np.vstack([a, b]).astype(float), level_of_measurement="ordinal")
    assert krippendorff_alpha_ordinal(a, b, [1, 2, 3]) == pytest.approx(expected)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 6, 300)
    y = np.clip(x + rng.integers(-1, 2, 300), 0, 5)
    reference = krippendorff.alpha(
        reliability_data=np.vstack([x, y]).astype(float), level_of_measurement="ordinal", value_domain=list(range(6))
    )
    assert krippendorff_alpha_ordinal(x, y, list(range(6))) == pytest.approx(reference)


def test_alpha_is_undefined_where_every_kappa_is_and_is_printed_so(capsys):
    """One level everywhere: no expected disagreement, so alpha is 0/0 as the kappas are (the krippendorff package
    gives NaN too), never 1.000; the card's section and the printed table say "undefined"."""
    from builder.analysis.agreement import Joined, agreement_markdown, compare
    from builder.cli.reports import print_agreement

    fours = np.full(40, 4)
    with np.errstate(invalid="ignore"):  # the package divides 0 by 0
        reference = krippendorff.alpha(
            reliability_data=np.vstack([fours, fours]).astype(float),
            level_of_measurement="ordinal",
            value_domain=range(6),
        )
    assert np.isnan(reference) and np.isnan(krippendorff_alpha_ordinal(fours, fours, list(range(6))))
    queries = np.array([f"q{i % 4}-0" for i in range(40)], dtype=object)
    result = compare(Joined(fours, fours, 0, 0, queries, queries), list(range(6)), resamples=20)
    result.update(a="judgments/train", b="other/train")
    assert all(np.isnan(result["measures"][m]) for m in ("kappa", "kappa_linear", "krippendorff_alpha_ordinal"))
    section = agreement_markdown(result)
    assert "| krippendorff alpha ordinal | undefined [undefined, undefined] |" in section
    assert "| exact agreement | 1.000 [1.000, 1.000] |" in section
    print_agreement(result)
    printed = [line for line in capsys.readouterr().out.splitlines() if "krippendorff" in line]
    assert printed and "undefined" in printed[0] and "1.000" not in printed[0]


def test_confusion_and_per_level():
    assert confusion(A, B, [0, 1, 2]).tolist() == [[2, 1, 0], [1, 2, 0], [0, 1, 3]]
    levels = per_level(A, B, [0, 1, 2])
    assert levels["2"] == {"precision": 3 / 4, "recall": 1.0, "support": 3}
    assert levels["1"]["precision"] == pytest.approx(2 / 3) and levels["1"]["recall"] == pytest.approx(2 / 4)


def table(rows):
    return pa.table(
        {"query": [r[0] for r in rows], "docid": [r[1] for r in rows], "grade": [r[2] for r in rows]},
        schema=LABEL_SCHEMA,
    )


def test_missing_pairs_are_coverage_not_disagreement():
    joined = join(
        table([("q", "d1", 2), ("q", "d2", 0), ("q", "d3", 1)]), table([("q", "d2", 0), ("q", "d3", 1), ("q", "d9", 5)])
    )
    assert (len(joined.a), joined.only_a, joined.only_b) == (2, 1, 1)
    assert sorted(zip(joined.docids, joined.a, joined.b)) == [("d2", 0, 0), ("d3", 1, 1)]


def test_scale_mapping_and_binary():
    mapping = parse_mapping("0:0,1:0,2:1,3:2,4:3,5:3")
    assert apply_mapping(pa.array([0, 2, 5]), mapping, None).to_pylist() == [0, 1, 3]
    assert apply_mapping(pa.array([0, 2, 5]), mapping, 2).to_pylist() == [0, 0, 1]
    with pytest.raises(ValueError, match="no target for grades \\[4\\]"):
        apply_mapping(pa.array([4]), {0: 0}, None)
    with pytest.raises(ValueError, match="expected 'grade:grade"):
        parse_mapping("0-0")


def test_ties_in_correlations(tmp_path):
    qa, qb = tmp_path / "a.qrels", tmp_path / "b.qrels"
    qa.write_text("".join(f"q1 0 d{i} {g}\n" for i, g in enumerate([2, 2, 1, 1, 0, 0])))
    qb.write_text("".join(f"q1 0 d{i} {g}\n" for i, g in enumerate([1, 1, 1, 0, 0, 0])))
    result = agreement(qa, qb, resamples=0)
    from scipy.stats import kendalltau, spearmanr

    a, b = [2, 2, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]
    assert result["measures"]["kendall_tau_b"] == pytest.approx(kendalltau(a, b)[0])
    assert result["measures"]["spearman"] == pytest.approx(spearmanr(a, b)[0])
    assert 0 < result["measures"]["kendall_tau_b"] < 1


def test_qrels_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.qrels"
    bad.write_text("q1 0 d1 2\nq1 0 d2 high\n")
    with pytest.raises(InputError, match=r"bad.qrels:2: field 'grade'"):
        read_trec_qrels(bad)


def test_system_ranking_and_bootstrap(tmp_path):
    qa, qb, runs = tmp_path / "a.qrels", tmp_path / "b.qrels", tmp_path / "runs"
    runs.mkdir()
    rng = np.random.default_rng(3)
    lines_a, lines_b = [], []
    for q in range(5):
        for d in range(20):
            g = int(rng.integers(0, 3))
            lines_a.append(f"q{q} 0 d{d} {g}\n")
            lines_b.append(f"q{q} 0 d{d} {min(2, g + int(rng.integers(0, 2)))}\n")
    qa.write_text("".join(lines_a))
    qb.write_text("".join(lines_b))
    for r in range(4):
        order = rng.permutation(20)
        (runs / f"run{r}.trec").write_text(
            "".join(f"q{q} Q0 d{d} {i + 1} {20 - i} run{r}\n" for q in range(5) for i, d in enumerate(order))
        )
    result = agreement(qa, qb, runs=sorted(runs.glob("*")), resamples=200)
    assert set(result["system_ranking"]["runs"]) == {f"run{r}.trec" for r in range(4)}
    assert -1 <= result["system_ranking"]["kendall_tau"] <= 1
    low, high = result["confidence_95"]["kappa"]
    assert low <= result["measures"]["kappa"] <= high
    json.dumps(result)


def test_ndcg_hand_computed():
    assert ndcg_at({"q": ["a", "b"]}, {"q": {"a": 0, "b": 1}}, k=2) == pytest.approx((1 / np.log2(3)) / 1.0)
