"""What the transformers backend's batches of several documents hold at a model's shape, before and after the
kit's GPU changes, from the code alone (no GPU, no model): docs/performance.md's "expected" table.

    python scripts/expected_document_batches.py                      (Llama-3.3-70B, fp8, an H100's 12,738 tokens)
    python scripts/expected_document_batches.py --budget 30000 --prefix 2500

`--documents` documents of a `--prefix`-token prefix and `--subquestions` suffixes of `--suffix` tokens each, the
judge in generate mode; `--logits-documents` documents for the logits row (the paper profile's 256 pairs a batch are
18 documents of 14 sub-questions). The batches are the kit's own cut (DocumentBatches), before with a held prefix
counted as a whole token and no logits (the cost of old), now with batching.token_costs. Bytes are the tensors the
code makes, at the shape's sizes and bf16 activations.
"""

from __future__ import annotations

import argparse

from generation.backends.batching import token_costs
from generation.backends.document_batches import DocumentBatches
from generation.model_shapes import LLAMA_33_70B, PUBLISHED

DIGITS = 6


def rows(shape, budget: int, documents: int, prefix: int, subquestions: int, suffix: int, logits_documents: int):
    """(what, before, now) rows of the table."""
    dtype = 2
    sequences = [[d + 1] * prefix + [documents + 1 + k] * suffix for d in range(documents) for k in range(subquestions)]
    keys = [d for d in range(documents) for _ in range(subquestions)]

    def cut(plan: DocumentBatches) -> tuple[int, int]:
        first = plan.cut(list(range(len(sequences))), 256, budget)[0]
        groups = plan.groups(first)
        return len(groups), len(plan.passes([plan.prefix_lengths[g] for g in groups]))

    before, (now, passes) = (
        cut(DocumentBatches(sequences, keys))[0],
        cut(DocumentBatches(sequences, keys, token_costs(shape, dtype))),
    )
    row_layout = before * subquestions  # generate mode of old: a row per sub-question
    keys_a_row, queries = prefix + suffix, subquestions * suffix
    kv_a_token = 2 * shape.kv_heads * shape.head_dim * dtype  # keys and values of one layer
    repeated = row_layout * keys_a_row * 2 * shape.heads * shape.head_dim * dtype
    folded_mask = before * (shape.heads // shape.kv_heads) * queries * (prefix + queries) * dtype
    pairs = logits_documents * subquestions
    return [
        (
            f"keys and values copied per query head, generate mode, {before} documents",
            f"{repeated / 1e9:.1f} GB a layer ({row_layout} rows x {keys_a_row:,} keys)",
            f"none (a {folded_mask / 1e6:.0f} MB mask a layer)",
        ),
        (
            "a layer's prefix copies, generate mode, each forward",
            f"{row_layout * keys_a_row * kv_a_token / 1e9:.2f} GB (one per sub-question)",
            f"{before * (prefix + queries) * kv_a_token / 1e6:.0f} MB (one per document)",
        ),
        ("host-to-device copies a layer, generate mode", "2 a document (its row index)", "none"),
        (
            f"logits to the host, {logits_documents} documents x {subquestions} sub-questions",
            f"{pairs * shape.vocab * 4 / 1e6:.0f} MB a batch",
            f"{pairs * DIGITS * 8 / 1e3:.0f} KB",
        ),
        (
            f"documents a suffix forward ({prefix:,}-token documents, {subquestions} sub-questions)",
            str(before),
            f"{now}, in {passes} prefix passes",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=12738, help="max_batch_tokens (auto on one H100: 12,738)")
    parser.add_argument("--documents", type=int, default=12)
    parser.add_argument("--prefix", type=int, default=3000, help="tokens of a document's prefix")
    parser.add_argument("--subquestions", type=int, default=14)
    parser.add_argument("--suffix", type=int, default=20, help="tokens of a sub-question's suffix")
    parser.add_argument("--logits-documents", type=int, default=18)
    args = parser.parse_args()
    shape = PUBLISHED[LLAMA_33_70B]
    print(f"| at the 70B shape, fp8, budget {args.budget:,} tokens | before | now |")
    print("| --- | --- | --- |")
    for what, before, now in rows(
        shape, args.budget, args.documents, args.prefix, args.subquestions, args.suffix, args.logits_documents
    ):
        print(f"| {what} | {before} | {now} |")


if __name__ == "__main__":
    main()
