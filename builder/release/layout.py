"""The release folder = the Hub repository: its configs, where each config's Parquet files live (and each
split's TREC qrels file beside the `qrels` Parquet), and which schema-module table each holds. Judgments are stored once, partitioned by level; `level-N`
and `unparsed` are globs over one partition, `judgments` over all of them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from builder.release.card_statements import sources_text
from generation.storage.schema import SPLITS  # noqa: F401 - the release's splits, imported from here by release modules

LEVELS = tuple(range(6))
PARTITIONS = tuple(f"level_{n}" for n in LEVELS) + ("unparsed",)
MANIFEST = "manifest.json"  # at the top of every release: what it holds and how it was made (assemble/folder.py)
FILE_NAME = re.compile(r"^(?P<split>[a-z]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.parquet$")


@dataclass(frozen=True)
class Config:
    name: str
    table: str  # the schema-module table its rows follow
    folders: tuple[str, ...]  # folders under data/ holding its files
    description: str

    def pattern(self, split: str) -> str:
        folder = "judgments/*" if self.name == "judgments" else self.folders[0]
        return f"data/{folder}/{split}-*.parquet"

    def files(self, release: Path, split: str) -> list[Path]:
        return sorted(p for folder in self.folders for p in (release / "data" / folder).glob(f"{split}-*.parquet"))


ARROW_NBYTES = b"arrow_nbytes"  # footer key: the Arrow size of the rows written, for dataset_info's num_bytes


def read_back_nbytes(table) -> int:
    """The Arrow size of `table` as `datasets` counts it after reading it back, to within its reader's own choice
    of validity bitmaps: a column without nulls in a row group mostly comes back without one (measured within
    0.5% in tests/builder/release/assemble/test_card.py; reading every file back to count exactly would cost a full decode)."""
    total = table.nbytes
    for column in table.columns:
        if column.null_count == 0:
            total -= sum((c.offset % 8 + len(c) + 7) // 8 for c in column.chunks if c.buffers()[0] is not None)
    return total


def open_parquet_writer(path: Path, schema):
    """A Parquet writer as `datasets`' own (datasets/arrow_writer.py `ParquetWriter`, datasets 5.x): content-defined
    chunking with `datasets.config.DEFAULT_CDC_OPTIONS`, so an edit re-uploads only the pages it touches through
    Xet, and a page index, so the viewer and readers seek to a page; zstd as every other file of the kit. The
    footer records the Arrow size of what was written, so the card's num_bytes needs no second read."""
    import json

    import pyarrow.parquet as pq
    from datasets.config import DEFAULT_CDC_OPTIONS

    from generation.storage.atomic_files import COMPRESSION

    class CountingWriter(pq.ParquetWriter):
        arrow_nbytes = 0

        def write_table(self, table, row_group_size=None):
            self.arrow_nbytes += read_back_nbytes(table)
            super().write_table(table, row_group_size)

        def close(self):
            if self.is_open:
                self.add_key_value_metadata({ARROW_NBYTES: str(self.arrow_nbytes)})
            super().close()

    writer = CountingWriter(
        path, schema, compression=COMPRESSION, use_content_defined_chunking=DEFAULT_CDC_OPTIONS, write_page_index=True
    )
    writer.add_key_value_metadata({"content_defined_chunking": json.dumps(DEFAULT_CDC_OPTIONS)})
    return writer


def config_of_partition(partition: str) -> str:
    return "unparsed" if partition == "unparsed" else f"level-{partition.removeprefix('level_')}"


CONFIGS: tuple[Config, ...] = (
    Config(
        "judgments",
        "judgments",
        tuple(f"judgments/{p}" for p in PARTITIONS),
        "every judgment: (sub-question, document, level) with the judge's output and provenance",
    ),
    *(Config(f"level-{n}", "judgments", (f"judgments/level_{n}",), f"the judgments of level {n}") for n in LEVELS),
    Config("unparsed", "judgments", ("judgments/unparsed",), "judgments whose output had no usable digit ('Other')"),
    Config("subquestions", "subquestions", ("subquestions",), "the GPT-4 sub-questions of each question"),
    Config("questions", "questions", ("questions",), "the Researchy Questions questions and their clicked documents"),
    Config("qrels", "qrels", ("qrels",), "BEIR/MTEB-style qrels: query-id = subq_id, corpus-id = docid, score = level"),
    Config(
        "qrels-binary",
        "qrels",
        ("qrels_binary",),
        "qrels with score 1 where level >= the binary threshold, else 0 (for tools that count score >= 1 as relevant)",
    ),
    Config("queries", "queries", ("queries",), "BEIR/MTEB-style queries: _id = subq_id, text = the sub-question"),
    Config(
        "corpus-ids",
        "corpus_ids",
        ("corpus_ids",),
        "every judged document: _id = docid, url_hash, url (no text: ClueWeb22's licence)",
    ),
    Config(
        "diversity-qrels",
        "diversity_qrels",
        ("diversity_qrels",),
        "question-level diversity qrels for alpha-nDCG: query-id = qid, subtopic = sub-question, corpus-id, score",
    ),
    Config(
        "hard-negatives",
        "hard_negatives",
        ("hard_negatives",),
        "Tevatron v2 training rows, ids only: a sub-question, one positive (level >= answer_level) and k negatives, "
        f"each from the source `negative_sources` names ({sources_text('negative_level')}; the shares of each split "
        "under Training a retriever), with qid to keep siblings apart",
    ),
    Config(
        "graded-lists",
        "graded_lists",
        ("graded_lists",),
        "per sub-question every graded judgment (docids, labels, expected, probs) for listwise and distillation losses",
    ),
)
DEFAULT_CONFIG = "judgments"


def config(name: str) -> Config:
    for c in CONFIGS:
        if c.name == name:
            return c
    raise KeyError(f"unknown config {name!r}; known: {', '.join(c.name for c in CONFIGS)}")


def present_splits(release: Path) -> list[str]:
    return [s for s in SPLITS if config("questions").files(release, s)]


TREC_QRELS_SUFFIX = ".qrels.txt"


def trec_qrels_path(release: Path, split: str) -> Path:
    """The `qrels` config of a split as one TREC qrels file, beside its Parquet files (builder/release/assemble/trec.py)."""
    return Path(release) / "data" / config("qrels").folders[0] / f"{split}{TREC_QRELS_SUFFIX}"


def data_files(release: Path) -> list[Path]:
    """Every data file of a release folder: the configs' Parquet files and the TREC qrels files."""
    data = Path(release) / "data"
    return sorted(p for p in data.rglob("*") if p.name.endswith((".parquet", TREC_QRELS_SUFFIX)))


def file_rows(path: Path) -> int:
    """The rows of a data file: a Parquet file's from its footer, a TREC qrels file's lines."""
    if path.name.endswith(TREC_QRELS_SUFFIX):
        lines = 0
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                lines += block.count(b"\n")
        return lines
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def binary_threshold(profile) -> int:
    """The level from which a judgment counts as relevant in `qrels-binary`: the profile's answer level
    (complexity.answer_level, 4 in every bundled profile: "mostly relevant and complete")."""
    from generation.profiles.profile import Complexity

    return (profile.complexity if profile is not None else Complexity()).answer_level
