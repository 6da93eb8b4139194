"""The parts of the dataset card that `validate` renders again from the numbers it derives, and compares verbatim:
the statistics section, the configs table, the published configs and their byte counts, and the level plot. Both
assemble/card.py (which writes them) and validate/card.py (which checks them) import this module; the numbers
each passes in are its own."""

from __future__ import annotations

from pathlib import Path

from builder.release.card_statements import QUARTILE_WORDS
from builder.release.contract import ComplexityStats, ProvenanceShare, SplitStats
from builder.release.layout import ARROW_NBYTES, CONFIGS
from generation.storage.atomic_files import replace_file

PLOT = "level_distribution.png"


PLOT_COUNTS = "researchy-subq:level-counts"  # PNG text chunk: the counts the plot draws, which `validate` checks


STATS_BEGIN, STATS_END = "<!-- statistics:begin -->", "<!-- statistics:end -->"


def splits_with_rows(rows: dict, config_name: str, splits: list[str]) -> list[str]:
    return [s for s in splits if rows.get(config_name, {}).get(s, 0) > 0]


def published_configs(rows: dict, splits: list[str]):
    """Configs with at least one row (load_dataset refuses a config or split with no data)."""
    return [c for c in CONFIGS if splits_with_rows(rows, c.name, splits)]


def arrow_bytes(files: list[Path]) -> int:
    """A split's num_bytes: the Arrow size of its rows as `datasets` counts it (the nbytes of the tables it
    writes after reading the Parquet files), recorded in each file's footer by the release writer
    (`layout.read_back_nbytes`, within 0.5% of datasets' own count)."""
    import pyarrow.parquet as pq

    total = 0
    for path in files:
        metadata = pq.read_metadata(path).metadata or {}
        if ARROW_NBYTES not in metadata:
            raise ValueError(f"{path}: no {ARROW_NBYTES.decode()} in its footer: not written by build-release")
        total += int(metadata[ARROW_NBYTES])
    return total


def stats_markdown(stats: dict[str, SplitStats]) -> str:
    """The card's statistics section; `validate` recomputes it from the data and compares it verbatim."""
    lines = [STATS_BEGIN]
    for split, s in stats.items():
        lines += [
            f"### {split}",
            "",
            f"{s.judgments:,} judgments over {s.subquestions:,} sub-questions "
            f"({s.subquestions_judged:,} with at least one judgment).",
            "",
            "| level | count | per sub-question |",
            "| --- | ---: | ---: |",
        ]
        lines += [f"| {r.level} | {r.count:,} | {r.per_subquestion} |" for r in s.table1]
        per, share, clicked = s.judgments_per_subquestion, s.provenance_share, s.clicked
        lines += [
            "",
            f"Judgments per sub-question: mean {per.mean}, min {per.min:,}, max {per.max:,}.",
            "",
            "Where the judged documents came from (shares of judgments; k is the profile's pool depth): "
            f"BM25 top-k only {share.bm25_only:.2%}, reranker top-k only {share.rerank_only:.2%}, "
            f"both {share.bm25_and_rerank:.2%}, clicked only {share.clicked_only:.2%}." + provenance_note(share),
            "",
            "Judgment status: "
            + ", ".join(f"{k} {v:,}" for k, v in s.counts["status"].items())
            + f"; contexts cut further by tokens to fit the judge's max_model_len: "
            f"{s.context_cut_by_tokens:,}.",
            "",
            f"Clicked documents judged: {clicked.judged:,} of {clicked.in_questions:,} "
            f"({clicked.coverage:.2%}); the rest are not in the indexed corpus.",
            "",
        ]
        lines += complexity_paragraph(s.complexity)
    lines.append(STATS_END)
    return "\n".join(lines)


def complexity_paragraph(c: ComplexityStats) -> list[str]:
    """The split's retrieval-complexity figures; none when no question was judged (then only `questions` is set)."""
    if not c.questions or c.completeness_quartiles is None:
        return []
    q1, median, q3 = c.completeness_quartiles
    return [
        f"Retrieval complexity ({c.questions:,} questions, after Gabburo et al., arXiv:2406.03592, with sub-questions "
        f"as parts): {c.answerable_share:.2%} answerable by one document; on average "
        f"{c.mean_subquestions_answerable:.2%} of a question's sub-questions are answered by some "
        f"candidate; completeness quartiles {q1} / {median} / {q3} ({QUARTILE_WORDS}; completeness = "
        "(1/|D+|) sum over d in D+ of log(m_d)/log(K), m_d the number of the question's K "
        "sub-questions candidate d answers at level >= the profile's answer level, D+ the candidates "
        "with m_d >= 1; 1 when K = 1); "
        f"{c.retrieval_complex_share:.2%} retrieval-complex (columns `answerable`, "
        "`answerable_share`, `completeness`, `retrieval_complex` of the `questions` config).",
        "",
    ]


def provenance_note(share: ProvenanceShare) -> str:
    if share.bm25 == share.rerank == 0:
        return " No judgment has a BM25 or reranker rank (no pool provenance, as for imported labels)."
    if share.bm25_only == share.rerank_only:
        return (
            " With the same k for both lists, the two 'only' shares are equal by construction; 'both' says how far "
            "the reranker kept BM25's top k."
        )
    return ""


def config_rows(rows: dict, splits: list[str]) -> list[dict]:
    return [
        {
            "name": c.name,
            "description": c.description
            + ("" if c in published_configs(rows, splits) else " (no rows in this release: not published)"),
            "rows": " / ".join(f"{rows.get(c.name, {}).get(s, 0):,}" for s in splits),
        }
        for c in CONFIGS
    ]


def plot_counts(stats: dict[str, SplitStats]) -> dict[str, dict[str, int]]:
    """What the level plot draws: per split, Table 1's count of each level (and Other)."""
    return {split: {r.level: r.count for r in s.table1} for split, s in stats.items()}


def plot_levels(out: Path, stats: dict[str, SplitStats]) -> Path:
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=120)
    width = 0.8 / max(len(stats), 1)
    for i, (split, s) in enumerate(stats.items()):
        labels = [r.level for r in s.table1]
        total = s.judgments or 1
        ax.bar(
            [x + i * width for x in range(len(labels))],
            [r.count / total for r in s.table1],
            width,
            label=f"{split} ({s.judgments:,})",
        )
        ax.set_xticks([x + width * (len(stats) - 1) / 2 for x in range(len(labels))], labels)
    ax.set_xlabel("level")
    ax.set_ylabel("share of judgments")
    ax.set_title("Judgments by level")
    ax.legend()
    fig.tight_layout()
    try:
        return replace_file(
            out,
            PLOT,
            lambda tmp: fig.savefig(
                tmp, format="png", metadata={PLOT_COUNTS: json.dumps(plot_counts(stats), sort_keys=True)}
            ),
        )
    finally:
        plt.close(fig)
