"""Backends: what turns the kit's prompts into grades (the judge) and scores (the reranker).

Each backend is one module with a `make_judge(config)` and/or a `make_scorer(config)`, and one entry in
generation/profiles/backend_registry.py. The entries are import paths, so a backend's heavy engine (torch, vLLM, an HTTP
client) loads only when it is used.
`transformers` runs anywhere (CPU or GPU), `vllm` on GPUs (tested on vLLM's CPU build by `make test-vllm`), and
`bi-encoder` is the MiniLM stand-in for machines without the models.
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec

from generation.errors import BackendError
from generation.profiles.backend_registry import ENGINES, JUDGE_BACKENDS, RERANK_BACKENDS


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


class NotRunnableHere(BackendError):
    """A judge setting this machine cannot run (an engine not installed, fp8 without a GPU that runs it): one line
    naming the setting and what to do, before anything is written."""


def refuse_unrunnable(config, section: str = "judge") -> None:
    """Refuses, before a model loads or a lock or chunk is written, what the section (`judge`) asks and this machine
    cannot run: a backend whose engine is not installed (backend_registry.ENGINES), and on the transformers backend
    `quantization: fp8` without a CUDA GPU of compute capability >= 8.9 (placement.check_fp8_device, torchao's rule)
    or without torchao, and `compile` without the compiler torch.compile needs on the device
    (compiled_suffixes.missing_compiler). Ray actors (backend ray) run on other machines: not checked here."""
    if config.backend in ENGINES and find_spec(ENGINES[config.backend][0]) is None:
        module, install = ENGINES[config.backend]
        raise NotRunnableHere(
            f"{section}.backend: {config.backend} needs the {module} package, which this environment lacks: {install}; "
            f"or set {section}.backend: transformers"
        )
    if config.backend != "transformers":
        return
    from generation.backends.compiled_suffixes import missing_compiler
    from generation.backends.hf import pick_device
    from generation.backends.placement import check_fp8_device

    device = pick_device(config.device)
    missing = missing_compiler(device) if config.compile else None
    if missing:
        raise NotRunnableHere(
            f"{section}.compile: {str(config.compile).lower()} needs {missing} on {device} (torch.compile's inductor "
            f"backend builds its kernels with it); or set {section}.compile: false"
        )
    if getattr(config, "quantization", None) != "fp8":
        return
    try:
        check_fp8_device(device, config.fp8_granularity)
    except ValueError as refused:  # "quantization: fp8 needs ..." or "judge.fp8_granularity: ..."
        setting = str(refused) if str(refused).startswith(f"{section}.") else f"{section}.{refused}"
        where = f"{section}.device: {config.device}" + (", no CUDA GPU visible" if config.device == "auto" else "")
        raise NotRunnableHere(f"{setting} ({where})") from None
    if find_spec("torchao") is None:
        raise NotRunnableHere(
            f"{section}.quantization: fp8 on the transformers backend needs torchao, which this environment lacks: "
            "pip install 'researchy-subq-judgments[fp8]'"
        )
