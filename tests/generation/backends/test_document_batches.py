"""Several documents a forward (generation/backends/document_batches.py): the batches hold several documents' groups
up to the pair count and the token budget, the prefixes of a batch's new documents run in right-padded prefix passes
within the budget, and every suffix continues from its own document's prefix. Exact to each whole prompt run alone (the same levels,
digit probabilities within 1e-4 in fp32) in both modes, with documents of unequal lengths, one-pair groups, groups
cut by a batch boundary, and a batch that runs out of memory in the middle (torch.OutOfMemoryError raised by a
wrapper above a token count: a CPU has no GPU memory to run out of)."""

import pytest

from generation.backends.batching import OutOfMemoryNotice, TokenCosts
from generation.backends.document_batches import DocumentBatches
from tests.generation.backends.test_batching import TokenLimited, judge
from tests.generation.backends.test_prefix_groups import assert_same_grades, grouped_pairs, judge_of


def whole_prompt_grades(model_dir, mode, pairs):
    """Each prompt alone, whole: one prompt a batch, nothing shared, nothing padded."""
    whole, _ = judge_of(model_dir, mode, batch_size=1)
    whole.groups_documents = False
    return whole.grade(pairs)


# 6 documents of 60-160 words: one-pair groups (1), groups larger than a batch (7, 9)
SUBQUESTIONS = (5, 1, 7, 3, 1, 8)


def test_batches_hold_several_groups_within_the_pair_count_and_the_budget():
    sequences = [[1] * 40 + [2, k] for k in range(5)] + [[3] * 30 + [4] * (k + 1) for k in range(3)] + [[7] * 50 + [9]]
    keys = ["a"] * 5 + ["b"] * 3 + ["c"]
    plan = DocumentBatches(sequences, keys)
    # prefixes: a 41 (shared), b 30, c 50 (one prompt: all of it but its last token)
    assert [plan.prefix_of(i) for i in (0, 5, 8)] == [41, 30, 50]
    assert plan.cut(list(range(9)), 16, None) == [[5, 6, 7, 0, 1, 2, 3, 4, 8]], "shortest prefix first, one batch"
    # cost: a row per group, its longest prefix + as many slots as the largest group, each as wide as the longest suffix
    assert plan.cost([5, 6, 7, 0]) == 2 * (41 + 3 * 3) and plan.cost([8]) == 50 + 1
    batches = plan.cut(list(range(9)), 4, None)
    assert batches == [[5, 6, 7, 0], [1, 2, 3, 4], [8]], "group a crosses a batch boundary"
    budgeted = plan.cut(list(range(9)), 16, 2 * 41 + 5 * 3)
    assert all(plan.cost(b) <= 2 * 41 + 5 * 3 for b in budgeted)
    assert sorted(i for b in budgeted for i in b) == list(range(9)), "each prompt in one batch, none twice"


def test_a_suffix_forward_holds_more_documents_than_a_prefix_pass():
    """Held prefixes at half a token each (TokenCosts.held: keys and values, no forward's activations) and a budget
    of 100 tokens: a prefix pass computes two 41-token prefixes (82; a third would make 123), the next one more
    beside the 82 held (41 + 41), and the slot forward holds the three (61.5) with their suffixes (3 rows x 2 slots):
    three documents a batch where a held prefix counted as a whole token allows two."""
    sequences = [[g + 1] * 40 + [9, k] for g in range(4) for k in range(2)]
    keys = [g for g in range(4) for _ in range(2)]
    plan = DocumentBatches(sequences, keys, TokenCosts(held=0.5))
    batches = plan.cut(list(range(8)), 16, 100)
    assert batches == [[0, 1, 2, 3, 4, 5], [6, 7]], "three documents a batch, their prefixes in two passes"
    assert plan.passes([41, 41, 41]) == [([0, 1], 82), ([2], 0.5 * 82 + 41)]
    assert plan.cost(batches[0]) == 82, "the most of the passes (82, 82) and the slot forward (61.5 + 6)"
    whole = DocumentBatches(sequences, keys)
    assert [len(whole.groups(b)) for b in whole.cut(list(range(8)), 16, 100)] == [2, 2]


@pytest.mark.parametrize("model", ["chat_llama", pytest.param("chat_qwen3", marks=pytest.mark.slow)])
@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_several_documents_a_forward_give_what_whole_prompts_give(request, model, mode):
    model_dir = request.getfixturevalue(model)
    pairs = grouped_pairs(documents=6, subquestions=SUBQUESTIONS, seed=11)
    grouped, backend = judge(model_dir, mode, batch_size=6, prompt="crux-paper-document-first")
    prefix_passes = []
    original = backend._prefill_many
    backend._prefill_many = lambda prefixes: prefix_passes.append(len(prefixes)) or original(prefixes)
    assert_same_grades(grouped.grade(pairs), whole_prompt_grades(model_dir, mode, pairs), mode)
    assert sum(prefix_passes) == 6, "each document's prefix computed once"
    assert max(prefix_passes) > 1, "several documents' prefixes in one forward"


@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_a_token_budget_cuts_batches_of_documents_and_each_batch_stays_within_it(chat_llama, mode):
    pairs = grouped_pairs(documents=6, subquestions=SUBQUESTIONS, seed=11)
    budgeted, backend = judge(chat_llama, mode, 64, max_batch_tokens=1500, prompt="crux-paper-document-first")
    backend.model = TokenLimited(backend.model, 1500, backend.token_costs.held)
    assert_same_grades(budgeted.grade(pairs), whole_prompt_grades(chat_llama, mode, pairs), mode)
    assert backend.model.ran and max(backend.model.ran) <= 1500


@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_out_of_memory_in_the_middle_recuts_the_batches_of_documents(chat_llama, mode):
    """No budget set (64 pairs a batch): the first batch of all six documents runs out of memory, the budget is
    lowered and the rest re-cut; a group already computed is not computed again, no pair is judged twice."""
    pairs = grouped_pairs(documents=6, subquestions=SUBQUESTIONS, seed=11)
    limited, backend = judge(chat_llama, mode, 64, limit=1200, prompt="crux-paper-document-first")
    judged = []
    original = backend._slot_step  # the batches of several groups a row (document_batches.slot_inputs), both modes

    def counted(chosen, *args):
        original(chosen, *args)
        judged.extend(chosen)  # reached once the batch's forwards ran

    backend._slot_step = counted
    with pytest.warns(OutOfMemoryNotice) as notices:
        got = limited.grade(pairs)
    assert len(notices) == 1 and "out of memory on a batch of" in str(notices[0].message)
    assert_same_grades(got, whole_prompt_grades(chat_llama, mode, pairs), mode)
    assert all(tokens <= 1200 for tokens in backend.model.ran)
    ran = backend.model.ran
    assert len(ran) >= 3, "several batches ran after the failure"
    assert sorted(judged) == list(range(len(pairs))), "each pair judged once"


@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_a_row_per_suffix_gives_what_whole_prompts_give(chat_llama, mode):
    """The layout an attention without 4D masks (flash attention) gets: each suffix a row, its document's prefix
    laid out for it; generate mode through transformers' generate()."""
    pairs = grouped_pairs(documents=6, subquestions=SUBQUESTIONS, seed=11)
    rows, backend = judge(chat_llama, mode, batch_size=6, prompt="crux-paper-document-first")
    backend.slot_layout = backend.slot_generate = False
    expected = whole_prompt_grades(chat_llama, mode, pairs)
    assert_same_grades(rows.grade(pairs), expected, mode)
