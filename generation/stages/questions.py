"""Researchy Questions records (as on the Hub: JSONL, JSONL.gz or Parquet) -> questions + subquestions.

Record fields used: `id`, `question`, `DocStream` (clicked documents) and `gpt4_decomposition`
(`subquestions`, a flat list of "- "-prefixed strings, and `headers`, lists of a header question
followed by its " - "-prefixed bullets).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from generation.corpus.topics import question_files
from generation.errors import ArgumentError, InputError, read_lines
from generation.notices import warn
from generation.stages.base import Input, Stage, StageSummary
from generation.storage.atomic_files import ParquetSink
from generation.storage.rejects import Rejects
from generation.storage.schema import SOURCE_SPLITS
from generation.storage.shards import Shard


class Decomposition(str, Enum):
    subquestions = "subquestions"  # the flat list, as the paper judged (default)
    headers = "headers"  # only the header questions (depth 1)
    both = "both"  # the flat list plus header-structure entries missing from it


def strip_bullet(text: str) -> str:
    text = text.strip()
    if text.startswith("-"):
        text = text[1:].strip()
    return text


def _normalised(text: str) -> str:
    return " ".join(strip_bullet(text).split()).casefold()


def _parquet_records(path: Path) -> Iterator[tuple[int, dict]]:
    row = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=2048):
            for record in batch.to_pylist():
                row += 1
                yield row, record
    except (OSError, ValueError) as e:  # pyarrow.ArrowInvalid is a ValueError; ArrowIOError an OSError
        raise InputError(path, row + 1, f"not a readable Parquet file ({str(e).splitlines()[0][:100]})") from None


def iter_raw_records(path: Path) -> Iterator[tuple[int, Any]]:
    """Yields (line or row number, record dict or the InputError that replaced it)."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        yield from _parquet_records(path)
        return
    if not (
        name.endswith(".jsonl") or name.endswith(".jsonl.gz") or name.endswith(".json") or name.endswith(".json.gz")
    ):
        raise InputError(path, 0, "unknown format: expected .jsonl, .jsonl.gz or .parquet")
    for lineno, raw in read_lines(path):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            yield lineno, InputError(path, lineno, f"not UTF-8 ({e.reason} at byte {e.start})")
            continue
        except json.JSONDecodeError as e:
            yield lineno, InputError(path, lineno, f"not valid JSON ({e.msg} at column {e.colno})")
            continue
        if not isinstance(record, dict):
            yield lineno, InputError(path, lineno, f"expected a JSON object, got {type(record).__name__}")
            continue
        yield lineno, record


class _Record:
    """Typed access to one record's fields; every failure names the field by its full path."""

    def __init__(self, record: dict, path: Path, line: int):
        self.record, self.path, self.line = record, path, line
        raw_id = record.get("id")
        self.qid = str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else None

    def fail(self, label: str, message: str) -> InputError:
        return InputError(self.path, self.line, message, field=label, record_id=self.qid)

    def check(self, label: str, value: Any, kind: type | tuple[type, ...], allow_none: bool = False) -> Any:
        if value is None and allow_none:
            return None
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(label, f"expected {expected}, got {type(value).__name__}")
        return value

    def get(self, container: dict, key: str, label: str, kind, allow_none: bool = False) -> Any:
        if key not in container:
            raise self.fail(label, "missing")
        return self.check(label, container[key], kind, allow_none)


def _clicked(rec: _Record) -> list[dict]:
    stream = rec.check("DocStream", rec.record.get("DocStream"), list, allow_none=True) or []
    clicked = []
    for i, doc in enumerate(stream):
        name = f"DocStream[{i}]"
        rec.check(name, doc, dict)
        url_hash = rec.get(doc, "CluewebURLHash", f"{name}.CluewebURLHash", str)
        if len(url_hash) != 32 or any(c not in "0123456789abcdefABCDEF" for c in url_hash):
            raise rec.fail(f"{name}.CluewebURLHash", f"expected 32 hex characters, got {url_hash!r}")
        url = rec.get(doc, "Url", f"{name}.Url", str, allow_none=True)
        # A float share on the Hub (the card: "normalized to be a probability distribution"); integers accepted.
        share = rec.check(f"{name}.Click_Cnt", doc.get("Click_Cnt"), (float, int), allow_none=True)
        if share is not None and not (math.isfinite(share) and 0 <= share <= 1):
            raise rec.fail(f"{name}.Click_Cnt", f"expected a share of the question's clicks in [0, 1], got {share!r}")
        clicked.append(
            {"url_hash": url_hash.upper(), "url": url, "click_share": None if share is None else float(share)}
        )
    total = sum(c["click_share"] or 0.0 for c in clicked)
    if total > 1 + SHARE_SUM_TOLERANCE:
        raise rec.fail(
            "DocStream",
            f"the Click_Cnt shares sum to {total:.4g}: not a probability distribution "
            "over the question's clicked documents",
        )
    return clicked


