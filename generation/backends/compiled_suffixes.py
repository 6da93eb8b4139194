"""`compile: suffix`: a document-first judge's suffix forwards through torch.compile, its prefix passes eager.

The suffix forwards are the slot layout's (document_batches.py `SlotLayout`: a row per document, its sub-questions'
suffixes in slots) and, in generate mode, its decode steps (slot_steps.py). They are many and small; the prefix
passes are few, long and of widely varying shapes, so they stay eager. `compile: true` compiles every forward.

Four things keep one set of compiled graphs serving every batch (torch 2.13):
- Shapes are dynamic (`torch.compile(dynamic=True)`): a batch of other lengths reuses the graphs.
- The cache's update runs eagerly (document_batches.py `EagerLayoutCache`, its update marked
  `torch.compiler.disable`): it lays each document's held prefix out for its row, a Python loop over the batch's
  documents whose count and lengths change batch to batch. Compiled, a new count of documents compiles the whole
  forward again (what `compile: true` does in the slot layout: docs/performance.md). Each decoder layer breaks
  there instead, so a forward of L layers runs as a few graphs shared by all its layers.
- Those graphs take the layer's index as an input: by default torch.compile treats an integer attribute of a module
  as a constant and recompiles for each layer, up to its recompile limit (8: the torch.compile docs,
  `recompile_limit`), then runs the rest eagerly. Its `allow_unspec_int_on_nn_module` setting
  (torch/compiler/config.py) lets the index vary; it is set for these calls alone.
- No size is 1: torch.compile specializes a dimension of size 0 or 1 ("The Zero-One Specialization Problem",
  docs.pytorch.org/docs/main/compile/dynamic_shapes_zero_one_specialization.html), which would compile again for
  a batch of one document, one sub-question a document, or one-token suffixes. The slot layout is padded to at
  least LEAST_SIZE rows, slots and slot positions (padding attends to itself alone and is never read), and the
  batch's cost counts the padding (document_batches.py `DocumentBatches`, `compiled=True`).
The one choice left to the shapes is the grouped attention's (grouped_attention.py `folds_heads`: fold the query
heads or not, by the number of suffix positions): each way compiles once.

CUDA graphs (`mode="reduce-overhead"`) are not used: each layer's eager layout step sits between its graphs, and
every decode step's cache is longer than the last, so graphs would be recorded per layer piece and per step.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib.util import find_spec

import torch

LEAST_SIZE = 2  # rows, slots and slot positions of a compiled suffix forward: no dimension of size 1


class CompiledSuffixes:
    """The model's forward compiled for the suffix forwards (the model itself is left as it is: its prefix passes
    run eagerly)."""

    def __init__(self, model):
        self.compiled = torch.compile(model, dynamic=True)

    def __call__(self, **inputs):
        with torch.compiler.config.patch(allow_unspec_int_on_nn_module=True):
            return self.compiled(**inputs)


def missing_compiler(device: str) -> str | None:
    """What torch.compile's inductor backend lacks on `device`, in words, or None: triton on a CUDA GPU (its kernels'
    compiler), a C++ compiler on a CPU (torch/_inductor/config.py `cpp.cxx`: the `CXX` environment variable, else
    clang++ on macOS and g++ elsewhere)."""
    if device.startswith("cuda"):
        return None if find_spec("triton") is not None else "triton (pip install triton)"
    compiler = os.environ.get("CXX", "clang++" if sys.platform == "darwin" else "g++")
    return None if shutil.which(compiler) else f"a C++ compiler ({compiler} not found; set CXX)"


def compiled_suffixes(backend, section) -> CompiledSuffixes | None:
    """The compiled suffix forwards a backend's section asks for (`compile: suffix`), or None; refused, naming the
    setting, when the loaded model runs none (`without_suffix_forwards`)."""
    if section.compile != "suffix":
        return None
    reason = without_suffix_forwards(backend, getattr(section, "mode", None))  # the judge's mode; the reranker has none
    if reason is not None:
        raise ValueError(
            f"{section.SECTION}.compile: suffix compiles the slot layout's suffix forwards, and this model runs none: "
            f"{reason}. Set {section.SECTION}.compile: true (every forward) or false"
        )
    return CompiledSuffixes(backend.model)


def without_suffix_forwards(backend, mode: str | None) -> str | None:
    """Why a loaded model runs no compiled suffix forwards, in words, or None when it does: the slot layout needs
    full attention in every layer and sdpa or eager attention, and generate mode needs greedy decoding to be the
    argmax (hf.py `TransformersBackend._adopt`)."""
    if not backend.several_groups:
        return "its layers are not all full attention (a sliding window): one document's prefix a batch, no slots"
    if not backend.slot_layout:
        attention = backend.model.config._attn_implementation
        return f"its attention ({attention}) takes no 4D mask: a row per suffix, not the slot layout"
    if mode == "generate" and not backend.slot_generate:
        return "its generation config asks for logits processors: generate mode goes through generate()"
    return None
