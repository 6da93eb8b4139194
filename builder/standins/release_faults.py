"""Release corruptions that only a semantic check can catch: each edits what other columns determine (a level's
raw, a source, a derived config, the card's prompt or plot) and then RE-SEALS the release as a careless merge
script or hand fix would: checksums, sizes and row counts in the manifest, the statistics in the manifest and
the card, the YAML's counts and sizes and the plot are made consistent with the edited data again. What is left
for `validate` is to re-derive the determined values (builder/release/validate/: rederive.py, derived.py,
card.py).

Used by scripts/hostile.py (the figures of docs/benchmarks.md), tests/builder/release/validate/test_rederive.py and
tests/builder/release/assemble/test_training_configs.py.
`GENERATE_FAULTS` run on a generate-mode release (the `paper` profile), `DISTRIBUTION_FAULTS` on a
distribution-mode one; each maps a name to (corrupt(release), the checks that may fail, the one that must).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from builder.standins.release_edits import (  # noqa: F401 - data_file and rewrite are imported from here too
    data_file,
    edit_card,
    edit_manifest,
    first_list,
    other_url_hash,
    plot_of_other_counts,
    prompt_hash_everywhere,
    queries_rows,
    reseal,
    rewrite,
    sealed,
    set_column,
    set_first,
    set_where,
)

GENERATE_FAULTS = {
    "raw that parses to another level": (
        sealed(lambda r: rewrite(data_file(r, "judgments/level_3"), lambda t: set_first(t, "raw", "5"))),
        {"level"},
        "level",
    ),
    "an unparsed judgment's status changed": (
        sealed(lambda r: rewrite(data_file(r, "judgments/unparsed"), lambda t: set_first(t, "status", "negative"))),
        {"level"},
        "level",
    ),
    "source that is not what the pool rule admits": (
        sealed(
            lambda r: rewrite(
                data_file(r, "judgments/level_4"),
                lambda t: set_where(t, "source", pc.equal(t["source"], "bm25"), "clicked"),
            )
        ),
        {"provenance"},
        "provenance",
    ),
    "a BM25 rank beyond the profile's depth": (
        sealed(lambda r: rewrite(data_file(r, "judgments/level_2"), lambda t: set_first(t, "bm25_rank", 150))),
        {"provenance"},
        "provenance",
    ),
    "qrels-binary score flipped": (
        sealed(
            lambda r: rewrite(data_file(r, "qrels_binary"), lambda t: set_first(t, "score", 1 - t["score"][0].as_py()))
        ),
        {"qrels-binary"},
        "qrels-binary",
    ),
    "diversity-qrels subtopic renumbered": (
        sealed(
            lambda r: rewrite(
                data_file(r, "diversity_qrels"), lambda t: set_first(t, "subtopic", t["subtopic"][0].as_py() + 1)
            )
        ),
        {"diversity-qrels"},
        "diversity-qrels",
    ),
    "queries text edited": (
        sealed(lambda r: rewrite(data_file(r, "queries"), lambda t: set_first(t, "text", "an edited sub-question?"))),
        {"queries"},
        "queries",
    ),
    "corpus-ids url_hash edited": (
        sealed(lambda r: rewrite(data_file(r, "corpus_ids"), other_url_hash)),
        {"corpus-ids"},
        "corpus-ids",
    ),
    "corpus-ids row dropped": (
        sealed(lambda r: rewrite(data_file(r, "corpus_ids"), lambda t: t.slice(1))),
        {"corpus-ids", "card-training"},
        "corpus-ids",
    ),
    "corpus-ids URL for a document nobody clicked": (
        sealed(
            lambda r: rewrite(
                data_file(r, "corpus_ids"),
                lambda t: set_where(t, "url", pc.is_null(t["url"]), "https://example.com/made-up"),
            )
        ),
        {"corpus-ids"},
        "corpus-ids",
    ),
    "a judged document with two url_hash values": (
        sealed(lambda r: rewrite(data_file(r, "judgments/level_1"), other_url_hash)),
        {"corpus-ids"},
        "corpus-ids",
    ),
    "the card's verbatim prompt edited": (
        sealed(lambda r: edit_card(r, "\nRating:\n```", "\nScore:\n```")),
        {"prompt"},
        "prompt",
    ),
    "the prompt hash changed in manifest and card": (
        sealed(lambda r: prompt_hash_everywhere(r, "f" * 64)),
        {"prompt", "level"},
        "prompt",
    ),
    "the plot of other counts": (sealed(lambda r: plot_of_other_counts(r, False), plot=False), {"plot"}, "plot"),
    "the plot's pixels of other counts": (
        sealed(lambda r: plot_of_other_counts(r, True), plot=False),
        {"plot"},
        "plot",
    ),
    "a configs-table count in the card": (
        lambda r: edit_card(r, f"| `queries` | {queries_rows(r):,}", "| `queries` | 1"),
        {"figures"},
        "figures",
    ),
    "hard-negatives out of hardness order": (
        sealed(
            lambda r: rewrite(
                data_file(r, "hard_negatives"),
                lambda t: set_first(
                    t, "negative_document_ids", first_list(t, "negative_document_ids", lambda n: [n[1], n[0], *n[2:]])
                ),
            )
        ),
        {"training", "card-training"},
        "training",
    ),
    "hard-negatives: the positive among its own negatives": (
        sealed(
            lambda r: rewrite(
                data_file(r, "hard_negatives"),
                lambda t: set_first(
                    t,
                    "negative_document_ids",
                    [t["positive_document_ids"][0][0].as_py(), *t["negative_document_ids"][0].as_py()[1:]],
                ),
            )
        ),
        {"training", "card-training"},
        "training",
    ),
    "hard-negatives: a negative's source named wrong": (
        sealed(
            lambda r: rewrite(
                data_file(r, "hard_negatives"),
                lambda t: set_first(
                    t,
                    "negative_sources",
                    first_list(
                        t, "negative_sources", lambda s: ["other_question" if s[0] == "judged" else "judged", *s[1:]]
                    ),
                ),
            )
        ),
        {"training", "card-training"},
        "training",
    ),
    "hard-negatives row dropped": (
        sealed(lambda r: rewrite(data_file(r, "hard_negatives"), lambda t: t.slice(1))),
        {"training", "card-training"},
        "training",
    ),
    "graded-lists label changed": (
        sealed(
            lambda r: rewrite(
                data_file(r, "graded_lists"),
                lambda t: set_first(t, "labels", first_list(t, "labels", lambda n: [(n[0] + 1) % 6, *n[1:]])),
            )
        ),
        {"training"},
        "training",
    ),
    "manifest's short_positives edited": (
        lambda r: edit_manifest(
            r, lambda m: m["training"].update(short_positives=m["training"]["short_positives"] + 1)
        ),
        {"training", "card-statements"},  # the card's scope sentence, rendered from the manifest, no longer matches
        "training",
    ),
}


def probs_edited(change):
    def edit(t: pa.Table) -> pa.Table:
        row = pc.index(pc.is_valid(t["probs"]), True).as_py()
        values = t["probs"].to_pylist()
        values[row] = change(values[row])
        return set_column(t, "probs", pa.array(values, t.schema.field("probs").type))

    return lambda r: rewrite(data_file(r, "judgments/level_3"), edit)


def swap_top(probs: list[float]) -> list[float]:
    """The largest probability moved to the level below (level 3's row: to level 2)."""
    probs[2], probs[3] = probs[3], probs[2]
    return probs


DISTRIBUTION_FAULTS = {
    # graded-lists carries each judgment's probs and expected: edited in the judgments alone, they differ there too
    "probabilities that do not sum to 1": (
        sealed(probs_edited(lambda p: [x * 0.9 for x in p])),
        {"distribution", "training"},
        "distribution",
    ),
    "a level that is not the argmax": (sealed(probs_edited(swap_top)), {"distribution", "training"}, "distribution"),
    "expected edited": (
        sealed(
            lambda r: rewrite(
                data_file(r, "judgments/level_3"), lambda t: set_first(t, "expected", t["expected"][0].as_py() + 0.5)
            )
        ),
        {"distribution", "training"},
        "distribution",
    ),
    "raw that is not the level's digit": (
        sealed(lambda r: rewrite(data_file(r, "judgments/level_3"), lambda t: set_first(t, "raw", "2"))),
        {"distribution"},
        "distribution",
    ),
    "graded-lists probabilities edited": (
        sealed(
            lambda r: rewrite(
                data_file(r, "graded_lists"),
                lambda t: set_first(t, "probs", first_list(t, "probs", lambda p: [p[0][::-1], *p[1:]])),
            )
        ),
        {"training"},
        "training",
    ),
    "graded-lists expected dropped": (
        sealed(
            lambda r: rewrite(
                data_file(r, "graded_lists"), lambda t: set_first(t, "expected", None, t.schema.field("expected").type)
            )
        ),
        {"training"},
        "training",
    ),
}

# The report's check names, by the short keys above (builder/release/validate/: rederive.py CHECKS, derived.py CHECKS,
# card.py's checks).
CHECK_NAMES = {
    "level": "level and status are what the judge's rule gives",
    "distribution": "distribution mode: probs sum to 1",
    "provenance": "source is what the profile's pool rule admits first",
    "qrels-binary": "qrels-binary is the graded judgments",
    "diversity-qrels": "diversity-qrels is the graded judgments",
    "queries": "queries are the sub-questions",
    "corpus-ids": "corpus-ids are exactly the distinct judged documents",
    "prompt": "the card's verbatim judge prompt",
    "figures": "the card's configs table",
    "plot": "level_distribution.png draws",
    "training": "hard-negatives and graded-lists are what the judgments give",
    "card-training": "the card's training statements",
    "card-statements": "the card's statements of an order, a scope, a kind and a method",
}


def failed_keys(report) -> set[str]:
    """The short keys of the report's failed checks ("other" for a check outside CHECK_NAMES)."""
    found = set()
    for check in report.checks:
        if not check.ok:
            found.add(next((k for k, name in CHECK_NAMES.items() if check.name.startswith(name)), check.name))
    return found
