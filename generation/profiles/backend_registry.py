"""The backends by name: each name's factory as an import path (generation/backends/__init__.py loads them).

Below the profiles, which take their `backend` choices from these names, and below the backends, which build
on the profiles: the paths are strings, so nothing here imports a backend or its engine.
"""

from __future__ import annotations

JUDGE_BACKENDS = {
    "transformers": "generation.backends.hf:make_judge",
    "vllm": "generation.backends.vllm_adapter:make_judge",
    "bi-encoder": "generation.backends.biencoder:make_judge",
    "openai": "generation.backends.openai_server:make_judge",
}
RERANK_BACKENDS = {
    "transformers": "generation.backends.hf:make_scorer",
    "vllm": "generation.backends.vllm_adapter:make_scorer",
    "bi-encoder": "generation.backends.biencoder:make_scorer",
}

# The engine a backend imports beyond the kit's own dependencies, and the extra that installs it (pyproject.toml).
ENGINES = {
    "vllm": ("vllm", "pip install 'researchy-subq-judgments[vllm]' (vLLM runs on a GPU machine)"),
}
