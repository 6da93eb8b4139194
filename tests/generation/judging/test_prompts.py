import re
from pathlib import Path

import pytest

from generation.judging.parsing import (
    check_r3a_extract,
    extract_is_verbatim,
    parse_first_digit,
    parse_r3a,
    parse_umbrela,
)
from generation.judging.prompts import REGISTRY, get_prompt, r3a_intent_turn
from generation.storage.schema import JUDGMENT_STATUSES

QUESTION = "How do neonicotinoids affect honey bees?"
CONTEXT = "Neonicotinoid pesticides are absorbed by plants and appear in pollen and nectar."

# Figure 2 of the paper (Ju et al., arXiv:2510.21733), line by line.
CRUX_PAPER = """Instruction: Determine whether the question can be answered based on the provided context? Rate the context with on a scale from 0 to 5 according to the guideline below. Do not write anything except the rating.

Guideline:
- 5: The context is highly relevant, complete, and accurate.
- 4: The context is mostly relevant and complete but may have minor gaps or inaccuracies.
- 3: The context is partially relevant and complete, with noticeable gaps or inaccuracies.
- 2: The context has limited relevance and completeness, with significant gaps or inaccuracies.
- 1: The context is minimally relevant or complete, with substantial shortcomings.
- 0: The context is not relevant or complete at all.

Question: How do neonicotinoids affect honey bees?

Context: Neonicotinoid pesticides are absorbed by plants and appear in pollen and nectar.

Rating:"""

# DylanJoo/crux crux/augmentation/gen_ratings.py lines 24-39, rendered with `prompt_template.format(question=...,
# context=...)` (line 104). Written with escapes so that the trailing spaces ("Guideline: ", after the context,
# "Rating: ") are visible and cannot be lost by an editor.
CRUX_CODE = (
    "Instruction:\nDetermine whether the question can be answered based on the provided context. Rate the context on "
    "a scale from 0 to 5 according to the guideline below. Do not write anything except the rating.\n\n"
    "Guideline: \n"
    "- 5: The context is highly relevant, complete, and accurate to the question.\n"
    "- 4: The context is mostly relevant and complete but may have minor gaps or inaccuracies to the question.\n"
    "- 3: The context is partially relevant and complete, with noticeable gaps or inaccuracies to the question.\n"
    "- 2: The context has limited relevance and completeness, with significant gaps or inaccuracies to the question.\n"
    "- 1: The context is minimally relevant or complete, with substantial shortcomings to the question.\n"
    "- 0: The context is not relevant or complete at all.\n\n"
    "Question: How do neonicotinoids affect honey bees?\n"
    "Context: Neonicotinoid pesticides are absorbed by plants and appear in pollen and nectar. \n\n"
    "Rating: "
)

# R3A (Yuan et al., arXiv:2508.02506), Appendices C and D as the paper prints them (tests/fixtures/prompts/).
PUBLISHED = Path(__file__).parents[2] / "fixtures" / "prompts" / "r3a-appendix-c-d.md"
PLACEHOLDERS = {"query": "question", "doc": "context", "docs": "documents"}  # the paper's names -> the registry's


def published_turns() -> list[tuple[str, str]]:
    """(role, text) of every System and User turn in the appendices, in order: a `### System` or `### User`
    heading opens a turn; the next heading or `Assistant` line closes it. `$\\{doc\\}$` reads as `{context}`."""
    turns, role, lines = [], None, []
    for line in [*PUBLISHED.read_text().splitlines(), "#"]:
        bare = line.strip("#* ")
        if line.startswith("#") or bare == "Assistant":
            if role:
                text = re.sub(r":\s+\$\\\{(\w+)\\\}\$", r": {\1}", "\n".join(lines).strip())
                turns.append((role, re.sub(r"\{(\w+)\}", lambda m: "{" + PLACEHOLDERS[m[1]] + "}", text)))
            role, lines = (bare.lower() if line.startswith("#") and bare in ("System", "User") else None), []
        elif role:
            lines.append(line.rstrip())
    return turns


