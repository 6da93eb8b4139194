"""A prompt's messages -> text -> token ids (through the model's chat template or as plain text), and the token cut of
a context that would not fit the budget."""

from __future__ import annotations

from collections.abc import Callable


class PromptEncoder:
    """Prompt messages -> text -> token ids, through the model's chat template or as plain text.

    A chat prompt is rendered to text with `add_generation_prompt=True` and tokenized without adding special
    tokens, since the rendered template already holds them (BOS for Llama 3): what vLLM's `LLM.chat` and an
    OpenAI-compatible server (the authors' litellm path) do. `apply_chat_template(tokenize=True)` returns a
    `BatchEncoding` in transformers 5, which is why the text goes through `render` first."""

    def __init__(self, tokenizer, chat_template: bool):
        self.tokenizer, self.chat_template = tokenizer, chat_template
        if chat_template and not getattr(tokenizer, "chat_template", None):
            raise ValueError("the profile asks for a chat template but the tokenizer has none")

    def render(self, messages: list[dict]) -> str:
        if self.chat_template:
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return "\n\n".join(m["content"] for m in messages)

    def encode(self, messages: list[dict]) -> list[int]:
        return list(self.tokenizer.encode(self.render(messages), add_special_tokens=not self.chat_template))

    def encode_many(self, messages: list[list[dict]]) -> list[list[int]]:
        """`encode` of each, in one call: a fast tokenizer encodes a batch on all the machine's cores."""
        if not messages:
            return []
        texts = [self.render(m) for m in messages]
        return [list(ids) for ids in self.tokenizer(texts, add_special_tokens=not self.chat_template)["input_ids"]]


def cut_tokens(tokenizer, text: str, keep: int) -> str:
    """`text` cut after its first `keep` tokens, at the character where that token ends (the original text
    kept as it is, where the tokenizer gives offsets)."""
    if keep <= 0:
        return ""
    if getattr(tokenizer, "is_fast", False):
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        return text if keep >= len(offsets) else text[: offsets[keep - 1][1]]
    ids = tokenizer.encode(text, add_special_tokens=False)
    return text if keep >= len(ids) else tokenizer.decode(ids[:keep])


class PromptTooLong(ValueError):
    pass


def fit_context(tokenizer, build: Callable[[str], list[int]], context: str, budget: int) -> tuple[list[int], str]:
    """Token ids of `build(context)` within `budget` tokens, cutting the end of `context` by tokens as needed.
    Returns (ids, the context used). Raises PromptTooLong when even an empty context overflows."""
    ids = build(context)
    while len(ids) > budget:
        if not context:
            raise PromptTooLong(
                f"the prompt without its context is {len(ids)} tokens, over the budget {budget} "
                "(max_model_len - max_new_tokens)"
            )
        length = len(tokenizer.encode(context, add_special_tokens=False))
        context = cut_tokens(tokenizer, context, length - (len(ids) - budget))
        ids = build(context)
    return ids, context
