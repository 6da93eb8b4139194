"""The documents a release's users bring texts for, counted by kind from the release's own files: the judged ones
(every split's `corpus-ids`) and the never-judged ones its `hard-negatives` rows name as negatives (source
`retrieved_unjudged`: retrieved for the question, left out of its pool). `researchy-subq texts` brings exactly these,
so they are the card's mteb corpus and `train`'s ranking set; the card states the counts (build-release) and
`validate` finds them there again (builder/release/validate/training_statements.py). The negatives of each split are
counted by source here too (`negatives_by_split`), for the card's shares (card_statements.py `negatives_sentence`)."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from builder.release.layout import SPLITS, config
from builder.release.topic_index import string_hashes
from generation.errors import InputError


def corpus_ids_files(release: Path) -> list[Path]:
    """Every split's `corpus-ids` files: the judged documents, each once per split."""
    files = [p for split in SPLITS for p in config("corpus-ids").files(Path(release), split)]
    if not files:
        raise InputError(release, 0, "no corpus-ids files (data/corpus_ids/SPLIT-*.parquet): not a release folder")
    return files


def judged_docids(release: Path) -> pa.Table:
    """The docid of every judged document of the release, once each, over its splits (Arrow: ~30 bytes a document)."""
    ids = pa.chunked_array([pq.read_table(p, columns=["_id"])["_id"] for p in corpus_ids_files(release)])
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


BUCKET_IDS = 500_000  # judged document ids a temporary bucket of `ranking_documents` holds, about
ID = pa.schema([("id", pa.string())])


class IdBuckets:
    """Document ids spilled to temporary Arrow IPC files by a 64-bit hash of the id, so that every copy of an id, judged
    or a negative, lands in the bucket of that number."""

    def __init__(self, folder: Path, name: str, count: int):
        self.paths = [folder / f"{name}-{i:05d}.arrow" for i in range(count)]
        self.sinks = [pa.OSFile(str(path), "wb") for path in self.paths]
        self.writers = [ipc.new_stream(sink, ID) for sink in self.sinks]

    def add(self, ids: pa.Array) -> None:
        bucket = string_hashes(ids) % np.uint64(len(self.paths))
        order = np.argsort(bucket, kind="stable")
        ends = np.cumsum(np.bincount(bucket.astype(np.int64), minlength=len(self.paths)))
        grouped = ids.take(pa.array(order))
        for writer, start, end in zip(self.writers, np.r_[0, ends[:-1]], ends):
            if end > start:
                writer.write_batch(pa.record_batch([grouped.slice(start, end - start)], schema=ID))

    def close(self) -> None:
        for writer, sink in zip(self.writers, self.sinks):
            writer.close()
            sink.close()

    def read(self, bucket: int) -> pa.Array:
        with ipc.open_stream(str(self.paths[bucket])) as reader:
            return reader.read_all()["id"].combine_chunks()


def ranking_documents(release: Path) -> dict[str, int]:
    """{"judged": the judged documents, "unjudged_negatives": the never-judged negatives of hard-negatives}. The
    judged ids and each batch's distinct negatives are spilled to buckets on disk by a hash of the id, then counted a
    bucket at a time: memory holds one bucket's ids, not every judged id of the release."""
    release = Path(release)
    judged_files = corpus_ids_files(release)
    ids = sum(pq.ParquetFile(p).metadata.num_rows for p in judged_files)
    count = max(1, -(-ids // BUCKET_IDS))
    with tempfile.TemporaryDirectory(prefix="researchy-subq-ranking-") as folder:
        judged, negatives = IdBuckets(Path(folder), "judged", count), IdBuckets(Path(folder), "negatives", count)
        for path in judged_files:
            for batch in pq.ParquetFile(path).iter_batches(BATCH_ROWS, columns=["_id"]):
                judged.add(batch.column(0).cast(pa.string()))
        for split in SPLITS:
            for path in config("hard-negatives").files(release, split):
                for batch in pq.ParquetFile(path).iter_batches(BATCH_ROWS, columns=["negative_document_ids"]):
                    negatives.add(pc.unique(pc.list_flatten(batch.column(0)).cast(pa.string())))
        judged.close()
        negatives.close()
        found = {"judged": 0, "unjudged_negatives": 0}
        for bucket in range(count):
            known = pc.unique(judged.read(bucket))
            named = negatives.read(bucket)
            found["judged"] += len(known)
            found["unjudged_negatives"] += len(pc.unique(named.filter(pc.invert(pc.is_in(named, value_set=known)))))
    return found


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
