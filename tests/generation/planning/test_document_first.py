"""`plan` prices the document-first prompt beside the paper's: a group's prefix once, its suffixes at their own share
of peak, measured on the pairs at hand and projected to the paper's shape."""

import json

import pytest

from generation.judging.calibration import REFERENCE, Calibration
from generation.model_shapes import prompt_flops
from generation.planning.cost_report import plan_table
from generation.planning.costing import costing_for, judge_rows
from generation.planning.document_first import PAPER_PAIRS_PER_GROUP
from generation.planning.plan import PAPER_PAIRS, measure
from generation.profiles.profile import load_profile, with_overrides


@pytest.fixture(scope="module")
def plans(small_pipeline):
    inputs = small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"]
    return {name: measure(load_profile(name), *inputs, sample=40) for name in ("paper", "paper-document-first")}


def test_the_variant_is_measured_on_the_same_pairs_whichever_prompt_the_profile_names(plans, small_pipeline):
    import pyarrow.parquet as pq

    paper, variant = plans["paper"], plans["paper-document-first"]
    assert paper.prompt == variant.prompt == "crux-paper"
    assert paper.variant == variant.variant and paper.variant.prompt == "crux-paper-document-first"
    groups = paper.variant.groups
    subqs = pq.read_table(small_pipeline["questions"] / "subquestions.parquet").to_pylist()
    asked = {q: sum(s["qid"] == q for s in subqs) for q in {s["qid"] for s in subqs}}
    assert min(asked.values()) - 1e-9 <= groups.pairs_per_group <= max(asked.values()) + 1e-9
    assert groups.suffix_tokens < 60 < groups.prefix_tokens, "a sub-question and its header against the document"
    labels = [(s.label, s.prompt) for s in paper.scenarios()]
    assert labels[3:] == [
        (label, "crux-paper-document-first") for label in ("these pairs", "paper, measured", "paper, assumed")
    ]
    assert any("researchy-subq pilot" in line for line in paper.notes())


def test_the_variants_paper_rows_cost_under_a_quarter_of_the_paper_prompts(plans):
    plan, profile = plans["paper"], load_profile("paper")
    costing, _ = costing_for(profile)
    rows, _ = judge_rows(plan, costing)
    hours = {(r.label, r.prompt, r.precision): r.hours for r in rows}
    for precision in ("bf16", "fp8"):
        # the paper's documents (at the cut): under a quarter; the sample's short pages: the suffixes weigh more
        paper = [hours[(label, "crux-paper", precision)] for label in ("paper, assumed", "paper, measured")]
        variant = [
            hours[(label, "crux-paper-document-first", precision)] for label in ("paper, assumed", "paper, measured")
        ]
        assert variant[0] <= paper[0] / 4 and variant[1] < paper[1], (precision, paper, variant)


def without_whole_model_figures(tmp_path):
    """The reference calibration less its whole-model figures: the component prices alone."""
    data = json.loads(REFERENCE.read_text())
    data["whole_model"] = []
    path = tmp_path / "shares-only.json"
    path.write_text(json.dumps(data))
    return path


def test_on_transformers_a_pair_pays_1_over_g_of_its_prefix_and_its_suffix(plans, tmp_path):
    """By hand: 1/g of the prefix at the prefill share, the suffix at the calibrated suffix share (bf16, no decode),
    times the GPUs a copy spans."""
    plan, profile = plans["paper"], with_overrides(load_profile("paper"), ["judge.backend=transformers"], origin="t")
    costing, _ = costing_for(profile, without_whole_model_figures(tmp_path))
    rows, _ = judge_rows(plan, costing)
    assumed = next(s for s in plan.scenarios() if s.label == "paper, assumed" and s.groups is not None)
    g = assumed.groups
    assert g.pairs_per_group == pytest.approx(PAPER_PAIRS_PER_GROUP)
    shape, calibration = costing.judge, Calibration.load(REFERENCE)
    prefix = prompt_flops(shape, g.prefix_tokens) / g.pairs_per_group / (989e12 * 0.511)
    suffix = prompt_flops(shape, g.prefix_tokens + g.suffix_tokens, g.prefix_tokens) / (
        989e12 * calibration.utilisation["suffix"]["bf16"]
    )
    row = next(
        r for r in rows if (r.label, r.prompt, r.precision) == ("paper, assumed", "crux-paper-document-first", "bf16")
    )
    assert row.prefill_hours == pytest.approx(PAPER_PAIRS * (prefix + suffix) / 3600 * row.gpus, rel=1e-9)
    assert "suffixes at 10.3%, calibrated on Llama-3.3-70B (16 of 80 layers), kit document-first" in row.suffix_source


@pytest.mark.parametrize("caching", [True, False])
def test_on_vllm_the_price_is_what_the_prefix_cache_leaves_to_compute(plans, tmp_path, caching):
    """The paper profile judges on vLLM, a document's requests sent together. By hand, with prefix caching: of a
    document's g requests the first computes its whole prompt (T tokens) at the prefill share; the other g - 1 find
    the prefix's full 16-token blocks (B tokens) cached and compute the rest at the suffix share; the hit rate is
    (1 - 1/g) x B / T. Without it every request computes its whole prompt, as the paper prompt's do."""
    plan = plans["paper"]
    profile = with_overrides(load_profile("paper"), [f"judge.enable_prefix_caching={str(caching).lower()}"], origin="t")
    costing, _ = costing_for(profile, without_whole_model_figures(tmp_path))
    rows, notes = judge_rows(plan, costing)
    g = next(s for s in plan.scenarios() if s.label == "paper, assumed" and s.groups is not None).groups
    shape, suffix_share = costing.judge, Calibration.load(REFERENCE).utilisation["suffix"]["bf16"]
    tokens, blocks = g.prefix_tokens + g.suffix_tokens, g.prefix_tokens // 16 * 16
    later = 1 - 1 / g.pairs_per_group
    if caching:
        seconds = (1 - later) * prompt_flops(shape, tokens) / (989e12 * 0.511) + later * prompt_flops(
            shape, tokens, blocks
        ) / (989e12 * suffix_share)
        line = next(n for n in notes if n.startswith("vllm, crux-paper-document-first, paper, assumed:"))
        assert f"an expected prefix-cache hit rate of {later * blocks / tokens:.1%} of prompt tokens" in line
        assert 0.9 < later * blocks / tokens < 0.95
    else:
        seconds = prompt_flops(shape, tokens) / (989e12 * 0.511)
        assert any("enable_prefix_caching is off" in n for n in notes)
    row = next(
        r for r in rows if (r.label, r.prompt, r.precision) == ("paper, assumed", "crux-paper-document-first", "bf16")
    )
    assert row.prefill_hours == pytest.approx(PAPER_PAIRS * seconds / 3600, rel=1e-9)


def test_a_prompt_without_a_variant_has_its_rows_alone_and_says_so(small_pipeline):
    inputs = small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"]
    profile = load_profile("paper")
    code = profile.model_copy(update={"judge": profile.judge.model_copy(update={"prompt": "crux-code"})})
    plan = measure(code, *inputs, sample=10)
    assert plan.variant is None and len(plan.scenarios()) == 3
    assert any("crux-code has no document-first variant" in line for line in plan.notes())
    table, _ = plan_table(plan, costing_for(code)[0], profile.rerank.depth)
    assert set(table.columns[1]._cells) <= {"crux-code", "-"}
