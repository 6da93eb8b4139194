"""The slot layout (generation/backends/document_batches.py, slot_steps.py): a row per document, its sub-questions in
slots, in both modes. Generate mode decodes there as transformers' generate() does (end tokens, padding after them,
a generation config whose logits processors send it back to generate()); a batch holds no more memory than its cost
says, measured by the tensors its forwards allocate; a prefix held into the next batch is copied out of its pass,
and a batch's rows need no index moved to the device; the digits' log-probabilities are read on the device."""

import shutil

import pytest
import torch
from transformers import GenerationConfig

from generation.backends.batching import bytes_per_token
from generation.backends.document_batches import RowPrefixCache
from generation.backends.slot_steps import digit_logprobs
from tests.generation.backends.test_batching import judge
from tests.generation.backends.test_document_batches import SUBQUESTIONS, whole_prompt_grades
from tests.generation.backends.test_grouped_attention import LiveBytes
from tests.generation.backends.test_prefix_groups import assert_same_grades, grouped_pairs


def with_generation_config(model_dir, tmp_path, **settings):
    """A copy of the saved model whose generation config adds `settings`."""
    copy = shutil.copytree(model_dir, tmp_path / "model")
    config = GenerationConfig.from_pretrained(copy)
    config.update(**settings)
    config.save_pretrained(copy)
    return copy


def test_generate_in_slots_ends_a_slot_as_generate_ends_a_prompt(chat_llama, tmp_path):
    """ "3" made an end token beside <|eot_id|>: a slot whose answer starts with it ends there and is padded after it
    while the others go on, and every text is what generate() gives the whole prompt alone."""
    from transformers import AutoTokenizer

    three = AutoTokenizer.from_pretrained(str(chat_llama)).convert_tokens_to_ids("3")
    eot = GenerationConfig.from_pretrained(chat_llama).eos_token_id
    model_dir = with_generation_config(chat_llama, tmp_path, eos_token_id=[eot, three])
    pairs = grouped_pairs(documents=6, subquestions=SUBQUESTIONS, seed=11)
    grouped, backend = judge(model_dir, "generate", 64, prompt="crux-paper-document-first")
    assert backend.slot_generate and backend.end_tokens == [eot, three]
    steps = []
    original = backend._slot_step
    backend._slot_step = lambda chosen, *args: steps.append(len(chosen)) or original(chosen, *args)
    got = grouped.grade(pairs)
    assert steps == [len(pairs)], "every pair in one slot batch"
    assert_same_grades(got, whole_prompt_grades(model_dir, "generate", pairs), "generate")
    ended = [g.raw for g in got if g.raw.split()[-1] == "3" and len(g.raw.split()) < 3]
    assert ended and any(len(g.raw.split()) == 3 for g in got), "one slot ended early, the others went on"


def test_a_generation_config_with_logits_processors_goes_to_generate(chat_llama, tmp_path):
    """A repetition penalty changes what greedy decoding picks: the slot layout's own argmax would not be
    generate()'s, so the batch goes the row-per-suffix way, through generate(), and gives what whole prompts give."""
    model_dir = with_generation_config(chat_llama, tmp_path, repetition_penalty=1.3)
    pairs = grouped_pairs(documents=3, subquestions=(4, 1, 3), seed=2)
    grouped, backend = judge(model_dir, "generate", 64, prompt="crux-paper-document-first")
    assert backend.slot_layout and not backend.slot_generate
    assert_same_grades(grouped.grade(pairs), whole_prompt_grades(model_dir, "generate", pairs), "generate")


@pytest.fixture(scope="module")
def shaped_llama(tmp_path_factory):
    """A tiny chat Llama in a real judge's proportions, which the token budget's activation rule assumes: the MLP 3.5
    times the hidden size (Llama-3.3-70B: 28,672 / 8,192), 8 query heads over 2 key/value heads."""
    from builder.standins.models import save_tiny_causal_lm

    return save_tiny_causal_lm(
        tmp_path_factory.mktemp("shaped-llama"),
        "LlamaConfig",
        "LlamaForCausalLM",
        5,
        chat="llama3",
        hidden_size=64,
        intermediate_size=224,
        num_attention_heads=8,
        max_position_embeddings=4096,
    )


@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_a_batch_allocates_no_more_than_its_cost(shaped_llama, mode):
    """Each batch's step (its prefix passes, the slot forward, the decode steps) under a dispatch mode that follows
    every tensor it allocates: the most alive at once, with the prefixes held from the batch before, stays within
    the batch's cost in tokens x bytes_per_token (the tiny model's 30k vocabulary makes the logits the larger part:
    TokenCosts.logits counts them), without a budget and under budgets that cut the documents into several batches
    and a batch's prefixes into several passes."""
    graded, backend = judge(shaped_llama, mode, 64, prompt="crux-paper-document-first")
    per_token = bytes_per_token(backend.shape, 4, keeps_cache=True)
    shares, passes = [], []
    for subquestions, budget in [(SUBQUESTIONS, None), (SUBQUESTIONS, 1200), (SUBQUESTIONS, 3000), ((1,) * 6, 1200)]:
        pairs = grouped_pairs(documents=6, subquestions=subquestions, seed=11)
        sequences = [graded.encode_pair(p)[0] for p in pairs]
        into = (
            (torch.tensor([5, 6, 7, 8, 9, 10]), torch.empty(len(pairs), 6, dtype=torch.float64))
            if mode == "distribution"
            else (3, [""] * len(pairs))
        )
        plan = backend._plan(sequences, [p.document for p in pairs])
        batches = plan.cut(list(range(len(pairs))), 64, budget)
        assert sorted(i for b in batches for i in b) == list(range(len(pairs)))
        for batch in batches:
            held = sum(t.untyped_storage().nbytes() for kv in plan.held.values() for pair in kv for t in pair)
            before = plan.prefix_passes
            with torch.inference_mode(), LiveBytes() as live:
                backend._slot_step(batch, plan, *into)
            shares.append((live.peak + held) / (plan.cost(batch) * per_token))
            passes.append(plan.prefix_passes - before)
    assert max(shares) <= 1, shares
    assert max(passes) > 1, "a batch whose prefixes ran in several passes"


