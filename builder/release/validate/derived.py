"""`validate`'s checks of the configs derived from the judgments and sub-questions (builder/release/assemble/configs.py):

- `qrels-binary` = (subq_id, docid, level >= the profile's answer level) of the graded judgments of its split;
- `diversity-qrels` = the same graded judgments regrouped by question: query-id the sub-question's question,
  subtopic its 1-based position among the question's sub-questions, score the level;
- `queries` = the split's sub-questions, `_id` and `text` as in `subquestions`;
- `corpus-ids` = exactly the distinct judged documents of the split with their url_hash (a docid with two
  url_hash values in the judgments is a failure of its own), and a URL only for a document the split's
  questions clicked, the URL of that click record.

Multisets are compared by an order-free fingerprint (a sum of 64-bit row hashes of the ids' strings, mod 2^64)
and their row counts, accumulated while the judgments stream by (`DerivedPrints`, fed by
rows.scan_judgments); the distinct documents are counted through sorted runs on disk
(generation/storage/spill.py), so memory stays flat. Only when a fingerprint differs are the rows looked at one by
one, to name the first that is wrong.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.topic_index import MISSING, TopicIndex, mix, string_hashes
from builder.release.validate.derived_columns import clicked_urls, subtopic_numbers, urls_of
from builder.release.validate.reading import Readable, batches, fingerprint
from generation.storage.spill import KeyRuns

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
    """Per split, from the judgments pass: the fingerprints the binary and diversity qrels of the graded rows
    give, and the distinct documents and (document, url_hash) pairs judged."""

    def __init__(self, splits: list[str], index: TopicIndex, threshold: int):
        self.threshold = threshold
        self.question_hash, self.subq_hash = index.questions.hashes(), index.subquestions.hashes()
        self.subtopic = subtopic_numbers(index.subq_question)
        self.binary, self.diverse = [0] * len(splits), [0] * len(splits)
        self.documents = [KeyRuns() for _ in splits]
        self.pairs = [KeyRuns() for _ in splits]

    def add(
        self,
        code: int,
        table: pa.Table,
        question: np.ndarray,
        subquestion: np.ndarray,
        document: np.ndarray,
        distinct_documents: np.ndarray,
        document_codes: np.ndarray,
    ) -> None:
        """`distinct_documents` and `document_codes`: the docid column's distinct hashes and each row's code."""
        graded = pc.is_valid(table["level"]).to_numpy(zero_copy_only=False)
        level = table["level"].fill_null(-1).to_numpy(zero_copy_only=False)[graded].astype(np.int64)
        subq, doc = self.subq_hash[subquestion[graded]], document[graded]
        self.binary[code] = (
            self.binary[code] + fingerprint(subq, doc, (level >= self.threshold).astype(np.int64))
        ) % 2**64
        self.diverse[code] = (
            self.diverse[code]
            + fingerprint(self.question_hash[question[graded]], self.subtopic[subquestion[graded]], doc, level, subq)
        ) % 2**64
        # each document once, with the url_hash of its first row; rows of it with another url_hash besides
        first = np.full(len(distinct_documents), -1, np.int64)
        first[document_codes[::-1]] = np.arange(len(document_codes))[::-1]
        present = first >= 0
        url = table["url_hash"]
        self.documents[code].add(distinct_documents[present])
        self.pairs[code].add(mix(distinct_documents[present], url_hashes(url.take(pa.array(first[present])))))
        own = url.take(pa.array(first[document_codes]))
        other = ~pc.or_kleene(pc.equal(url, own), pc.and_(pc.is_null(url), pc.is_null(own))).fill_null(False).to_numpy(
            zero_copy_only=False
        )
        if other.any():
            self.pairs[code].add(mix(document[other], url_hashes(url.filter(pa.array(other)))))


def fingerprint_rows(docid, url_hash) -> np.ndarray:
    """A 64-bit hash per (docid, url_hash) row."""
    return mix(string_hashes(docid), url_hashes(url_hash))


def distinct(runs: KeyRuns) -> tuple[int, int]:
    """(number of distinct keys, their sum mod 2^64); the chunks come sorted and equal keys never span two."""
    count, total = 0, 0
    for chunk in runs.chunks():
        unique = chunk[np.r_[True, chunk[1:] != chunk[:-1]]] if len(chunk) else chunk
        count += len(unique)
        total = (total + int(np.sum(unique, dtype=np.uint64))) % 2**64
    return count, total


def check_derived(
    release,
    splits: list[str],
    files: Readable,
    index: TopicIndex,
    questions: pa.Table,
    scans: dict,
    prints: DerivedPrints,
    report,
) -> None:
    checks = {key: report.check(name) for key, name in CHECKS.items()}
    subq_split = index.split_of_subquestions()
    for code, split in enumerate(splits):
        _qrels_family(release, split, code, files, index, scans[split].graded, prints, checks)
        _queries(release, split, code, files, index, subq_split, checks["queries"])
        in_split = questions.filter(pc.equal(questions["release_split"], split))
        _corpus_ids(
            release,
            split,
            files,
            clicked_urls(in_split),
            prints.documents[code],
            prints.pairs[code],
            checks["corpus-ids"],
        )


def _scores(table: pa.Table, column: str = "score") -> np.ndarray:
    return table[column].fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def _rows(paths, columns, check, release):
    """(file, position of the batch's first row in it, batch) over the files in order."""
    for path in paths:
        offset = 0
        for table in batches(path, columns, check, release):
            yield path, offset, table
            offset += table.num_rows


class Cursor:
    """Reads a config's rows in pieces of any length, remembering which file and row each piece starts at."""

    def __init__(self, stream):
        self.stream, self.buffer, self.path, self.offset, self.rows = iter(stream), None, None, 0, 0

    def take(self, n: int) -> tuple[pa.Table | None, list]:
        pieces, starts = [], []
        while n:
            if self.buffer is None or self.buffer.num_rows == 0:
                following = next(self.stream, None)
                if following is None:
                    break
                self.path, self.offset, self.buffer = following
            part = self.buffer.slice(0, n)
            pieces.append(part)
            starts.append((self.path, self.offset, part.num_rows))
            self.buffer, self.offset, n = (
                self.buffer.slice(part.num_rows),
                self.offset + part.num_rows,
                n - part.num_rows,
            )
        self.rows += sum(p.num_rows for p in pieces)
        return (pa.concat_tables(pieces) if pieces else None), starts

    def rest(self) -> int:
        """Rows left after what was taken (reads them)."""
        left = self.buffer.num_rows if self.buffer is not None else 0
        return left + sum(t.num_rows for _, _, t in self.stream)


def where(starts: list, row: int) -> str:
    for path, offset, n in starts:
        if row < n:
            return f"{path.parent.name}/{path.name} row {offset + row}"
        row -= n
    return "?"


class Finding:
    def __init__(self):
        self.count, self.first = 0, None

    def add(self, bad: np.ndarray, describe) -> None:
        if bad.any() and self.first is None:
            self.first = describe(int(np.flatnonzero(bad)[0]))
        self.count += int(bad.sum())


def _qrels_family(release, split, code, files, index, graded, prints, checks) -> None:
    """`qrels-binary` and `diversity-qrels` row by row against `qrels` (itself checked against the judgments):
    build-release writes the three from the same batches in the same order. A config whose rows are not the
    qrels' at the same positions is then compared as a multiset, by fingerprint, before it fails (another
    order of the same rows passes)."""
    binary, diverse = (
        Cursor(_rows(files.of("qrels-binary", split), None, checks["qrels-binary"], release)),
        Cursor(_rows(files.of("diversity-qrels", split), None, checks["diversity-qrels"], release)),
    )
    found = {"qrels-binary": Finding(), "diversity-qrels": Finding(), "regrouped": Finding()}
    for _, _, qrels in _rows(files.of("qrels", split), None, checks["qrels-binary"], release):
        score = _scores(qrels)
        for cursor, name, column, expected in (
            (binary, "qrels-binary", "query-id", (score >= prints.threshold)),
            (diverse, "diversity-qrels", "subq_id", score),
        ):
            table, starts = cursor.take(qrels.num_rows)
            if table is None:
                continue
            n = table.num_rows
            bad = (
                ~pc.equal(qrels["query-id"].slice(0, n), table[column]).to_numpy(zero_copy_only=False)
                | ~pc.equal(qrels["corpus-id"].slice(0, n), table["corpus-id"]).to_numpy(zero_copy_only=False)
                | (expected[:n].astype(np.int64) != _scores(table))
            )
            found[name].add(
                bad,
                lambda r, t=table, s=starts, c=column, qrels=qrels, score=score: (
                    f"{where(s, r)} ({c} {t[c][r]}, corpus-id {t['corpus-id'][r]}, score {t['score'][r]}) is not the "
                    f"graded judgment at that position ({qrels['query-id'][r]}, {qrels['corpus-id'][r]}, level {score[r]})"
                ),
            )
            if name == "diversity-qrels":
                found["regrouped"].add(*_regrouped(table, index, prints.subtopic, starts))
    for cursor, name, printed, hashed in (
        (
            binary,
            "qrels-binary",
            prints.binary[code],
            lambda t: (string_hashes(t["query-id"]), string_hashes(t["corpus-id"]), _scores(t)),
        ),
        (
            diverse,
            "diversity-qrels",
            prints.diverse[code],
            lambda t: (
                string_hashes(t["query-id"]),
                _scores(t, "subtopic"),
                string_hashes(t["corpus-id"]),
                _scores(t),
                string_hashes(t["subq_id"]),
            ),
        ),
    ):
        rows = cursor.rows + cursor.rest()
        if found[name].count == 0 and rows == graded:
            continue
        if (rows, printed) == _print(release, files.of(name, split), checks[name], hashed) and not (
            name == "diversity-qrels" and found["regrouped"].count
        ):
            continue  # the same rows in another order
        summary = f"{rows:,} rows that are not the {graded:,} graded judgments of {split}"
        if found[name].first:
            checks[name].fail(f"{found[name].first}; {found[name].count:,} rows differ ({summary})", found[name].count)
        elif not found["regrouped"].count or name != "diversity-qrels":
            checks[name].fail(f"{name}/{split}: {summary}")
    if found["regrouped"].count:
        checks["diversity-qrels"].fail(
            f"{found['regrouped'].first} ({found['regrouped'].count:,} rows)", found["regrouped"].count
        )


def _regrouped(table: pa.Table, index: TopicIndex, numbers: np.ndarray, starts: list):
    """Each row's query-id is its subq_id's question and its subtopic the sub-question's position: looked up once
    per distinct subq_id of the batch."""
    encoded = pc.dictionary_encode(table["subq_id"].combine_chunks())
    codes = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
    position = (
        index.subquestion_positions(encoded.dictionary)[codes]
        if len(encoded.dictionary)
        else np.full(len(codes), MISSING)
    )
    known = position != MISSING
    at = np.where(known, position, 0)
    question = index.subq_question[at]
    expected_qid = index.questions.ids.take(pa.array(np.where(question >= 0, question, 0)))
    subtopic = _scores(table, "subtopic")
    wrong_qid = known & ~pc.equal(table["query-id"], expected_qid).to_numpy(zero_copy_only=False)
    bad = ~known | wrong_qid | (known & (numbers[at] != subtopic))

    def describe(r):
        what = (
            "subq_id is no sub-question"
            if not known[r]
            else "query-id is not the question of its subq_id"
            if wrong_qid[r]
            else "subtopic is not the sub-question's position among its question's"
        )
        return (
            f"{where(starts, r)}: {what} (query-id {table['query-id'][r]}, subq_id {table['subq_id'][r]}, "
            f"subtopic {subtopic[r]})"
        )

    return bad, describe


def _print(release, paths, check, columns_of) -> tuple[int, int]:
    """(rows, fingerprint of the rows' hashed columns) of a config's files."""
    rows, printed = 0, 0
    for _, _, table in _rows(paths, None, check, release):
        rows += table.num_rows
        printed = (printed + fingerprint(*columns_of(table))) % 2**64
    return rows, printed


def _queries(release, split, code, files, index, subq_split, check) -> None:
    text_print = lambda t, key: (string_hashes(t[key]), string_hashes(t["text"]))  # noqa: E731
    expected = _print(release, files.of("subquestions", split), check, lambda t: text_print(t, "subq_id"))
    found = _print(release, files.of("queries", split), check, lambda t: text_print(t, "_id"))
    if found != expected:
        _query_rows(release, split, code, files, index, subq_split, check, expected[0], found[0])


def _query_rows(release, split, code, files, index, subq_split, check, expected: int, rows: int) -> None:
    """Every row's text is its sub-question's (8 bytes of text hash per sub-question), every sub-question of the
    split is there once: the first row that is not, and how many."""
    text = np.zeros(len(index.subq_question), np.uint64)
    for _, _, table in _rows(files.of("subquestions", split), ["subq_id", "text"], check, release):
        subquestion = index.subquestion_positions(table["subq_id"])
        known = subquestion != MISSING
        text[subquestion[known]] = string_hashes(table["text"])[known]
    seen, first, wrong = KeyRuns(), None, 0
    for path, offset, table in _rows(files.of("queries", split), ["_id", "text"], check, release):
        subquestion = index.subquestion_positions(table["_id"])
        known = subquestion != MISSING
        where = np.where(known, subquestion, 0)
        bad = ~known | (subq_split[where] != code) | (text[where] != string_hashes(table["text"]))
        if bad.any() and first is None:
            row = int(np.flatnonzero(bad)[0])
            why = (
                "is no sub-question"
                if not known[row]
                else "is a sub-question of another split"
                if subq_split[where[row]] != code
                else "has another text than its sub-question"
            )
            first = f"{path.relative_to(release)}: row {offset + row} (_id {table['_id'][row]}) {why}"
        wrong += int(bad.sum())
        seen.add(subquestion[known])
    listed, _ = distinct(seen)
    if wrong:
        check.fail(f"{first} ({wrong:,} rows)", wrong)
    elif listed != expected or rows != listed:
        check.fail(
            f"queries/{split}: {rows:,} rows for {listed:,} of the split's {expected:,} sub-questions (each once)"
        )


def _corpus_ids(release, split, files, urls, judged_documents: KeyRuns, judged_pairs: KeyRuns, check) -> None:
    documents, rows, printed, url_mismatch, first = KeyRuns(), 0, 0, 0, None
    for path, offset, table in _rows(files.of("corpus-ids", split), None, check, release):
        documents.add(string_hashes(table["_id"]))
        rows += table.num_rows
        printed = (printed + int(np.sum(fingerprint_rows(table["_id"], table["url_hash"]), dtype=np.uint64))) % 2**64
        want = urls_of(table["url_hash"], urls)
        same = pc.or_kleene(pc.equal(table["url"], want), pc.and_(pc.is_null(table["url"]), pc.is_null(want)))
        bad = ~same.fill_null(False).to_numpy(zero_copy_only=False)
        if bad.any() and first is None:
            row = int(np.flatnonzero(bad)[0])
            first = (
                f"{path.relative_to(release)}: row {offset + row} (_id {table['_id'][row]}) has url "
                f"{table['url'][row]}, its questions' click records give {want[row]}"
            )
        url_mismatch += int(bad.sum())
    if url_mismatch:
        check.fail(f"{first} ({url_mismatch:,} rows)", url_mismatch)
    n_documents, _ = distinct(judged_documents)
    n_pairs, pairs_print = distinct(judged_pairs)
    n_listed, _ = distinct(documents)
    if n_pairs != n_documents:
        check.fail(
            f"judgments/{split}: {n_pairs - n_documents:,} docids carry more than one url_hash", n_pairs - n_documents
        )
    if n_listed != rows:
        check.fail(f"corpus-ids/{split}: {rows - n_listed:,} docids listed more than once", rows - n_listed)
    if (rows, printed) != (n_pairs, pairs_print):
        names = ", ".join(str(p.relative_to(release)) for p in files.of("corpus-ids", split)) or f"corpus-ids/{split}"
        check.fail(
            f"{names}: {rows:,} (docid, url_hash) rows that are not the {n_documents:,} distinct judged "
            "documents with their url_hash"
        )
