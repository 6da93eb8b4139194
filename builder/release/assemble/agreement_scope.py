"""Which of a release's splits the card's label-agreement section is about. `researchy-subq agreement` compares two
label sets by their paths and records only those paths and the shared pairs' count. The card can name the splits
when one side is a judgments folder the release was built from and every graded pair of it is shared: the shared
pairs are then that folder's graded judgments, counted here by the release split their question is in (a judgments
folder holds Researchy's split: its train questions are this release's `train` and `dev`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from builder.analysis.agreement import short_path
from builder.release.layout import SPLITS, config
from generation.storage.shards import stage_files

BATCH_ROWS = 262_144
UNKNOWN = (
    "Which of this release's splits these pairs are in is not known here: neither label set is a judgments folder "
    "this release was built from with every graded pair shared."
)


def question_splits(release: Path) -> dict[str, str]:
    """qid -> its split in the release (the `questions` config)."""
    import pyarrow.parquet as pq

    return {
        qid: split
        for split in SPLITS
        for path in config("questions").files(Path(release), split)
        for qid in pq.read_table(path, columns=["qid"])["qid"].to_pylist()
    }


def graded_by_split(folder: Path, splits_of: dict[str, str]) -> Counter:
    """The graded judgments (level not null) of a judgments folder, counted by their question's release split."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    counts: Counter = Counter()
    for path in stage_files(folder, "judgments", full=False):  # the build has just read them whole
        for batch in pq.ParquetFile(path).iter_batches(BATCH_ROWS, columns=["qid", "level"]):
            graded = batch.column(0).filter(pc.is_valid(batch.column(1)))
            for row in pc.value_counts(graded).to_pylist():
                counts[splits_of.get(row["values"], "none")] += row["counts"]
    return counts


def agreement_scope(result: dict, judgments: list[Path], release: Path) -> str:
    """The section's scope sentence: the release splits of the shared pairs, or that they are not known."""
    inputs = {Path(folder).resolve() for folder in judgments}
    coverage = result["coverage"]
    for side in ("a", "b"):
        folder = Path(result[side]).resolve()
        if folder not in inputs or coverage[f"only_{side}"]:
            continue
        counts = graded_by_split(folder, question_splits(release))
        if sum(counts.values()) != coverage["both"] or "none" in counts:
            continue
        where = [f"`{split}` ({counts[split]:,})" for split in SPLITS if counts[split]]
        return (
            f"The {coverage['both']:,} shared pairs are the graded judgments of `{short_path(result[side])}`, a "
            f"judgments folder this release was built from; here they are in "
            + (", ".join(where[:-1]) + " and " + where[-1] if len(where) > 1 else where[0])
            + "."
        )
    return UNKNOWN
