"""The documents a release's users bring texts for, counted by kind from the release's own files: the judged ones
(every split's `corpus-ids`) and the never-judged ones its `hard-negatives` rows name as negatives (source
`retrieved_unjudged`: retrieved for the question, left out of its pool). `researchy-subq texts` brings exactly these,
so they are the card's mteb corpus and `train`'s ranking set; the card states the counts (build-release) and
`validate` finds them there again (builder/release/validate/training_statements.py). The negatives of each split are
counted by source here too (`negatives_by_split`), for the card's shares (card_statements.py `negatives_sentence`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.layout import SPLITS, config
from generation.errors import InputError


def judged_docids(release: Path) -> pa.Table:
    """The docid of every judged document of the release, once each, over its splits (Arrow: ~30 bytes a document)."""
    release = Path(release)
    files = [p for split in SPLITS for p in config("corpus-ids").files(release, split)]
    if not files:
        raise InputError(release, 0, "no corpus-ids files (data/corpus_ids/SPLIT-*.parquet): not a release folder")
    ids = pa.chunked_array([pq.read_table(p, columns=["_id"])["_id"] for p in files])
    return pa.table({"docid": pc.unique(ids)})


BATCH_ROWS = 131_072  # hard-negatives rows read at a time: the negatives of all rows at once cost GBs at full scale


def unjudged_negatives(release: Path, judged: pa.Array) -> pa.Array:
    """Every docid the release's hard-negatives rows name as a negative and no judgment covers, once each. The rows
    are read a batch at a time; only the unjudged ones, few (those of `retrieved_unjudged`), are kept."""
    found: list[pa.Array] = []
    for split in SPLITS:
        for path in config("hard-negatives").files(Path(release), split):
            for batch in pq.ParquetFile(path).iter_batches(BATCH_ROWS, columns=["negative_document_ids"]):
                negatives = pc.list_flatten(batch.column(0)).cast(pa.string())
                found.append(pc.unique(negatives.filter(pc.invert(pc.is_in(negatives, value_set=judged)))))
    return pc.unique(pa.chunked_array(found, pa.string())) if found else pa.array([], pa.string())


def ranking_documents(release: Path) -> dict[str, int]:
    """{"judged": the judged documents, "unjudged_negatives": the never-judged negatives of hard-negatives}."""
    judged = judged_docids(release)["docid"].combine_chunks()
    return {"judged": len(judged), "unjudged_negatives": len(unjudged_negatives(release, judged))}


def ranking_sentence(documents: dict[str, int]) -> str:
    """What the texts folder holds, in the card's words (validate finds this sentence in the card)."""
    return (
        f"the release's {documents['judged']:,} judged documents and the {documents['unjudged_negatives']:,} "
        "never-judged documents its `hard-negatives` rows name as negatives"
    )


def negatives_by_split(release: Path) -> dict[str, Counter]:
    """Per split with hard-negatives files, its negatives counted by source (the rows' `negative_sources`)."""
    counts: dict[str, Counter] = {}
    for split in SPLITS:
        for path in config("hard-negatives").files(Path(release), split):
            found = counts.setdefault(split, Counter())
            for batch in pq.ParquetFile(path).iter_batches(BATCH_ROWS, columns=["negative_sources"]):
                sources = pc.list_flatten(batch.column(0))
                found.update({s["values"]: s["counts"] for s in pc.value_counts(sources).to_pylist()})
    return counts
