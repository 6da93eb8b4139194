"""`validate`'s checks of the training configs and the dev split (builder/release/assemble/training_configs.py):

- the dev split is the rule's: every dev question is a train question the manifest's `training.seed` and
  `dev_share` pick, and no train question is one they pick (that a question sits in one split only is
  rows.py's check);
- `hard-negatives` and `graded-lists` are re-derived from the release's own judgments and sub-questions with the
  manifest's settings, row by row in order, and must equal what is stored (the first differing row is named);
- `manifest.training` states the profile's settings and the counts the re-derivation gives.

The re-derivation is `validate`'s own (training_reference.py): it shares no code with the build's but the rule's
names and hashes (builder/release/training_rule.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from builder.release.contract import Manifest
from builder.release.layout import config
from builder.release.topic_index import MISSING, IdIndex, positions
from builder.release.training_record import settings_record
from builder.release.training_rule import COLUMNS, CONFIGS, DEV, TRAIN, dev_questions
from builder.release.validate.derived import Cursor, where
from builder.release.validate.reading import Readable, batches, read_all
from builder.release.validate.stored_lists import StoredLists
from builder.release.validate.training_reference import TrainingReference

STORED_BATCH_ROWS = 16_384
CHECKS = {
    "dev": "the dev split is the train questions that sha256(seed:qid) < dev_share picks, and only those",
    "training": "hard-negatives and graded-lists are what the judgments give under the manifest's training settings",
}


def check_training(release: Path, manifest: Manifest, profile, splits: list[str], files: Readable, report) -> None:
    checks = {key: report.check(name) for key, name in CHECKS.items()}
    if profile is None:
        checks["training"].fail("no profile to re-derive the training configs with (see the profile check)")
        return
    _dev_split(release, profile.training, splits, files, checks["dev"])
    _training_configs(release, manifest, profile, splits, files, checks["training"])


def _dev_split(release: Path, training, splits: list[str], files: Readable, check) -> None:
    for split in (TRAIN, DEV):
        if split not in splits:
            continue
        qids = read_all(files.of("questions", split), ["qid"], check, release, "questions")["qid"]
        picked = dev_questions(qids, training.seed, training.dev_share)
        wrong = ~picked if split == DEV else picked
        if wrong.any():
            check.fail(
                f"questions/{split}: {int(wrong.sum())} questions the dev rule puts "
                f"{'in train' if split == DEV else 'in dev'}, e.g. qid {qids[int(np.flatnonzero(wrong)[0])]}",
                int(wrong.sum()),
            )


def _subquestions(release: Path, splits: list[str], files: Readable, check) -> tuple[pa.Table, np.ndarray]:
    """Every split's sub-questions in the order of their files (the build's order within a split)."""
    parts = [
        read_all(files.of("subquestions", split), ["subq_id", "qid", "text"], check, release, "subquestions")
        for split in splits
    ]
    split = np.concatenate([np.full(t.num_rows, code, np.int64) for code, t in enumerate(parts)] or [np.zeros(0)])
    return pa.concat_tables(parts), split


def _stored_lists(release: Path, splits: list[str], kept: int, files: Readable, check) -> StoredLists:
    """Every split's questions.retrieved_unjudged (as build-release wrote it from the runs), by qid."""
    lists = StoredLists(kept)
    for split in splits:
        for path in files.of("questions", split):
            for table in batches(path, ["qid", "retrieved_unjudged"], check, release):
                lists.add(table)
    return lists.closed()


def _judgment_rows(files: Readable, splits: list[str]) -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for s in splits for p in files.of("judgments", s))


def _training_configs(release: Path, manifest: Manifest, profile, splits: list[str], files: Readable, check) -> None:
    subquestions, subq_split = _subquestions(release, splits, files, check)
    index = IdIndex(subquestions["subq_id"])
    listed = _stored_lists(release, splits, profile.training.retrieved_kept, files, check)
    for wrong in listed.findings():
        check.fail(f"questions.retrieved_unjudged: {wrong}")
    reference = TrainingReference(
        subquestions, subq_split, profile.complexity.answer_level, profile.training, _judgment_rows(files, splits)
    )
    for split in splits:
        for path in files.of("judgments", split):
            for table in batches(path, ["subq_id", *COLUMNS], check, release):
                position = positions(table["subq_id"], index)  # one probe per distinct sub-question
                known = position != MISSING  # orphans are rows.py's finding
                if not known.all():
                    table, position = table.filter(pa.array(known)), position[known]
                reference.add(table, position)
    cursors = {
        (name, code): Cursor(_stored_rows(files.of(name, split), check, release))
        for name in CONFIGS
        for code, split in enumerate(splits)
    }
    reported = set()
    for code, name, derived in reference.tables(listed):
        if (name, code) in reported:
            continue
        stored, starts = cursors[(name, code)].take(derived.num_rows)
        first = first_difference(derived, stored)
        if first is not None:
            reported.add((name, code))
            at = where(starts, first) if stored is not None and first < stored.num_rows else "its end"
            check.fail(
                f"{config(name).folders[0]}/{splits[code]}: at {at}, not the row the judgments give "
                f"({describe(derived, first)})"
            )
    for qid, docid in reference.listed_judged[:1]:
        check.fail(
            f"questions.retrieved_unjudged: qid {qid} lists {docid}, which a judgment of the question covers "
            f"({len(reference.listed_judged):,} such documents)"
        )
    for (name, code), cursor in cursors.items():
        extra = 0 if (name, code) in reported else cursor.rest()
        if extra:
            check.fail(f"{config(name).folders[0]}/{splits[code]}: {extra:,} rows past those the judgments give")
    stated = manifest.training.model_dump()
    expected = settings_record(profile, reference.counts, "runs" if listed.present else "none").model_dump()
    differing = sorted(k for k in set(stated) | set(expected) if stated.get(k) != expected.get(k))
    if differing:
        check.fail(
            f"manifest.json training: {', '.join(f'{k} {stated.get(k)!r}, the data gives {expected.get(k)!r}' for k in differing)}"
        )


def _stored_rows(paths, check, release):
    """(file, position of the batch's first row in it, batch) over the files in order, in batches small enough that
    the six cursors (two configs, three splits) each hold little while the derived rows go by."""
    for path in paths:
        offset = 0
        for table in batches(path, None, check, release, STORED_BATCH_ROWS):
            yield path, offset, table
            offset += table.num_rows


def first_difference(derived: pa.Table, stored: pa.Table | None) -> int | None:
    """The first row where the stored rows differ from the derived ones (a short stored table differs at its end)."""
    if stored is None:
        return 0 if derived.num_rows else None
    if stored.num_rows == derived.num_rows and stored.equals(derived):
        return None
    for i, (a, b) in enumerate(zip(derived.to_pylist(), stored.to_pylist())):
        if a != b:
            return i
    return min(stored.num_rows, derived.num_rows)


def describe(table: pa.Table, row: int) -> str:
    if row >= table.num_rows:
        return "none"
    record = table.slice(row, 1).to_pylist()[0]
    return ", ".join(f"{k}={v!r}" for k, v in record.items() if k in ("query_id", "positive_document_ids", "docids"))