def test_a_held_prefix_is_copied_out_of_its_pass_and_rows_need_no_index(chat_llama):
    """Three documents of three sub-questions, four pairs a batch: the first batch's pass computes two documents'
    prefixes, and the second document goes on into the next batch, copied out of that pass."""
    pairs = grouped_pairs(documents=3, subquestions=(3, 3, 3), seed=3)
    graded, backend = judge(chat_llama, "distribution", 4, prompt="crux-paper-document-first")
    sequences = [graded.encode_pair(p)[0] for p in pairs]
    plan = backend._plan(sequences, [p.document for p in pairs])
    first, second, *_ = plan.cut(list(range(len(pairs))), 4, None)
    carried = set(plan.groups(first)) & set(plan.groups(second))
    assert carried, "a document cut by the batch boundary"
    with torch.inference_mode():
        layout = plan.slot_inputs(first, backend._prefill_many, backend.pad_id, torch.float32)
        passes = {g: plan.held[g][0][0] for g in plan.groups(first)}
        assert all(keys.untyped_storage().nbytes() > keys.nbytes for keys in passes.values()), "views of a pass"
        assert all(type(rows) is slice for layer in layout.cache.layers for rows, *_ in layer.parts)
        plan.slot_inputs(second, backend._prefill_many, backend.pad_id, torch.float32)
    for g in carried:
        keys, values = plan.held[g][0]
        assert keys.untyped_storage().nbytes() == keys.nbytes and values.untyped_storage().nbytes() == values.nbytes
        assert torch.equal(keys, passes[g]), "the same keys, in storage of their own"
    # a row-per-suffix batch whose rows of one document are not consecutive: one index a batch, on the keys' device
    first_row = second[0]
    other = next(i for i in second if plan.group_of[i] != plan.group_of[first_row])
    third_row = next(i for i in second if i != first_row and plan.group_of[i] == plan.group_of[first_row])
    with torch.inference_mode():
        _, _, cache = plan.prefix_cache([first_row, other, third_row], backend._prefill_many)
    assert isinstance(cache, RowPrefixCache)
    (split, *_), (alone, *_) = cache.layers[0].parts
    assert isinstance(split, torch.Tensor) and split.tolist() == [0, 2] and alone == slice(1, 2)
    assert split.device == cache.layers[0].parts[0][1].device
    assert all(layer.parts[0][0] is split for layer in cache.layers), "made once a batch, not once a layer"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_digits_on_the_device_give_the_full_softmax(dtype):
    """The digits' log-probabilities from their logits and the logsumexp over Llama-3's 128,256 tokens: the
    probabilities of the full softmax (float64) to 1e-6, and only the digits cross to the host."""
    torch.manual_seed(0)
    logits = (torch.randn(7, 3, 128256) * 4).to(dtype)
    logits[0, 0, 5] = 40  # one token far above the rest
    wanted = torch.tensor([3, 5, 99, 1000, 128000, 7])
    got = digit_logprobs(logits, wanted)
    full = torch.log_softmax(logits.double(), dim=-1)[..., wanted]
    assert got.shape == (7, 3, 6) and got.dtype == torch.float64 and got.device.type == "cpu"
    assert (got.exp() - full.exp()).abs().max() < 1e-6
    assert (got - full).abs().max() < 1e-5


@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_several_prefix_passes_a_batch_give_what_whole_prompts_give(chat_llama, mode):
    """Six one-pair documents under a budget of 1,200 tokens: a prefix pass holds two documents' prefixes, the slot
    forward (held prefixes at TokenCosts.held) more, so a batch runs several prefix passes; every forward stays
    within the budget and the grades are the whole prompts'."""
    pairs = grouped_pairs(documents=6, subquestions=(1,) * 6, seed=4)
    graded, backend = judge(chat_llama, mode, 64, max_batch_tokens=1200, limit=1200, prompt="crux-paper-document-first")
    passes, batches = [], []
    prefill, step = backend._prefill_many, backend._slot_step
    backend._prefill_many = lambda prefixes: passes.append(len(prefixes)) or prefill(prefixes)
    backend._slot_step = lambda chosen, *args: batches.append(len(chosen)) or step(chosen, *args)
    assert_same_grades(graded.grade(pairs), whole_prompt_grades(chat_llama, mode, pairs), mode)
    assert sum(passes) == 6 and len(passes) > len(batches) and max(batches) > max(passes)
    assert max(backend.model.ran) <= 1200


def test_the_expected_table_in_the_docs_is_the_scripts_output():
    """docs/performance.md's expected figures are scripts/expected_document_batches.py's rows, as it prints them."""
    import importlib.util
    from pathlib import Path

    from generation.model_shapes import LLAMA_33_70B, PUBLISHED

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("expected", root / "scripts" / "expected_document_batches.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    page = (root / "docs" / "performance.md").read_text()
    table = script.rows(PUBLISHED[LLAMA_33_70B], 12738, 12, 3000, 14, 20, 18)
    for what, before, now in table:
        assert f"| {what} | {before} | {now} |" in page
    assert table[-1][1:] == ("3", "6, in 3 prefix passes")
