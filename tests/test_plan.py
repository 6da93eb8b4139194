import pytest

from generation.plan import (LLAMA3_TOKENS_PER_WORD, PAPER_PAIRS, PAPER_PAIRS_PER_SUBQUESTION, ModelSize, Scenario,
                             gpu_hours, measure, node_pairs_per_second)
from generation.profiles import load_profile


def test_paper_scale_arithmetic_against_a_hand_computation():
    """Llama-3.3-70B (70.6e9 params, 80 layers, hidden 8192), a 3,000-token prompt + 3 new tokens, 24,316,320 pairs,
    bf16 (989 TFLOP/s dense) at 40%. By hand: 2 x 70.6e9 x 3003 = 424,023,600,000,000; attention
    2 x 80 x 8192 x 3003^2 = 11,820,084,756,480; sum 435,843,684,756,480 FLOPs per pair;
    x 24,316,320 / (989e12 x 0.4) / 3600 = 7,441.66 GPU-hours. Prefix cache, 200 shared tokens reused by all but
    the first of 18.865 pairs per sub-question: S = 189.398; 2 x 70.6e9 x (3003 - S) + 2 x 80 x 8192 x (3003^2 - S^2)
    = 409,053,632,092,000 FLOPs -> 6,984.24 GPU-hours. One 4-GPU node: 4 x 989e12 x 0.4 / 435.84e12 = 3.63 pairs/s."""
    model = ModelSize()
    row = Scenario("paper", "", PAPER_PAIRS, 3000, 200, PAPER_PAIRS_PER_SUBQUESTION, 3)
    assert row.flops(model) == pytest.approx(435_843_684_756_480, rel=1e-12)
    assert gpu_hours(row.pairs, row.flops(model), "bf16", 0.4) == pytest.approx(7441.66, abs=0.01)
    assert row.flops(model, prefix_cached=True) == pytest.approx(409_053_632_092_000, rel=1e-9)
    assert gpu_hours(row.pairs, row.flops(model, prefix_cached=True), "bf16", 0.4) == pytest.approx(6984.24, abs=0.01)
    assert node_pairs_per_second(row.flops(model), "bf16", 0.4) == pytest.approx(3.63, abs=0.01)


def test_measure_states_its_stand_in_and_projects_the_paper_row_from_the_cut(small_pipeline):
    """The paper profile's judge tokenizer is not on disk here: MiniLM stands in, and says so; the assumed paper row
    is the measured non-context tokens plus context_words x tokens per word; the shared prefix comes from two prompts
    of one sub-question with different documents (it holds the instruction and the question, not the whole prompt)."""
    profile = load_profile("paper")
    plan = measure(profile, small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"], sample=30)
    assert plan.stand_in and "stand-in for " + profile.judge.model in plan.tokenizer
    assert any("stood in" in line and "tokens per word" in line for line in plan.notes())
    these, measured, assumed = plan.scenarios()
    assert assumed.prompt_tokens == pytest.approx(plan.mean_overhead_tokens + 2048 * LLAMA3_TOKENS_PER_WORD)
    assert measured.pairs == assumed.pairs == PAPER_PAIRS and assumed.pairs_per_subquestion == PAPER_PAIRS_PER_SUBQUESTION
    assert these.pairs_per_subquestion == plan.pairs / plan.subquestions
    question_tokens = 5  # every sub-question has more; the instruction alone is over a hundred MiniLM tokens
    assert question_tokens < plan.mean_shared_prefix_tokens < plan.mean_prompt_tokens
    assert plan.mean_overhead_tokens < plan.mean_prompt_tokens
    assert "NOT representative" in measured.note, "the sample's passages never reach 2,048 words"
