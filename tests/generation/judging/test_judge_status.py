"""The judge's grades carry the parser's status class; distribution mode is refused where the grade is not the
answer's first token; R3A's non-verbatim extract is a format failure."""

import pytest
from transformers import AutoTokenizer

from generation.judging.judges import LLMJudge, Pair
from generation.judging.parsing import parse_first_digit
from generation.profiles.profile import load_profile
from generation.storage.schema import JUDGMENT_STATUSES

DOCUMENT = "Neonicotinoid pesticides are absorbed by plants and appear in pollen and nectar."


def judge_config(model, **extra):
    base = load_profile("demo").judge
    return base.model_copy(
        update={
            "backend": "transformers",
            "model": str(model),
            "cut_points": None,
            "dtype": "float32",
            "device": "cpu",
            "chat_template": False,
            **extra,
        }
    )


def test_generated_grades_carry_the_authors_status_class(tiny_llama):
    from generation.backends.hf import TransformersBackend

    config = judge_config(tiny_llama, prompt="crux-code", batch_size=4)
    backend = TransformersBackend(tiny_llama, config)
    judge = LLMJudge(config, backend, backend.tokenizer, "tiny")
    grades = judge.grade([Pair(f"question {i}?", DOCUMENT * (i + 1)) for i in range(8)])
    for grade in grades:
        expected = parse_first_digit(grade.raw)
        assert (grade.level, grade.status) == (expected.level, expected.status)
        assert grade.status in JUDGMENT_STATUSES


@pytest.mark.parametrize("prompt", ["umbrela", "r3a"])
def test_distribution_mode_is_refused_when_the_answer_starts_with_think(tiny_llama, prompt):
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llama))
    with pytest.raises(ValueError, match=f"prompt '{prompt}' answers '<think> ...' before its score"):
        LLMJudge(judge_config(tiny_llama, prompt=prompt, mode="distribution"), None, tokenizer, "tiny")


def test_distribution_mode_is_allowed_for_the_crux_prompts(tiny_llama):
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llama))
    for prompt in ("crux-paper", "crux-code"):
        assert LLMJudge(judge_config(tiny_llama, prompt=prompt, mode="distribution"), None, tokenizer, "t").digit_ids


class ScriptedR3A:
    """An engine whose answers are fixed texts: round one an intent, round two the given R3A answers in order.
    (A random-weight model cannot be made to write the R3A format, and the check under test is on the text.)"""

    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    def generate(self, sequences, max_new_tokens):
        self.calls += 1
        if self.calls == 1:
            return ["<think> t </think> <intent> bees </intent>"] * len(sequences)
        return self.answers[: len(sequences)]


def test_r3a_non_verbatim_extract_is_a_null_level_with_its_status(tiny_llama):
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llama))
    answers = [
        "<think> r </think> <extract> appear in pollen </extract> <score> 2 </score>",
        "<think> r </think> <extract> found in honey </extract> <score> 2 </score>",
    ]
    judge = LLMJudge(judge_config(tiny_llama, prompt="r3a"), ScriptedR3A(answers), tokenizer, "scripted")
    verbatim, invented = judge.grade([Pair("how do bees die?", DOCUMENT, ("aux page",))] * 2)
    assert (verbatim.level, verbatim.status, verbatim.extract_verbatim) == (2, "ok", True)
    assert (invented.level, invented.status, invented.extract_verbatim) == (None, "not_verbatim", False)
    assert "found in honey" in invented.raw
