"""`validate`'s checks of the configs derived from the judgments and sub-questions (builder/release/configs.py):

- `qrels-binary` = (subq_id, docid, level >= the profile's answer level) of the graded judgments of its split;
- `diversity-qrels` = the same graded judgments regrouped by question: query-id the sub-question's question,
  subtopic its 1-based position among the question's sub-questions, score the level;
- `queries` = the split's sub-questions, `_id` and `text` as in `subquestions`;
- `corpus-ids` = exactly the distinct judged documents of the split with their url_hash (a docid with two
  url_hash values in the judgments is a failure of its own), and a URL only for a document the split's
  questions clicked, the URL of that click record.

Multisets are compared by an order-free fingerprint (a sum of 64-bit row hashes, mod 2^64) and their row
counts, accumulated while the judgments stream by (`DerivedPrints`, fed by validate_data.scan_judgments); the
distinct documents are counted through sorted runs on disk (builder/release/spill.py), so memory stays flat.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.analysis.topic_index import MISSING, TopicIndex, mix, string_hashes
from builder.release.configs import clicked_urls, subtopic_numbers, with_urls
from builder.release.spill import KeyRuns
from builder.release.validate_data import Readable, batches, fingerprint

CHECKS = {
    "qrels-binary": "qrels-binary is the graded judgments of its split, score 1 where level >= the answer level",
    "diversity-qrels": "diversity-qrels is the graded judgments regrouped by question, subtopic = the sub-question's "
                       "position",
    "queries": "queries are the sub-questions of their split with their text",
    "corpus-ids": "corpus-ids are exactly the distinct judged documents with their url_hash, URLs from the clicks",
}
NULL_HASH = "\x00null"  # stands in for a missing url_hash when hashing, so two missing values compare equal


def url_hashes(column) -> np.ndarray:
    return string_hashes(pc.fill_null(column, NULL_HASH))


class DerivedPrints:
    """Per split, from the judgments pass: the fingerprint of the binary qrels the graded rows give, and the
    distinct documents and (document, url_hash) pairs judged."""

    def __init__(self, splits: list[str], threshold: int):
        self.threshold = threshold
        self.binary = [0] * len(splits)
        self.documents = [KeyRuns() for _ in splits]
        self.pairs = [KeyRuns() for _ in splits]

    def add(self, code: int, subquestion: np.ndarray, document: np.ndarray, level, url_hash) -> None:
        graded = pc.is_valid(level).to_numpy(zero_copy_only=False)
        relevant = (level.fill_null(-1).to_numpy(zero_copy_only=False)[graded] >= self.threshold).astype(np.int64)
        self.binary[code] = (self.binary[code] + fingerprint(subquestion[graded], document[graded], relevant)) % 2**64
        self.documents[code].add(np.unique(document))
        self.pairs[code].add(np.unique(mix(document, url_hashes(url_hash))))


def distinct(runs: KeyRuns) -> tuple[int, int]:
    """(number of distinct keys, their sum mod 2^64); equal keys never span two merged chunks."""
    count, total = 0, 0
    for chunk in runs.chunks():
        unique = np.unique(chunk)
        count += len(unique)
        total = (total + int(np.sum(unique, dtype=np.uint64))) % 2**64
    return count, total


def check_derived(release, splits: list[str], files: Readable, index: TopicIndex, questions: pa.Table, scans: dict,
                  prints: DerivedPrints, report) -> None:
    checks = {key: report.check(name) for key, name in CHECKS.items()}
    numbers = subtopic_numbers(index.subq_question)
    subq_split = index.split_of_subquestions()
    for code, split in enumerate(splits):
        scan = scans[split]
        binary = _qrels_like(release, files.of("qrels-binary", split), "query-id", index, checks["qrels-binary"],
                             lambda t, subq, path: _binary_rows(t, path, checks["qrels-binary"], release))
        if binary != (scan.graded, prints.binary[code]):
            _locate(release, files.of("qrels", split), files.of("qrels-binary", split), "query-id",
                    lambda score: (score >= prints.threshold).astype(np.int64), checks["qrels-binary"],
                    f"{binary[0]:,} rows that are not the {scan.graded:,} graded judgments with score = level >= "
                    f"{prints.threshold}")
        diverse = _qrels_like(release, files.of("diversity-qrels", split), "subq_id", index, checks["diversity-qrels"],
                              lambda t, subq, path: _diversity_rows(t, subq, path, index, numbers,
                                                                    checks["diversity-qrels"], release))
        if diverse != (scan.graded, scan.graded_print):
            _locate(release, files.of("qrels", split), files.of("diversity-qrels", split), "subq_id", lambda s: s,
                    checks["diversity-qrels"], f"{diverse[0]:,} rows that are not the {scan.graded:,} graded "
                                               "judgments (subq_id, corpus-id, score)")
        _queries(release, split, code, files, index, subq_split, checks["queries"])
        in_split = questions.filter(pc.equal(questions["release_split"], split))
        _corpus_ids(release, split, files, clicked_urls(in_split), prints.documents[code], prints.pairs[code],
                    checks["corpus-ids"])


def _rows(paths, columns, check, release):
    """(file, position of the batch's first row in it, batch) over the files in order."""
    for path in paths:
        offset = 0
        for table in batches(path, columns, check, release):
            yield path, offset, table
            offset += table.num_rows


def _aligned(left, right):
    """Batches of `right` with the same rows of `left` (both `_rows` streams), position by position."""
    left, buffer = iter(left), None
    for path, offset, table in right:
        pieces, need = [], table.num_rows
        while need:
            if buffer is None or buffer.num_rows == 0:
                following = next(left, None)
                if following is None:
                    return
                buffer = following[2]
            take = min(need, buffer.num_rows)
            pieces.append(buffer.slice(0, take))
            buffer, need = buffer.slice(take), need - take
        yield path, offset, pa.concat_tables(pieces), table


def _locate(release, qrels_paths, paths, subq_column, score_of, check, summary: str) -> None:
    """A derived qrels config whose fingerprint differs from the judgments': its rows are compared position by
    position with the qrels (checked against the judgments; build-release writes both from the same batches in
    the same order) to name the first differing row and count them."""
    count, first = 0, None
    stream = _aligned(_rows(qrels_paths, None, check, release), _rows(paths, None, check, release))
    for path, offset, qrels, table in stream:
        score = qrels["score"].fill_null(-1).to_numpy(zero_copy_only=False)
        stated = table["score"].fill_null(-1).to_numpy(zero_copy_only=False)
        bad = ~pc.equal(qrels["query-id"], table[subq_column]).to_numpy(zero_copy_only=False) \
            | ~pc.equal(qrels["corpus-id"], table["corpus-id"]).to_numpy(zero_copy_only=False) | (score_of(score) != stated)
        if bad.any() and first is None:
            row = int(np.flatnonzero(bad)[0])
            first = (f"{path.relative_to(release)}: row {offset + row} ({subq_column} {table[subq_column][row]}, "
                     f"corpus-id {table['corpus-id'][row]}, score {stated[row]}) is not the graded judgment at that "
                     f"position ({qrels['query-id'][row]}, {qrels['corpus-id'][row]}, level {score[row]})")
        count += int(bad.sum())
    names = sorted({str(p.relative_to(release).parent) for p in paths}) or ["(no files)"]
    if first:
        check.fail(f"{first}; {count:,} rows differ ({summary})", max(count, 1))
    else:
        check.fail(f"{', '.join(names)}: {summary}")


def _qrels_like(release, paths, subq_column, index, check, per_batch) -> tuple[int, int]:
    """(rows, fingerprint of (sub-question, corpus-id, score)) of a qrels-shaped config's files."""
    rows, printed = 0, 0
    for path in paths:
        for table in batches(path, None, check, release):
            subquestion = index.subquestion_positions(table[subq_column])
            unknown = subquestion == MISSING
            if unknown.any():
                check.fail(f"{path.relative_to(release)}: {subq_column} {table[subq_column][int(np.flatnonzero(unknown)[0])]}"
                           " is no sub-question", int(unknown.sum()))
            per_batch(table, subquestion, path)
            rows += table.num_rows
            printed = (printed + fingerprint(subquestion, string_hashes(table["corpus-id"]),
                                             table["score"].fill_null(-1).to_numpy(zero_copy_only=False))) % 2**64
    return rows, printed


def _binary_rows(table, path, check, release) -> None:
    score = table["score"].fill_null(-1).to_numpy(zero_copy_only=False)
    bad = (score != 0) & (score != 1)
    if bad.any():
        check.fail(f"{path.relative_to(release)}: row {int(np.flatnonzero(bad)[0])} has score "
                   f"{score[bad][0]}, not 0 or 1 ({int(bad.sum()):,} rows)", int(bad.sum()))


def _diversity_rows(table, subquestion, path, index, numbers, check, release) -> None:
    known = subquestion != MISSING
    question = index.question_positions(table["query-id"])
    wrong = known & (index.subq_question[np.where(known, subquestion, 0)] != question)
    subtopic = table["subtopic"].fill_null(-1).to_numpy(zero_copy_only=False)
    numbered = known & (numbers[np.where(known, subquestion, 0)] != subtopic)
    for bad, what in ((wrong, "query-id is not the question of its subq_id"),
                      (numbered & ~wrong, "subtopic is not the sub-question's position among its question's")):
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            check.fail(f"{path.relative_to(release)}: {what}, first at row {row} (query-id "
                       f"{table['query-id'][row]}, subq_id {table['subq_id'][row]}, subtopic {subtopic[row]}; "
                       f"{int(bad.sum()):,} rows)", int(bad.sum()))


def _queries(release, split, code, files, index, subq_split, check) -> None:
    """Every row's text is its sub-question's (8 bytes of text hash per sub-question), every sub-question of the
    split is there once."""
    text = np.zeros(len(index.subq_question), np.uint64)
    expected = 0
    for _, _, table in _rows(files.of("subquestions", split), ["subq_id", "text"], check, release):
        subquestion = index.subquestion_positions(table["subq_id"])
        known = subquestion != MISSING
        text[subquestion[known]] = string_hashes(table["text"])[known]
        expected += int(known.sum())
    rows, known_rows, seen, first, wrong = 0, 0, KeyRuns(), None, 0
    for path, offset, table in _rows(files.of("queries", split), ["_id", "text"], check, release):
        subquestion = index.subquestion_positions(table["_id"])
        known = subquestion != MISSING
        where = np.where(known, subquestion, 0)
        bad = ~known | (subq_split[where] != code) | (text[where] != string_hashes(table["text"]))
        if bad.any() and first is None:
            row = int(np.flatnonzero(bad)[0])
            why = "is no sub-question" if not known[row] else "is a sub-question of another split" \
                if subq_split[where[row]] != code else "has another text than its sub-question"
            first = f"{path.relative_to(release)}: row {offset + row} (_id {table['_id'][row]}) {why}"
        wrong += int(bad.sum())
        seen.add(subquestion[known])
        rows, known_rows = rows + table.num_rows, known_rows + int(known.sum())
    if wrong:
        check.fail(f"{first} ({wrong:,} rows)", wrong)
    listed, _ = distinct(seen)
    if listed != expected or known_rows != listed:
        check.fail(f"queries/{split}: {rows:,} rows for {listed:,} of the split's {expected:,} sub-questions "
                   "(each once)")


def _corpus_ids(release, split, files, urls, judged_documents: KeyRuns, judged_pairs: KeyRuns, check) -> None:
    documents, rows, printed, url_mismatch, first = KeyRuns(), 0, 0, 0, None
    for path in files.of("corpus-ids", split):
        offset = 0
        for table in batches(path, None, check, release):
            document = string_hashes(table["_id"])
            documents.add(document)
            rows += table.num_rows
            printed = (printed + int(np.sum(mix(document, url_hashes(table["url_hash"])), dtype=np.uint64))) % 2**64
            want = with_urls(pa.table({"docid": table["_id"], "url_hash": table["url_hash"]}), urls)["url"]
            same = pc.or_kleene(pc.equal(table["url"], want), pc.and_(pc.is_null(table["url"]), pc.is_null(want)))
            bad = ~same.fill_null(False).to_numpy(zero_copy_only=False)
            if bad.any() and first is None:
                row = int(np.flatnonzero(bad)[0])
                first = (f"{path.relative_to(release)}: row {offset + row} (_id {table['_id'][row]}) has url "
                         f"{table['url'][row]}, its questions' click records give {want[row]}")
            url_mismatch += int(bad.sum())
            offset += table.num_rows
    if url_mismatch:
        check.fail(f"{first} ({url_mismatch:,} rows)", url_mismatch)
    n_documents, _ = distinct(judged_documents)
    n_pairs, pairs_print = distinct(judged_pairs)
    n_listed, _ = distinct(documents)
    if n_pairs != n_documents:
        check.fail(f"judgments/{split}: {n_pairs - n_documents:,} docids carry more than one url_hash", n_pairs - n_documents)
    if n_listed != rows:
        check.fail(f"corpus-ids/{split}: {rows - n_listed:,} docids listed more than once", rows - n_listed)
    if (rows, printed) != (n_pairs, pairs_print):
        names = ", ".join(str(p.relative_to(release)) for p in files.of("corpus-ids", split)) or f"corpus-ids/{split}"
        check.fail(f"{names}: {rows:,} (docid, url_hash) rows that are not the {n_documents:,} distinct judged "
                   "documents with their url_hash")
