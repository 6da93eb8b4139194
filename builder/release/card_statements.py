"""The card's statements of an order, a scope, a kind and a method, each in words rendered from the code that
defines it: a sort key (`order_text`), the negatives' source labels (`source_kinds`), the quantile function
(`quartiles`), the splits a count covers (`negatives_sentence`, `positives_sentence`, `unparsed_sentence`; the
negatives per split are counted by builder/release/ranking_documents.py `negatives_by_split`).

assemble/card.py writes them into the card; `validate` renders them again from what it finds in the data and its own
re-derivation, and finds every place the card states each one (builder/release/validate/card_statements.py). The
model card (builder/training/model_card.py) names the negatives' kinds with the same words."""

from __future__ import annotations

from collections import Counter
from typing import Final

import numpy as np

from builder.release.training_rule import SOURCES

# ---- order: a pyarrow sort key, in words
COLUMN_WORDS = {"level": "level", "rerank_rank": "rerank rank", "bm25_rank": "BM25 rank", "docid": "docid"}
RANKS = ("rerank_rank", "bm25_rank")  # the key's nullable columns: a document one run did not retrieve has no rank
GRADED_LIST_LEAD = "level descending"  # every statement of a graded list's order begins so


def order_text(key: list[tuple]) -> str:
    """`[("level", "descending"), ("rerank_rank", "ascending", "at_end"), ...]` as 'level descending, then rerank
    rank, then BM25 rank (a missing rank last), then docid'. A key without a null placement puts nulls "at_end", as
    pyarrow.compute.sort_indices does (pyarrow.compute.SortOptions)."""
    words = [
        COLUMN_WORDS[column] + (" descending" if direction == "descending" else "") for column, direction, *_ in key
    ]
    ranks = [i for i, (column, *_) in enumerate(key) if column in RANKS]
    if ranks:
        placements = {(key[i][2] if len(key[i]) > 2 else "at_end") for i in ranks}
        words[ranks[-1]] += " (a missing rank last)" if placements == {"at_end"} else " (a missing rank first)"
    return ", then ".join(words)


# ---- method: the completeness quartiles
# numpy.quantile's default `method`, and pandas' default `interpolation` of Series.quantile (Final: numpy types the
# argument as a Literal)
QUARTILE_METHOD: Final = "linear"
QUARTILE_WORDS = "numpy.quantile, method 'linear': the default of numpy and pandas"


def quartiles(values) -> list[float]:
    """The 25th, 50th and 75th percentiles of `values` by numpy.quantile's QUARTILE_METHOD, to 4 places."""
    points = np.quantile(np.asarray(values, np.float64), [0.25, 0.5, 0.75], method=QUARTILE_METHOD)
    return [round(float(p), 4) for p in points]


# ---- kind: what each source of hard negatives is
def source_kinds(negative_level: int | str) -> dict[str, str]:
    """Each `negative_sources` label in words: judged for the sub-question or not (builder/release/assemble/
    hard_negatives.py states the rule). `negative_level` is a level, or the setting's name where none is known."""
    return {
        "judged": f"judged at level <= {negative_level} for the sub-question",
        "retrieved_unjudged": "retrieved for the question, never judged",
        "other_question": f"judged at level <= {negative_level} for another question's sub-question, never for this "
        "question",
    }


def sources_text(negative_level: int | str) -> str:
    """Every source with its kind: '`judged` = judged at level <= 1 for the sub-question; ...'."""
    return "; ".join(f"`{source}` = {kind}" for source, kind in source_kinds(negative_level).items())


# ---- scope: which splits a count covers
NEGATIVES_LEAD = "Negatives by source"
POSITIVES_LEAD = "Over all splits,"
UNPARSED_LEAD = "Outputs without a usable digit"


def negatives_sentence(by_split: dict[str, Counter]) -> str:
    """'Negatives by source, per split: train `judged` 824 (22.3%), ...; dev ...' (every source, one split each)."""
    parts = []
    for split, counts in by_split.items():
        total = sum(counts.values()) or 1
        named = [*SOURCES, *sorted(set(counts) - set(SOURCES))]  # a label the kit does not make is shown, not hidden
        parts.append(
            split + " " + ", ".join(f"`{s}` {counts.get(s, 0):,} ({counts.get(s, 0) / total:.1%})" for s in named)
        )
    return f"{NEGATIVES_LEAD}, per split: " + ("; ".join(parts) if parts else "none") + "."


def positives_sentence(positives: int, short: int, negatives: int) -> str:
    """The positives with a row, summed over every split (manifest.json `training`)."""
    return (
        f"{POSITIVES_LEAD} {positives - short:,} of {positives:,} positives have a row ({short:,} left out: every "
        f"source together gave fewer than {negatives})."
    )


def unparsed_sentence(unparsed: dict[str, int]) -> str:
    """Where the judgments without a level are: the `unparsed` config's rows per split, or its absence."""
    total = sum(unparsed.values())
    where = (
        "`unparsed` config: " + ", ".join(f"{split} {n:,}" for split, n in unparsed.items() if n)
        if total
        else "`unparsed` config; none in this release, so the config is left out"
    )
    return f"{UNPARSED_LEAD} are kept with `level` null and a `status` saying why ({where})."


def card_statements(list_order: list[tuple], training, by_split: dict[str, Counter], unparsed: dict[str, int]) -> dict:
    """The statements the card template reads (`statements.*`): from a graded-list sort key, the manifest's training
    record (contract.py TrainingRecord), the hard-negatives' sources per split and the `unparsed` rows per split."""
    return {
        "graded_order": order_text(list_order),
        "sources": source_kinds(training.negative_level),
        "positives": positives_sentence(training.positives, training.short_positives, training.negatives),
        "negatives": negatives_sentence(by_split),
        "unparsed": unparsed_sentence(unparsed),
    }
