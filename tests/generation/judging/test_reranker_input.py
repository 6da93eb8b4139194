"""The reranker input of each profile, golden at string and token level on Qwen3's published chat template.

paper: the Qwen3-Reranker model card's format. crux-code: DylanJoo/crux crux-researchy/rerank-candidates.py
(lines 20-34: "\\n\\n" separators, the chat template with add_generation_prompt=False then the suffix,
`ele[:max_length]` before the suffix; line 114: " ".join(document.split()[:5000]); lines 65 and 115: 8192 in all).
"""

import pytest

from builder.standins.models import tiny_tokenizer
from generation.backends.hf import QwenRerankerScorer
from generation.judging.reranker_input import (
    PREFIX,
    SUFFIX,
    SYSTEM,
    AuthorsRerankEncoder,
    RerankEncoder,
    format_middle,
    make_encoder,
    rerank_query,
)
from generation.profiles.profile import load_profile

INSTRUCTION = "Given the list of questions as query, retrieve relevant passages that answer the questions."
QUERY = "[why are bees declining, What harms bees?]"
DOCUMENT = "  Neonicotinoid\n\npesticides  are\tabsorbed by plants. "

# The whole crux-code input before the token cut, as the published Qwen3 template renders it: the user turn
# closed by the template's "<|im_end|>\n", then the suffix with its own "<|im_end|>\n".
CRUX_CODE_TEXT = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n<Instruct>: Given the list of questions as query, retrieve relevant passages that answer the "
    "questions.\n\n<Query>: [why are bees declining, What harms bees?]\n\n"
    "<Document>: Neonicotinoid pesticides are absorbed by plants.<|im_end|>\n"
    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
)
# The model card's input: "\n" separators, the document as it is, the turn closed by the suffix alone.
PAPER_TEXT = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n<Instruct>: Given the list of questions as query, retrieve relevant passages that answer the "
    "questions.\n<Query>: [why are bees declining, What harms bees?]\n"
    "<Document>:   Neonicotinoid\n\npesticides  are\tabsorbed by plants. "
    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
)


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    return tiny_tokenizer("qwen3")


def test_model_card_prefix_and_suffix_are_what_the_chat_template_renders(qwen3_tokenizer):
    middle = format_middle(INSTRUCTION, QUERY, DOCUMENT)
    rendered = qwen3_tokenizer.apply_chat_template(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": middle}],
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )
    assert rendered == PREFIX + middle + SUFFIX


@pytest.mark.parametrize("profile, text", [("paper", PAPER_TEXT), ("crux-code", CRUX_CODE_TEXT)])
def test_golden_input_per_profile(qwen3_tokenizer, profile, text):
    encoder = make_encoder(load_profile(profile).rerank, qwen3_tokenizer)
    assert type(encoder) is {"paper": RerankEncoder, "crux-code": AuthorsRerankEncoder}[profile]
    assert encoder.encode(INSTRUCTION, QUERY, DOCUMENT) == qwen3_tokenizer.encode(text, add_special_tokens=False)


def test_crux_code_renders_the_template_then_appends_the_suffix(qwen3_tokenizer):
    encoder = make_encoder(load_profile("crux-code").rerank, qwen3_tokenizer)
    assert encoder.render(INSTRUCTION, QUERY, DOCUMENT) + SUFFIX == CRUX_CODE_TEXT


def test_crux_code_cuts_tokens_from_the_end_before_the_suffix(qwen3_tokenizer):
    encoder = AuthorsRerankEncoder(qwen3_tokenizer, max_length=120, max_doc_words=5000)
    long_document = " ".join(f"pollinator{i % 7}" for i in range(400))
    ids = encoder.encode(INSTRUCTION, QUERY, long_document)
    whole = qwen3_tokenizer.encode(encoder.render(INSTRUCTION, QUERY, long_document), add_special_tokens=False)
    suffix = qwen3_tokenizer.encode(SUFFIX, add_special_tokens=False)
    assert len(ids) == 120
    assert ids == whole[: 120 - len(suffix)] + suffix
    im_end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert ids[: 120 - len(suffix)].count(im_end) == 1, "the user turn's <|im_end|> is cut with the document's end"


def test_crux_code_cuts_words_and_normalises_whitespace(qwen3_tokenizer):
    encoder = AuthorsRerankEncoder(qwen3_tokenizer, max_length=8192, max_doc_words=3)
    assert "<Document>: one two three<|im_end|>" in encoder.render(INSTRUCTION, QUERY, " one\n two\t\tthree four five")


def test_crux_code_needs_a_chat_template():
    with pytest.raises(ValueError, match="chat template"):
        AuthorsRerankEncoder(tiny_tokenizer(None), 8192, 5000)


def test_crux_code_scores_on_a_tiny_qwen3_with_the_published_template(chat_qwen3):
    config = load_profile("crux-code").rerank.model_copy(
        update={
            "backend": "transformers",
            "model": str(chat_qwen3),
            "dtype": "float32",
            "max_length": 512,
            "batch_size": 4,
        }
    )
    scorer = QwenRerankerScorer(config, device="cpu")
    assert isinstance(scorer.encoder, AuthorsRerankEncoder)
    scores = scorer.score(INSTRUCTION, QUERY, [DOCUMENT, "bees " * 300, "varroa mites"])
    assert all(0.0 < s < 1.0 for s in scores) and len(set(scores)) == 3


def test_crux_code_query_holds_the_subquestions_as_the_authors_loader_gave_them():
    subquestions = ["What are the pros - and cons?", "Is self-driving safe?"]
    code, paper = load_profile("crux-code").rerank, load_profile("paper").rerank
    assert (
        rerank_query(code, "why nuclear", subquestions)
        == "[why nuclear, What are the prosand cons?, Is self-driving safe?]"
    )
    assert rerank_query(paper, "why nuclear", subquestions) == "What are the pros - and cons? Is self-driving safe?"