@pytest.mark.parametrize("prompt_id, expected", [("crux-paper", CRUX_PAPER), ("crux-code", CRUX_CODE)])
def test_golden_renders(prompt_id, expected):
    assert get_prompt(prompt_id).render(QUESTION, CONTEXT) == expected


def test_umbrela_and_r3a_are_the_papers_turns():
    """R3A's Appendix C (round one: system and user; round two: user) and Appendix D (UMBRELA: system and user)."""
    umbrela, r3a = get_prompt("umbrela"), get_prompt("r3a")
    assert published_turns() == [
        ("system", r3a.system),
        ("user", r3a.rounds[0]),
        ("user", r3a.user),
        ("system", umbrela.system),
        ("user", umbrela.user),
    ]
    papers = dict(question=QUESTION, context=CONTEXT)
    assert umbrela.messages(QUESTION, CONTEXT) == [
        {"role": "system", "content": published_turns()[3][1]},
        {"role": "user", "content": published_turns()[4][1].format(**papers)},
    ]
    assert r3a.render(QUESTION, CONTEXT) == published_turns()[2][1].format(**papers)
    assert r3a_intent_turn(QUESTION, ["first page", "second page"]) == published_turns()[1][1].format(
        question=QUESTION, documents="[1] first page\n[2] second page"
    )
    assert get_prompt("crux-paper").messages(QUESTION, CONTEXT) == [{"role": "user", "content": CRUX_PAPER}]


def test_scales_budgets_and_stable_distinct_hashes():
    assert [(p.id, p.max_level, p.max_new_tokens) for p in REGISTRY.values()] == [
        ("crux-paper", 5, 3),
        ("crux-paper-document-first", 5, 3),
        ("crux-code", 5, 3),
        ("umbrela", 2, 1024),
        ("r3a", 2, 1024),
    ]
    hashes = {p.sha256 for p in REGISTRY.values()}
    assert len(hashes) == 5 and all(len(h) == 64 for h in hashes)
    assert get_prompt("crux-paper").sha256 == get_prompt("crux-paper").sha256


def test_the_document_first_variant_is_figure_2_with_its_context_line_moved_before_its_question_line():
    lines = CRUX_PAPER.split("\n")
    question, context = lines.index(f"Question: {QUESTION}"), lines.index(f"Context: {CONTEXT}")
    lines[question], lines[context] = lines[context], lines[question]
    variant = get_prompt("crux-paper-document-first")
    assert variant.render(QUESTION, CONTEXT) == "\n".join(lines)
    assert variant.document_first and "Context line moved before its Question line" in variant.source
    assert [p.id for p in REGISTRY.values() if p.document_first] == ["crux-paper-document-first"]


def authors_value(output: str) -> int:
    """The oracle: DylanJoo/crux crux/augmentation/gen_ratings.py lines 113-115, as written there."""
    return int(re.findall(r"\d|-\d", output + "-1")[0])


@pytest.mark.parametrize(
    "text, level, status",
    [
        ("5", 5, "ok"),
        (" 4", 4, "ok"),
        ("Rating: 3", 3, "ok"),
        ("10", 1, "ok"),
        ("0", 0, "ok"),
        ("", None, "no_digit"),
        ("N/A", None, "no_digit"),
        ("abc-", None, "no_digit"),
        ("The context discusses the topic at length without any numeric judgement whatsoever.", None, "no_digit"),
        ("-3", None, "negative"),
        ("-1", None, "negative"),
        ("Rating: -4", None, "negative"),
        ("7", None, "out_of_scale"),
        ("9/10", None, "out_of_scale"),
        ("-2", None, "request_failed"),
        (
            "Well, considering the context carefully, it mentions pollen but I would say it deserves a 2 overall.",
            2,
            "ok",
        ),
    ],
)
def test_authors_rule_classified(text, level, status):
    parsed = parse_first_digit(text)
    assert (parsed.level, parsed.status) == (level, status)
    assert status in JUDGMENT_STATUSES
    value = authors_value(text)
    # the level is the authors' value wherever that value is on the scale, and null exactly where it is not
    assert parsed.level == (value if 0 <= value <= 5 else None)
    if status == "out_of_scale":
        assert value > 5
    if status in {"negative", "no_digit", "request_failed"}:
        assert value < 0


