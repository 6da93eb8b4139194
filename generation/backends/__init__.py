"""Backends: what turns the kit's prompts into grades (the judge) and scores (the reranker).

Each backend is one module with a `make_judge(config)` and/or a `make_scorer(config)`, and one entry in
generation/backend_registry.py. The entries are import paths, so a backend's heavy engine (torch, vLLM, an HTTP client)
loads only when it is used.
`transformers` runs anywhere (CPU or GPU), `vllm` on GPUs (tested on vLLM's CPU build by `make test-vllm`), and
`bi-encoder` is the MiniLM stand-in for machines without the models.
"""

from __future__ import annotations

from importlib import import_module

from generation.backend_registry import JUDGE_BACKENDS, RERANK_BACKENDS


def _load(registry: dict[str, str], name: str, what: str):
    if name not in registry:
        raise ValueError(f"no {what} backend {name!r} (known: {', '.join(registry)})")
    module, function = registry[name].split(":")
    return getattr(import_module(module), function)


def make_judge(config, backend: str | None = None):
    """The judge of a profile's judge section, on `backend` (default: the section's own)."""
    return _load(JUDGE_BACKENDS, backend or config.backend, "judge")(config)


def make_scorer(config):
    """The reranker of a profile's rerank section."""
    return _load(RERANK_BACKENDS, config.backend, "rerank")(config)