# The Researchy Questions card: "The click preferences in the DocStream are normalized to be a probability
# distribution". Shares are stored rounded (the bundled sample's round to 4 decimals and sum to 1 +- 1e-4), and a
# DocStream may lack some clicked pages, so only a sum clearly above 1 is refused.
SHARE_SUM_TOLERANCE = 0.01


def _subquestion_rows(rec: _Record, mode: Decomposition) -> list[dict]:
    decomposition = rec.get(rec.record, "gpt4_decomposition", "gpt4_decomposition", dict)
    flat = rec.get(decomposition, "subquestions", "gpt4_decomposition.subquestions", list)
    headers = rec.check("gpt4_decomposition.headers", decomposition.get("headers"), list, allow_none=True) or []

    structure: list[tuple[str, str, int, str]] = []  # (text, header, depth, fallback id)
    for j, block in enumerate(headers):
        name = f"gpt4_decomposition.headers[{j}]"
        rec.check(name, block, list)
        if not block:
            raise rec.fail(name, "empty header block")
        lines = [strip_bullet(rec.check(f"{name}[{i}]", line, str)) for i, line in enumerate(block)]
        structure.append((lines[0], lines[0], 1, f"{rec.qid}-h{j}"))
        structure.extend((text, lines[0], 2, f"{rec.qid}-h{j}-{i}") for i, text in enumerate(lines[1:], 1))
    placement: dict[str, tuple[str, int]] = {}
    for text, parent, level, _ in structure:
        placement.setdefault(_normalised(text), (parent, level))

    rows: list[dict] = []
    seen: dict[str, str] = {}
    for k, item in enumerate(flat):
        name = f"gpt4_decomposition.subquestions[{k}]"
        text = strip_bullet(rec.check(name, item, str))
        if not text:
            raise rec.fail(name, "empty sub-question")
        header, depth = placement.get(_normalised(text), (None, None))
        rows.append({"subq_id": f"{rec.qid}-{k}", "qid": rec.qid, "text": text, "header": header, "depth": depth})
        seen.setdefault(_normalised(text), rows[-1]["subq_id"])
    if mode is Decomposition.subquestions:
        return _some(rec, rows, mode)
    extra: list[dict] = [
        {
            "subq_id": seen.get(_normalised(text), fallback_id),
            "qid": rec.qid,
            "text": text,
            "header": header,
            "depth": depth,
        }
        for text, header, depth, fallback_id in structure
    ]
    if mode is Decomposition.headers:
        return _some(rec, [r for r in extra if r["depth"] == 1], mode)
    return _some(rec, rows + [r for r in extra if _normalised(r["text"]) not in seen], mode)


def _some(rec: _Record, rows: list[dict], mode: Decomposition) -> list[dict]:
    """A question without sub-questions has nothing to judge: a bad record, not a silent row."""
    if not rows:
        where = "gpt4_decomposition.headers" if mode is Decomposition.headers else "gpt4_decomposition.subquestions"
        raise rec.fail(where, f"no sub-questions (--decomposition {mode.value}): nothing to judge")
    return rows


def parse_record(
    record: dict, path: Path, line: int, split: str, mode: Decomposition = Decomposition.subquestions
) -> tuple[dict, list[dict]]:
    """One Researchy record -> (questions row, subquestions rows). Raises InputError naming the field."""
    rec = _Record(record, path, line)
    qid = rec.qid if rec.qid is not None else rec.get(record, "id", "id", (str, int))  # raises: missing, wrong type
    if not qid.strip():
        raise rec.fail("id", "empty id")
    if any(c.isspace() for c in qid):
        raise rec.fail("id", "contains whitespace (TREC run and qrels files split on it)")
    question = rec.get(record, "question", "question", str)
    if not question.strip():
        raise rec.fail("question", "empty question")
    question_row = {"qid": qid, "question": question, "split": split, "clicked": _clicked(rec)}
    return question_row, _subquestion_rows(rec, mode)


@dataclass(slots=True)
class QuestionsSummary(StageSummary):
    questions: int = 0
    subquestions: int = 0
    clicked: int = 0  # clicked documents the kept questions list
    rejected: int = 0  # malformed records (set aside with --rejects)


