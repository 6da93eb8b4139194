"""A document-first prompt's document part tokenized once per document (generation/judging/document_prompts.py): the
ids equal each whole prompt's tokenization on the real MiniLM tokenizer with the published Llama-3.3 and Qwen3 chat
templates and without a template; a tokenizer that merges across the join is caught and those pairs are tokenized
whole, counted, with a notice; a prompt over the budget is still cut by tokens."""

import pytest
from tokenizers import Tokenizer, models, trainers
from transformers import PreTrainedTokenizerFast

from builder.standins.models import tiny_tokenizer
from generation.judging.judges import LLMJudge, Pair
from generation.profiles.profile import load_profile

QUESTIONS = [
    "How do varroa mites spread?",
    "what's the winter loss rate (2019-2024)?",
    "Why-do bees swarm... in spring?",
    "  leading spaces and\ttabs?",
    "Überwinterung der Bienen: wie?",
    "1234 hives, 5% loss: why?",
    "?",
    "[bracketed] question",
]
DOCUMENTS = [
    "Honey bee colonies lose workers to varroa destructor and the viruses it carries. " * 30,
    "short page",
    "A page ending in a word-piece: overwintering",
    "numbers 12,345.67 and punctuation!!! --- <html> & ampersands",
    "Zeilen\nmit\n\nUmbrüchen und Ümlauten",
]


def judge_for(tokenizer, chat_template=True, max_model_len=8192, prompt="crux-paper-document-first"):
    config = load_profile("paper").judge.model_copy(
        update={"prompt": prompt, "chat_template": chat_template, "max_model_len": max_model_len, "mode": "generate"}
    )
    return LLMJudge(config, None, tokenizer, "no backend: prompts only")


def whole_ids(judge, pair):
    return judge.encoder.encode(judge.prompt.messages(pair.question, judge.context(pair)))


@pytest.mark.parametrize("chat", ["llama3", "qwen3", None])
def test_a_documents_part_once_gives_the_whole_prompts_ids(chat):
    judge = judge_for(tiny_tokenizer(chat), chat_template=chat is not None)
    assert judge.document_prompts.usable
    pairs = [Pair(q, d) for d in DOCUMENTS for q in QUESTIONS]
    encoded = judge._encode_all(pairs)
    assert [ids for ids, _ in encoded] == [whole_ids(judge, p) for p in pairs]
    assert judge.tokenized_whole == 0


def merging_tokenizer():
    """A real byte-pair tokenizer without a pre-tokenizer, trained so its merges run across line ends into the
    question ("\\nQuestion: W..." is one token): the tokens before the join depend on the sub-question."""
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    corpus = ["Context: a page\n\nQuestion: What now?\n\nRating:"] * 200 + ["Context: a page\n\nQuestion: How"] * 5
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]", "[PAD]"]))
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]")


def test_a_merge_across_the_join_falls_back_to_the_whole_prompt_and_is_counted(capsys):
    judge = judge_for(merging_tokenizer(), chat_template=False)
    pairs = [Pair(q, "a page") for q in ("How now?", "What now?", "How then?")]
    encoded = judge._encode_all(pairs)
    assert [ids for ids, _ in encoded] == [whole_ids(judge, p) for p in pairs]
    assert judge.tokenized_whole >= 1
    assert f"{judge.tokenized_whole} of 3 pairs tokenized whole" in capsys.readouterr().err


def test_the_paper_prompt_is_tokenized_whole_as_before():
    judge = judge_for(tiny_tokenizer("llama3"), prompt="crux-paper")
    assert not judge.document_prompts.usable
    pairs = [Pair(q, d) for d in DOCUMENTS[:2] for q in QUESTIONS[:3]]
    assert [ids for ids, _ in judge._encode_all(pairs)] == [whole_ids(judge, p) for p in pairs]


def test_a_prompt_over_the_budget_is_still_cut_by_tokens():
    judge = judge_for(tiny_tokenizer("llama3"), max_model_len=300)
    pairs = [Pair(q, d) for d in DOCUMENTS for q in QUESTIONS[:3]]
    encoded = judge._encode_all(pairs)
    assert encoded == [judge.encode_pair(p) for p in pairs]
    assert any(cut for _, cut in encoded) and all(len(ids) <= judge.budget for ids, _ in encoded)


def test_pieces_hold_whole_documents_and_the_next_is_prepared_while_this_one_runs():
    import threading

    from generation.judging.document_prompts import document_pieces, pipelined

    documents = ["a"] * 5 + ["b"] * 2 + ["c"] * 7 + ["a"] + ["d"]
    pieces = document_pieces(documents, 6)
    assert pieces == [[0, 1, 2, 3, 4, 14], [5, 6, 7, 8, 9, 10, 11, 12, 13], [15]]
    running, prepared_meanwhile = threading.Event(), []

    def prepare(piece):
        if piece is not pieces[0]:
            assert running.wait(5), "prepared while the piece before runs"
            prepared_meanwhile.append(piece)
        return len(piece)

    def run(piece, prepared):
        running.set()
        while len(prepared_meanwhile) < min(pieces.index(piece) + 1, len(pieces) - 1):
            threading.Event().wait(0.01)
        running.clear()
        return prepared

    assert pipelined(pieces, prepare, run) == [6, 9, 1]
    assert prepared_meanwhile == pieces[1:]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["distribution", "generate"])
def test_a_document_first_judge_by_pieces_gives_what_whole_prompts_give(chat_llama, mode):
    """batch_size 2: pieces of about 8 pairs, so a call runs several, each prepared while the one before ran."""
    from tests.generation.backends.test_document_batches import SUBQUESTIONS, whole_prompt_grades
    from tests.generation.backends.test_prefix_groups import assert_same_grades, grouped_pairs, judge_of

    pairs = grouped_pairs(documents=6, subquestions=SUBQUESTIONS, seed=11)
    judge, _ = judge_of(chat_llama, mode, batch_size=2)
    assert_same_grades(judge.grade(pairs), whole_prompt_grades(chat_llama, mode, pairs), mode)
