"""A document-first prompt on vLLM: what automatic prefix caching leaves to compute, and the hit rate it implies.

The judge stage lays a document-first prompt's pairs out by (question, document) (generation/stages/judge.py,
`pairs_of`), and the vLLM backend sends each document's requests together (generation/backends/request_order.py).
vLLM keeps KV in blocks of `block_size` tokens (16 unless `judge.engine_args.block_size` sets it:
vllm/config/cache.py, CacheConfig.DEFAULT_BLOCK_SIZE) and a request reuses the full blocks of its prompt that an
earlier request computed (docs.vllm.ai, design/prefix_caching). So of a document's g requests the first computes its
whole prompt, and each of the other g - 1 finds floor(prefix / block) x block tokens cached. The share of prompt
tokens found cached is the hit rate vLLM reports: `RequestOutput.num_cached_tokens` per request, "Prefix cache hit
rate" in its logs. Without `enable_prefix_caching` every request computes its whole prompt.

The plan prices the requests that find their document cached (a sub-question's tokens, and the prefix's last
partial block, against the cached document) at the calibration's suffix share: vLLM batches them its own way, which
was not measured, so the kit's measured suffix batches stand in.
"""

from __future__ import annotations

from dataclasses import dataclass

from generation.model_shapes import Shape, prompt_flops
from generation.planning.document_first import Groups

VLLM_BLOCK_SIZE = 16  # vllm/config/cache.py: CacheConfig.DEFAULT_BLOCK_SIZE


@dataclass(frozen=True)
class PrefixCache:
    enabled: bool
    block: int = VLLM_BLOCK_SIZE

    @classmethod
    def of(cls, judge_config) -> PrefixCache:
        engine = getattr(judge_config, "engine_args", None) or {}
        return cls(
            bool(getattr(judge_config, "enable_prefix_caching", True)), int(engine.get("block_size") or VLLM_BLOCK_SIZE)
        )

    def cached_tokens(self, groups: Groups) -> int:
        """Tokens a request after its document's first finds cached: the prefix's full blocks."""
        return int(groups.prefix_tokens // self.block) * self.block if self.enabled else 0

    def later_requests(self, groups: Groups) -> float:
        """The share of a document's requests that come after its first: they find its blocks cached."""
        return 1 - 1 / groups.pairs_per_group if self.enabled and groups.pairs_per_group >= 1 else 0.0

    def hit_rate(self, groups: Groups) -> float:
        """The share of prompt tokens found cached over a document's requests."""
        return self.later_requests(groups) * self.cached_tokens(groups) / (groups.prefix_tokens + groups.suffix_tokens)

    def split_flops(self, shape: Shape, groups: Groups) -> tuple[float, float]:
        """Per pair: (FLOPs of the first requests, each a whole prompt; FLOPs of the later ones, each its uncached
        tokens against the cached blocks)."""
        tokens, later = groups.prefix_tokens + groups.suffix_tokens, self.later_requests(groups)
        return (1 - later) * prompt_flops(shape, tokens), later * prompt_flops(
            shape, tokens, self.cached_tokens(groups)
        )

    def line(self, prompt: str, label: str, groups: Groups) -> str:
        if not self.enabled:
            return (
                f"vllm, {prompt}, {label}: enable_prefix_caching is off, so every request computes its whole prompt "
                "(the document-first prompt then saves nothing: turn it on)"
            )
        return (
            f"vllm, {prompt}, {label}: a document's {groups.pairs_per_group:.2f} requests sent together; the first "
            f"computes its {groups.prefix_tokens:,.0f}-token prefix, the others find {self.cached_tokens(groups):,} "
            f"of it in full {self.block}-token blocks: an expected prefix-cache hit rate of "
            f"{self.hit_rate(groups):.1%} of prompt tokens (vLLM reports it: RequestOutput.num_cached_tokens, "
            "'Prefix cache hit rate' in its log); their own tokens priced at the suffix share"
        )
