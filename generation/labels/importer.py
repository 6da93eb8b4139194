"""One shard's import: label lines checked against the questions folder, duplicates found, rows written.

Every shard reads every line and keeps the lines of its own questions (`Shard.owns_key(qid)`, as the judge's shards
are cut), so a question's labels, and so its duplicates, all meet in one shard. A line that names no readable
question (bad JSON, a wrong shape) belongs to the shard that owns its `file:line`, so each bad line is reported once
over all shards. Memory follows the shard's lines (one compact key per ratings line, per pair for qrels and batch
lines: `FirstCopies`), the questions folder's ids, and one block of lines, not the label files.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TypeGuard, cast

import pyarrow as pa
import pyarrow.parquet as pq

from generation.corpus.topics import question_files
from generation.errors import InputError
from generation.judging.prompts import Prompt
from generation.labels.account import FileCounts
from generation.labels.authors_pass import graded_on_other_text
from generation.labels.documents import DocumentKeys
from generation.labels.formats import Label, LabelFormat, LabelLine, read_label_file
from generation.storage.atomic_files import ParquetSink
from generation.storage.rejects import Rejects
from generation.storage.schema import JUDGMENTS, OTHER_TEXT_STATUS, arrow_schema
from generation.storage.shards import Shard

BLOCK_LINES = 20_000  # lines whose document ids are resolved together (and rows written as one table)


def problem(path: Path, line: int, reason: str, message: str, record_id: str | None = None) -> InputError:
    """An InputError that says which class of problem it is (the rejects' and the record's counts)."""
    error = InputError(path, line, message, record_id=record_id)
    error.reason = reason
    return error


def position(label: Label) -> int:
    """A label's place in its question's sub-question list: a line that names its question (crux-ratings,
    openai-batch) labels positions, only a qrels line (no question) names a subq_id."""
    return cast(int, label.subquestion)


class QuestionLists:
    """The questions folder as an import needs it: each question's sub-questions by their position in
    `gpt4_decomposition.subquestions` (subq_id `{qid}-{k}`, generation/stages/questions.py), each sub-question's
    question, and the URL-hashes clicked for each question (Researchy's DocStream)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        questions_path, subquestions_path = question_files(self.folder)
        questions = pq.read_table(questions_path, columns=["qid", "clicked"])
        self.clicked_in_order: dict[str, tuple[str, ...]] = {  # DocStream's order (the authors' clicked pass's)
            qid: tuple(c["url_hash"] for c in clicked)
            for qid, clicked in zip(questions["qid"].to_pylist(), questions["clicked"].to_pylist())
        }
        self.clicked: dict[str, set[str]] = {qid: set(hashes) for qid, hashes in self.clicked_in_order.items()}
        subquestions = pq.read_table(subquestions_path, columns=["subq_id", "qid"])
        self.question_of: dict[str, str] = {}
        self.positions: dict[str, dict[int, str]] = {qid: {} for qid in self.clicked}
        for subq_id, qid in zip(subquestions["subq_id"].to_pylist(), subquestions["qid"].to_pylist()):
            self.question_of[subq_id] = qid
            k = subq_id[len(qid) + 1 :] if subq_id.startswith(f"{qid}-") else ""
            if k.isdigit():
                self.positions.setdefault(qid, {})[int(k)] = subq_id


class Columns:
    """A block's rows as columns (building a dict per row costs more than the import's parsing); the columns an import
    cannot know are null in every row."""

    FILLED = ("subq_id", "qid", "docid", "url_hash", "level", "raw", "status", "clicked")

    def __init__(self) -> None:
        self.values: dict[str, list[object]] = {name: [] for name in self.FILLED}

    def add(
        self,
        qid: str,
        docid: str,
        url_hash: str | None,
        clicked: bool,
        subq_ids: list[str],
        labels: tuple[Label, ...],
        statuses: list[str],
    ) -> None:
        n = len(subq_ids)
        self.values["subq_id"] += subq_ids
        for name, value in (("qid", qid), ("docid", docid), ("url_hash", url_hash), ("clicked", clicked)):
            self.values[name] += [value] * n
        self.values["level"] += [label.level for label in labels]
        self.values["status"] += statuses
        self.values["raw"] += [label.raw for label in labels]

    def table(self) -> pa.Table:
        schema = arrow_schema(JUDGMENTS)
        n = len(self.values["subq_id"])
        return pa.table(
            [pa.array(self.values[f.name], f.type) if f.name in self.values else pa.nulls(n, f.type) for f in schema],
            schema=schema,
        )


class FirstCopies:
    """Each line key's first copy: where it was and a 64-bit hash of what it said, kept compact (a 16-byte digest of
    the key, one integer packing the hash, the file and the line; about 150 bytes a key), since a full-size ratings
    file has millions of keys. A second copy is the same line when the hashes agree."""

    def __init__(self, names: list[str]):
        self.names = names
        self.entries: dict[bytes, int] = {}  # key digest -> fingerprint << 64 | source << 40 | line

    def repeat(self, key: str, value: object, source: int, line: int) -> tuple[bool, str] | None:
        """None for a first copy (now recorded); else (same value?, "file:line" of the first copy)."""
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        fingerprint = hash(value) & (1 << 64) - 1
        found = self.entries.get(digest)
        if found is None:
            self.entries[digest] = fingerprint << 64 | source << 40 | line
            return None
        return found >> 64 == fingerprint, f"{self.names[found >> 40 & 0xFFFFFF]}:{found & (1 << 40) - 1}"


@dataclass
class ShardImport:
    questions: QuestionLists
    shard: Shard
    kind: LabelFormat
    prompt: Prompt
    documents: DocumentKeys
    rejects: Rejects
    seen: FirstCopies | None = None
    # openai-batch: (qid, docid) -> the positions labelled (a bit mask)
    covered: dict[tuple[str, str], int] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)
    levels: Counter[int] = field(default_factory=Counter)
    documents_by_way: Counter[str] = field(default_factory=Counter)  # rows by how their document id was resolved
    clicked_unknown: int = 0  # rows whose document has no known URL-hash, so no known click
    # (qid, url_hash) -> the URL-hash whose text the authors sent
    other_text: dict[tuple[str, str], str] = field(default_factory=dict)
    other_text_documents: int = 0  # (question, document) lines whose ratings were graded on another's text
    other_text_without_level: int = 0  # of their ratings, those without a level (the authors' -1, -2, 7)

    def find_other_texts(self) -> int:
        """crux-ratings with a corpus: the authors' clicked pass over this shard's questions, reconstructed
        (generation/labels/authors_pass.py), so the ratings it graded on another document's text are flagged.
        Returns how many of these questions' clicked documents the corpus lacks."""
        owned = {qid: hashes for qid, hashes in self.questions.clicked_in_order.items() if self.shard.owns_key(qid)}
        present = self.documents.present_url_hashes(h for hashes in owned.values() for h in hashes)
        missing = 0
        for qid, hashes in owned.items():
            missing += len(set(hashes) - present)
            for asked, sent in graded_on_other_text(hashes, present).items():
                self.other_text[(qid, asked)] = sent
        return missing

    def run(self, sources: list[FileCounts], sink: ParquetSink, progress=None) -> None:
        self.seen = FirstCopies([s.name for s in sources])
        for index, source in enumerate(sources):
            path = Path(source.path)
            lines = read_label_file(path, self.kind, self.prompt)
            while block := list(islice(lines, BLOCK_LINES)):
                self.documents.prefetch(
                    item.docid for _, item in block if isinstance(item, LabelLine) and self.owns(item)
                )
                columns = Columns()
                for line, item in block:
                    source.lines += 1
                    try:
                        if self.mine(item, path, line):
                            source.rows += self.add(item, path, line, source, index, columns)
                    except InputError as error:
                        self.rejects.reject(error, None, error.reason)
                        source.rejected += 1
                if columns.values["subq_id"]:
                    sink.write_table(columns.table())
                if progress is not None:
                    progress(len(block))

    def incomplete_documents(self) -> int:
        """openai-batch: documents labelled for only some of their question's sub-questions."""
        return sum(
            1 for (qid, _), mask in self.covered.items() if mask != (1 << len(self.questions.positions[qid])) - 1
        )

    def owns(self, item: LabelLine) -> bool:
        qid = item.qid if item.qid is not None else self.questions.question_of.get(item.identity[0], item.identity[0])
        return self.shard.owns_key(qid)

    def mine(self, item: LabelLine | InputError, path: Path, line: int) -> TypeGuard[LabelLine]:
        """Whether this shard imports the line; a malformed line this shard owns is raised."""
        if isinstance(item, InputError):
            if self.shard.owns_key(f"{path.name}:{line}"):
                raise item
            return False
        return self.owns(item)

    def subquestions_of(self, item: LabelLine, path: Path, line: int) -> tuple[str, list[str]]:
        """The line's question and the subq_id of each of its labels; a question, sub-question or position the
        questions folder does not have is an error naming the line."""
        where = self.questions.folder
        if item.qid is None:
            subq_id = item.identity[0]
            if subq_id not in self.questions.question_of:
                raise problem(path, line, "unknown_subquestion", f"sub-question {subq_id!r} is not in {where}")
            return self.questions.question_of[subq_id], [subq_id]
        if item.qid not in self.questions.positions:
            raise problem(
                path,
                line,
                "unknown_qid",
                f"question {item.qid!r} is not in {where} (another split's "
                "question? import each split with its own --subquestions, and --rejects for the rest)",
                record_id=item.qid,
            )
        positions = self.questions.positions[item.qid]
        if self.kind is LabelFormat.crux_ratings and len(item.labels) != len(positions):
            raise problem(
                path,
                line,
                "wrong_list_length",
                f"{len(item.labels)} ratings, but question {item.qid} has {len(positions)} sub-questions in {where}",
                record_id=item.qid,
            )
        beyond = [label.subquestion for label in item.labels if label.subquestion not in positions]
        if beyond:
            raise problem(
                path,
                line,
                "position_beyond_list",
                f"sub-question position {beyond[0]} is beyond question "
                f"{item.qid}'s {len(positions)} sub-questions in {where}",
                record_id=item.qid,
            )
        return item.qid, [positions[position(label)] for label in item.labels]

    def add(self, item: LabelLine, path: Path, line: int, source: FileCounts, index: int, columns: Columns) -> int:
        """The line's rows into `columns`; how many (none for an exact repeat of an earlier line)."""
        qid, subq_ids = self.subquestions_of(item, path, line)
        docid, url_hash, how = self.documents.resolve(item.docid)
        assert self.seen is not None  # run() sets it before the first line
        repeat = self.seen.repeat(item.key(docid), item.value, index, line)
        if repeat is not None:
            same, first = repeat
            if not same:
                raise problem(
                    path,
                    line,
                    "conflicting_duplicate",
                    f"labels the same pair as {first} differently ({item.value!r} here)",
                    record_id=qid,
                )
            source.duplicates += 1
            return 0
        if self.kind is LabelFormat.openai_batch:
            self.covered[(qid, docid)] = self.covered.get((qid, docid), 0) | (1 << position(item.labels[0]))
        self.documents_by_way[how] += len(subq_ids)
        if url_hash is None:
            self.clicked_unknown += len(subq_ids)
        statuses = [label.status for label in item.labels]
        if self.other_text and (qid, url_hash) in self.other_text:  # every rating of it, with a level or not
            statuses = [OTHER_TEXT_STATUS] * len(statuses)
            self.other_text_documents += 1
            self.other_text_without_level += sum(label.level is None for label in item.labels)
        self.statuses.update(statuses)
        self.levels.update(label.level for label in item.labels if label.level is not None)
        columns.add(
            qid,
            docid,
            url_hash,
            url_hash is not None and url_hash in self.questions.clicked.get(qid, ()),
            subq_ids,
            item.labels,
            statuses,
        )
        return len(subq_ids)
