"""Backends turn token sequences into next-token log-probabilities or text; prompts live elsewhere.

`transformers` runs anywhere (CPU or GPU), `vllm` on GPUs (a thin adapter, tested on vLLM's CPU build by
`make test-vllm`), and the `bi-encoder` stand-in (MiniLM cosine similarity) where no LLM is at hand.
"""
