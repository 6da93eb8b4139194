"""What a model costs, from its config alone (no weights): parameters, weight bytes per precision, KV-cache bytes
per token, FLOPs per prompt. Shared by `plan`, the GPU benchmark and the backend's placement on GPUs.

The published shapes below are the `config.json` values of the models the profiles name, so the benchmark can
build them in memory with random weights and `plan` can cost them without a download:
- meta-llama/Llama-3.3-70B-Instruct/config.json: hidden_size 8192, intermediate_size 28672, num_hidden_layers 80,
  num_attention_heads 64, num_key_value_heads 8, head_dim 128, vocab_size 128256, tie_word_embeddings false,
  rope_theta 500000.0, rms_norm_eps 1e-05.
- meta-llama/Llama-3.1-8B-Instruct/config.json: hidden_size 4096, intermediate_size 14336, num_hidden_layers 32,
  num_attention_heads 32, num_key_value_heads 8, head_dim 128, vocab_size 128256, tie_word_embeddings false,
  rope_theta 500000.0, rms_norm_eps 1e-05.
- Qwen/Qwen3-Reranker-0.6B/config.json (the Qwen3-0.6B layer shapes): hidden_size 1024, intermediate_size 3072,
  num_hidden_layers 28, num_attention_heads 16, num_key_value_heads 8, head_dim 128, vocab_size 151669,
  tie_word_embeddings true, rope_theta 1000000, rms_norm_eps 1e-06.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

LLAMA_33_70B = "meta-llama/Llama-3.3-70B-Instruct"
LLAMA_31_8B = "meta-llama/Llama-3.1-8B-Instruct"
QWEN3_RERANKER_06B = "Qwen/Qwen3-Reranker-0.6B"

# Bytes per weight: fp8 stores the decoder's linear layers in one byte each (embeddings, norms and the LM head
# stay in bf16, as torchao's and vLLM's fp8 schemes leave them).
WEIGHT_BYTES = {"float32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp8": 1}


@dataclass(frozen=True)
class Shape:
    """A decoder-only transformer (Llama / Qwen3 layout: grouped-query attention, gated MLP, RMS norms)."""

    name: str
    family: str  # "llama" or "qwen3": which transformers config and model class build it
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool
    rope_theta: float
    rms_norm_eps: float

    def with_layers(self, layers: int) -> Shape:
        return replace(self, name=f"{self.name} ({layers} of {self.layers} layers)", layers=layers)

    @property
    def linear_params_per_layer(self) -> int:
        attention = self.hidden * self.heads * self.head_dim * 2 + self.hidden * self.kv_heads * self.head_dim * 2
        return attention + 3 * self.hidden * self.intermediate

    @property
    def norm_params_per_layer(self) -> int:
        # two RMS norms of `hidden`; Qwen3 adds q_norm and k_norm of head_dim
        return 2 * self.hidden + (2 * self.head_dim if self.family == "qwen3" else 0)

    @property
    def non_embedding_params(self) -> int:
        """Parameters that every processed token goes through (the LM head runs on the last position only)."""
        return self.layers * (self.linear_params_per_layer + self.norm_params_per_layer) + self.hidden

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def attention_width(self) -> int:
        return self.heads * self.head_dim

    def weight_bytes(self, precision: str) -> int:
        """Bytes of all weights; in fp8 only the decoder's linear layers are one byte."""
        if precision == "fp8":
            linear = self.layers * self.linear_params_per_layer
            return linear + 2 * (self.non_embedding_params - linear + self.embedding_params)
        return WEIGHT_BYTES[precision] * (self.non_embedding_params + self.embedding_params)

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    def transformers_config(self, dtype: str = "bfloat16", **overrides):
        """The transformers config of this shape (for a model built in memory with random weights)."""
        import transformers

        config_class = {"llama": transformers.LlamaConfig, "qwen3": transformers.Qwen3Config}[self.family]
        values = dict(
            vocab_size=self.vocab,
            hidden_size=self.hidden,
            intermediate_size=self.intermediate,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            head_dim=self.head_dim,
            tie_word_embeddings=self.tied_embeddings,
            rms_norm_eps=self.rms_norm_eps,
            rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta},
            max_position_embeddings=40960,
            dtype=dtype,
        )
        return config_class(**{**values, **overrides})


PUBLISHED = {
    LLAMA_33_70B: Shape("Llama-3.3-70B", "llama", 8192, 28672, 80, 64, 8, 128, 128256, False, 500000.0, 1e-5),
    LLAMA_31_8B: Shape("Llama-3.1-8B", "llama", 4096, 14336, 32, 32, 8, 128, 128256, False, 500000.0, 1e-5),
    QWEN3_RERANKER_06B: Shape("Qwen3-Reranker-0.6B", "qwen3", 1024, 3072, 28, 16, 8, 128, 151669, True, 1e6, 1e-6),
}
# Tiny shapes of the same layouts, for the benchmark's CPU test.
TINY = {
    "tiny-llama": Shape("tiny-llama", "llama", 64, 128, 2, 4, 2, 16, 30600, False, 500000.0, 1e-5),
    "tiny-qwen3": Shape("tiny-qwen3", "qwen3", 64, 128, 2, 4, 2, 16, 30600, True, 1e6, 1e-6),
}


def shape_from_config(config, name: str = "") -> Shape:
    """A `Shape` from a transformers config (read from a model folder's config.json, no weights loaded)."""
    family = "qwen3" if config.model_type.startswith("qwen3") else "llama"
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    rope = getattr(config, "rope_parameters", None) or {}
    return Shape(
        name or getattr(config, "_name_or_path", "") or config.model_type,
        family,
        config.hidden_size,
        config.intermediate_size,
        config.num_hidden_layers,
        heads,
        getattr(config, "num_key_value_heads", None) or heads,
        head_dim,
        config.vocab_size,
        bool(getattr(config, "tie_word_embeddings", False)),
        float(rope.get("rope_theta", 10000.0)),
        float(getattr(config, "rms_norm_eps", 1e-6)),
    )


def prompt_flops(shape: Shape, tokens: float, cached_tokens: float = 0.0) -> float:
    """FLOPs of one forward over `tokens` positions of which the first `cached_tokens` come from a cache: 2 x
    non-embedding params per processed token, plus causal attention (QK^T and AV: position p attends over p
    tokens at 4 x layers x attention width FLOPs per token pair, so positions [S, L) cost
    2 x layers x width x (L^2 - S^2))."""
    return 2 * shape.non_embedding_params * (tokens - cached_tokens) + 2 * shape.layers * shape.attention_width * (
        tokens**2 - cached_tokens**2
    )