def test_scale_bound_follows_the_prompt():
    assert parse_first_digit("3", max_level=2).status == "out_of_scale"
    assert parse_first_digit("2", max_level=2).level == 2


def test_umbrela_and_r3a_parsers():
    assert parse_umbrela("<think> ok </think>\n<score> 2 </score>").level == 2
    assert parse_umbrela("<think> ok </think> <score> [1] </score>").level == 1
    assert (parse_umbrela("score: 2").level, parse_umbrela("score: 2").status) == (None, "no_digit")
    assert (parse_umbrela("<score>5</score>").level, parse_umbrela("<score>5</score>").status) == (None, "out_of_scale")
    parsed = parse_r3a("<think> r </think> <extract> appear in pollen </extract> <score> 1 </score>")
    assert (parsed.level, parsed.extract, parsed.status) == (1, "appear in pollen", "ok")
    assert parse_r3a("<extract> x </extract> <score> 1 </score>").level is None, "format needs <think>"


@pytest.mark.parametrize(
    "extract, level, status",
    [
        ("appear in pollen", 1, "ok"),
        ("None", 1, "ok"),
        ("appears in honey", None, "not_verbatim"),  # R3A section 2.2: I_format = 0, whatever the score
    ],
)
def test_r3a_non_verbatim_extract_is_a_format_failure(extract, level, status):
    parsed = check_r3a_extract(
        parse_r3a(f"<think> r </think> <extract> {extract} </extract> <score> 1 </score>"), CONTEXT
    )
    assert (parsed.level, parsed.status) == (level, status)


@pytest.mark.parametrize(
    "extract, verbatim",
    [
        ("appear in pollen and nectar", True),
        ("appear   in\npollen", True),
        ("None", True),
        ("[none]", True),
        ("appears in pollen", False),
        ("", False),
        (None, False),
    ],
)
def test_r3a_extract_check(extract, verbatim):
    assert extract_is_verbatim(extract, CONTEXT) is verbatim


def test_crux_code_goes_through_the_llama_chat_template_as_the_authors_litellm_path():
    """crux/llm/litellm_api.py lines 91-97: apply_chat_template([{"role": "user", "content": prompt}],
    tokenize=False, add_generation_prompt=True) with Llama-3.3-70B-Instruct's tokenizer. The template trims
    the user turn, so the completion prompt's trailing "Rating: " space does not reach the model."""
    from builder.standins.models import tiny_tokenizer
    from generation.judging.judges import PromptEncoder
    from generation.profiles.profile import load_profile

    config = load_profile("crux-code").judge
    assert config.chat_template is True
    encoder = PromptEncoder(tiny_tokenizer("llama3"), config.chat_template)
    rendered = encoder.render(get_prompt(config.prompt).messages(QUESTION, CONTEXT))
    assert rendered == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\n"
        + CRUX_CODE.rstrip(" ")
        + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    ids = encoder.encode(get_prompt(config.prompt).messages(QUESTION, CONTEXT))
    assert ids.count(encoder.tokenizer.bos_token_id) == 1, "the template's BOS only"


@pytest.mark.parametrize(
    "raw, theirs",
    [
        ("What are the pros - and cons of nuclear power?", "What are the prosand cons of nuclear power?"),
        ("Is self-driving safe?", "Is self-driving safe?"),
        ("Costs -  benefits -\tand risks?", "Costs benefitsand risks?"),  # one white space after the dash goes
    ],
)
def test_crux_code_sees_the_subquestion_as_the_authors_loader_gave_it(raw, theirs):
    """crux/tools/researchy/text_utils.py lines 8-10 (remove_header) deletes every dash followed by white space."""
    assert get_prompt("crux-code").render(raw, CONTEXT).split("\n")[-4] == f"Question: {theirs}"
    assert get_prompt("crux-paper").render(raw, CONTEXT).split("\n")[-5] == f"Question: {raw}"
