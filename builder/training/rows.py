"""The hard-negatives rows `training-files` writes: re-derived from a release's `graded-lists`, `queries`,
`subquestions` and `questions.retrieved_unjudged` with builder/release/assemble/hard_negatives.py's `derive_rows`, under the
release's rule or another k, negative level or fill order, so no rebuild is needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.assemble import hard_negatives as hn
from builder.release.assemble.retrieved import StoredRetrieved
from builder.release.contract import Manifest
from builder.release.layout import config


def rule_of_release(manifest: Manifest, negatives=None, negative_level=None, fill_order=None) -> hn.NegativeRule:
    """The release's own rule (manifest.training), with any of k, negative_level and fill_order replaced."""
    stated = manifest.training
    rule = hn.NegativeRule(
        stated.answer_level,
        stated.negative_level if negative_level is None else negative_level,
        stated.negatives if negatives is None else negatives,
        tuple(stated.fill_order or hn.SOURCES) if fill_order is None else tuple(fill_order),
    )
    unknown = sorted(set(rule.fill_order) - set(hn.SOURCES))
    if unknown or len(set(rule.fill_order)) != len(rule.fill_order) or not rule.fill_order:
        raise ValueError(
            f"--fill-order {','.join(rule.fill_order)!r}: name each of {', '.join(hn.SOURCES)} at most once, "
            "comma-separated"
        )
    if not 0 <= rule.negative_level < rule.answer_level:
        raise ValueError(
            f"--negative-level {rule.negative_level}: must be below the release's answer level {rule.answer_level}"
        )
    if rule.negatives < 1:
        raise ValueError(f"--negatives {rule.negatives}: at least 1")
    return rule


LIST_COLUMNS = ["query_id", "qid", "docids", "labels"]


def release_rows(release: Path, split: str, rule: hn.NegativeRule, counts: hn.NegativeCounts, batch_rows: int = 20_000):
    """The hard-negatives rows of a release split under `rule`, re-derived from its `graded-lists`, `queries`,
    `subquestions` and `questions.retrieved_unjudged` (chunks of whole questions, in the order the build writes
    them); `counts` adds up what they hold."""
    lists = config("graded-lists").files(release, split)
    queries = pq.read_table(config("queries").files(release, split), columns=["_id", "text"])
    questions = pq.read_table(config("questions").files(release, split), columns=["qid", "retrieved_unjudged"])
    retrieved = StoredRetrieved(questions["qid"], questions["retrieved_unjudged"])
    pairs = []
    asked = pq.read_table(config("subquestions").files(release, split), columns=["qid"])["qid"]
    sampled = pa.array(sorted(hn.sampled_questions(pc.unique(asked).to_pylist())), pa.string())
    for path in lists:  # the other-question pool: a first pass over the split's graded lists
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=LIST_COLUMNS):
            mine = batch.filter(pc.is_in(batch["qid"], value_set=sampled))
            lengths = pc.list_value_length(mine["docids"]).fill_null(0)
            flat = pa.table(
                {
                    "docid": pc.list_flatten(mine["docids"]),
                    "qid": pc.take(mine["qid"], pa.array(np.repeat(np.arange(mine.num_rows), lengths.to_numpy()))),
                    "label": pc.list_flatten(mine["labels"]),
                }
            )
            pairs.append(flat.filter(pc.less_equal(flat["label"], rule.negative_level)).select(["docid", "qid"]))
    pool = hn.OtherQuestionPool(pa.concat_tables(pairs)) if pairs else None
    tables = (
        pa.Table.from_batches([batch])
        for path in lists
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=LIST_COLUMNS)
    )
    for table in hn.whole_groups(tables, "qid"):
        text = queries["text"].take(pc.index_in(table["query_id"], value_set=queries["_id"]))
        rows, chunk_counts = hn.derive_rows(table, hn.ChunkInputs(text, retrieved.of_rows(table["qid"]), pool), rule)
        counts.add(chunk_counts)
        yield rows