class QuestionsStage(Stage[QuestionsSummary]):
    """Researchy Questions records -> the questions and subquestions tables (one folder per split, not sharded)."""

    name = "questions"
    unit = "records"
    sharded = False
    produces = "`questions.parquet`, `subquestions.parquet`"
    summary_type = QuestionsSummary

    def __init__(
        self,
        profile,
        out: Path,
        records: list[Path],
        split: str = "train",
        decomposition: Decomposition = Decomposition.subquestions,
        rejects: Path | None = None,
    ):
        super().__init__(profile, out)
        self.records, self.split, self.decomposition, self.rejects = (
            [Path(p) for p in records],
            split,
            decomposition,
            rejects,
        )

    @classmethod
    def completed_files(cls, folder: Path, profile=None, verify_sha256: bool = True) -> list[Path]:
        return list(question_files(folder))

    def run(self, shard: Shard = Shard(), progress=None, executor=None) -> QuestionsSummary:
        summary = self.new_summary(shard)
        write_tables(self.records, self.out, self.split, self.decomposition, self.rejects, summary, progress)
        summary.outputs = [self.out / "questions.parquet", self.out / "subquestions.parquet"]
        return summary


def write_tables(
    inputs: list[Path],
    out_dir: Path,
    split: str,
    decomposition: Decomposition,
    rejects_path: Path | None,
    summary: QuestionsSummary,
    progress=None,
) -> None:
    if split not in SOURCE_SPLITS:
        raise ArgumentError(
            f"--split {split!r}: Researchy Questions' splits are {' and '.join(SOURCE_SPLITS)} "
            "(build-release carves dev from train)"
        )
    first_line: dict[str, str] = {}
    subq_owner: dict[str, str] = {}  # subq_id -> qid: ids like "Z-h0-1" could come from qid Z or qid Z-h0
    with (
        Rejects(rejects_path) as rejects,
        ParquetSink(out_dir / "questions.parquet", "questions") as questions,
        ParquetSink(out_dir / "subquestions.parquet", "subquestions") as subquestions,
    ):
        for path in map(Path, inputs):
            for line, record in iter_raw_records(path):
                if progress is not None:
                    progress()
                try:
                    if isinstance(record, InputError):
                        raise record
                    question_row, subq_rows = parse_record(record, path, line, split, decomposition)
                    if question_row["qid"] in first_line:
                        raise InputError(
                            path,
                            line,
                            f"duplicate id, first seen at {first_line[question_row['qid']]}",
                            field="id",
                            record_id=question_row["qid"],
                        )
                    ids = [r["subq_id"] for r in subq_rows]
                    if len(set(ids)) != len(ids):
                        raise InputError(
                            path,
                            line,
                            "the record's sub-question ids repeat",
                            field="id",
                            record_id=question_row["qid"],
                        )
                    clash = next((i for i in ids if i in subq_owner), None)
                    if clash is not None:
                        owner = subq_owner[clash]
                        raise InputError(
                            path,
                            line,
                            f"sub-question id {clash!r} is also the id of a sub-question of "
                            f"question {owner!r} (first seen at {first_line[owner]}); ids must be "
                            "unique: rename one of the questions",
                            field="id",
                            record_id=question_row["qid"],
                        )
                except InputError as error:
                    rejects.reject(error, record if not isinstance(record, InputError) else None)
                    continue
                first_line[question_row["qid"]] = f"{path}:{line}"
                subq_owner.update((r["subq_id"], question_row["qid"]) for r in subq_rows)
                questions.write_rows([question_row])
                subquestions.write_rows(subq_rows)
                summary.questions += 1
                summary.subquestions += len(subq_rows)
                summary.clicked += len(question_row["clicked"])
        summary.rejected = rejects.count
        if summary.questions == 0 and not summary.rejected:  # inside the sinks: no empty tables are left behind
            raise InputError(", ".join(map(str, inputs)), 0, "no questions read: the input holds no records")
        if summary.questions == 0:
            warn(f"no questions kept: all {summary.rejected:,} records were rejected (see {rejects_path})")


# The folders `questions` writes, as the stages that read them declare them (their `reads`), declared once here.
QUESTIONS_FOLDER = Input("questions", "folder from `researchy-subq questions`", (QuestionsStage,))
SUBQUESTIONS_FOLDER = Input("subquestions", "folder from `researchy-subq questions`", (QuestionsStage,))
