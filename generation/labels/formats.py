"""The label files `import-labels` reads, each line as a `LabelLine`: a document and one or more labels of it.

- `crux-ratings`: the authors' ratings JSONL. DylanJoo/crux writes one line per (question, document),
  `json.dumps({"id": qid, "docid": docid, "rating": ratings})`, the list indexed by the sub-question's position in
  the question's `gpt4_decomposition.subquestions` (`load_subtopics`, crux/tools/researchy/ir_utils.py):
  crux-researchy/merge_ratings.py and merge_ratings_qrel.py (`main`, "write them out"; incomplete lists are dropped
  with a print) and crux/augmentation/gen_ratings.py (`item = {"id": id, "docid": docid, "rating": ...}`). Each
  rating is `int(re.findall(r"\\d|-\\d", output + "-1")[0])`: -1 for an output without a digit, -2 for a failed
  request in their litellm path (DESIGN.md, "Protocol facts", rows "parsing" and "how the judge ran at scale").
  Their docid is the document's ClueWeb22 `URL-hash` (`create_subset_corpus` keys the corpus on it, `get_qrel` on
  Researchy's `CluewebURLHash`).
- `qrels`: graded TREC qrels, `subq_id iteration docid level` separated by white space (trec_eval's qrels format;
  the iteration field is not used).
- `openai-batch`: OpenAI Batch result lines (generation/judging/batch_results.py) whose custom_id is the authors'
  `qid::docid::i_subquestion` (crux/augmentation/gen_ratings_offload_qrel.py writes requests with
  `"id": f"{id}::{docid}::{j}"`; the merge scripts split it with `.split("::")`); the answer is parsed with the
  profile's prompt parser, as the kit's own judge does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from generation.errors import InputError, read_lines
from generation.judging.batch_results import BatchResult, read_result_lines
from generation.judging.parsing import Parsed, classify_rating
from generation.judging.prompts import Prompt
from generation.labels.trec_qrels import is_relevance, line_fields

PAIR_SEPARATOR = "::"  # the authors' custom_id: qid::docid::i_subquestion


class LabelFormat(str, Enum):
    crux_ratings = "crux-ratings"
    qrels = "qrels"
    openai_batch = "openai-batch"


class Label(NamedTuple):  # a tuple: a full-size ratings file makes tens of millions of them
    subquestion: int | str  # position in the question's sub-question list (crux-ratings, openai-batch) or subq_id
    level: int | None
    status: str
    raw: str | None  # the judge's text where the file has it (openai-batch); None otherwise


@dataclass(frozen=True)
class LabelLine:
    qid: str | None  # None for qrels: the sub-question's question comes from the questions folder
    docid: str
    labels: tuple[Label, ...]
    value: object  # what two copies of this line must agree on to be the same line (duplicates)
    identity: tuple[str, ...]  # what the line labels besides its document: (qid,), (qid, position) or (subq_id,)

    def key(self, docid: str) -> str:
        """The line's identity with the document's resolved id: (question, document) for a ratings line, (question,
        position, document) for a batch line, (sub-question, document) for a qrels line."""
        return "\x1f".join((*self.identity, docid))


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_lines(path: Path) -> Iterator[tuple[int, object]]:
    for line, raw in read_lines(path):
        if not raw.strip():
            continue
        try:
            yield line, json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            detail = e.msg if isinstance(e, json.JSONDecodeError) else e.reason
            yield line, InputError(path, line, f"not valid JSON ({detail})")


RATINGS_KEYS = {"id", "docid", "rating"}


def check_docid(docid: object, path: Path, line: int) -> None:
    """A document id is a non-empty string without white space (TREC qrels and runs split on it)."""
    if not isinstance(docid, str) or not docid.strip() or any(c.isspace() for c in docid):
        raise InputError(path, line, f"expected a document id without white space, got {docid!r}", field="docid")


def crux_ratings_line(record: object, path: Path, line: int, max_level: int) -> LabelLine:
    if not isinstance(record, dict):
        raise InputError(path, line, f'expected a JSON object {{"id", "docid", "rating"}}, got {type(record).__name__}')
    if set(record) != RATINGS_KEYS:
        raise InputError(
            path,
            line,
            f"a ratings line has exactly the keys id, docid, rating (merge_ratings.py); this one has {sorted(record)}",
        )
    qid, docid, rating = record["id"], record["docid"], record["rating"]
    if not (isinstance(qid, str) or _integer(qid)) or str(qid).strip() == "":
        raise InputError(path, line, f"expected a question id (string or integer), got {qid!r}", field="id")
    check_docid(docid, path, line)
    if not isinstance(rating, list) or not all(type(r) is int for r in rating):  # noqa: E721 - a bool is no rating
        raise InputError(
            path,
            line,
            f"expected a list of integer ratings, got {json.dumps(rating)[:80]}",
            field="rating",
            record_id=str(qid),
        )
    labels = tuple(_rating_label(k, r, max_level) for k, r in enumerate(rating))
    return LabelLine(str(qid), docid, labels, tuple(rating), (str(qid),))


def qrels_line(text: str, path: Path, line: int, max_level: int) -> LabelLine | None:
    """A TREC qrels line read by the kit's qrels rules (generation/labels/trec_qrels.py); None for a comment line."""
    fields = line_fields(text)
    if fields is None:
        return None
    if len(fields) != 4:
        raise InputError(
            path, line, f"a qrels line is `subq_id iteration docid level`; this one has {len(fields)} fields"
        )
    subq_id, _, docid, level = fields
    if not is_relevance(level):
        raise InputError(path, line, f"level {level!r} is not an integer", field="level")
    value = int(level)
    label = _label(subq_id, classify_rating(value, max_level, authors_sentinels=False), None)
    return LabelLine(None, docid, (label,), value, (subq_id,))


def batch_line(result: BatchResult, path: Path, line: int, prompt: Prompt) -> LabelLine:
    parts = result.custom_id.split(PAIR_SEPARATOR)
    if len(parts) != 3 or not all(parts) or not parts[2].isdigit():
        raise InputError(
            path,
            line,
            f"custom_id {result.custom_id!r} is not the authors' qid::docid::i_subquestion",
            field="custom_id",
        )
    qid, docid, position = parts
    check_docid(docid, path, line)
    if result.content is None:
        label = Label(int(position), None, "request_failed", result.error)
    else:
        label = _label(int(position), prompt.parse(result.content), result.content)
    return LabelLine(qid, docid, (label,), (result.content, result.error), (qid, str(int(position))))


@lru_cache(maxsize=65536)  # (position, rating) pairs repeat across millions of lines: one Label each
def _rating_label(position: int, rating: int, max_level: int) -> Label:
    return _label(position, classify_rating(rating, max_level), None)


def _label(subquestion: int | str, parsed: Parsed, raw: str | None) -> Label:
    return Label(subquestion, parsed.level, parsed.status, raw)


def read_label_file(path: Path, kind: LabelFormat, prompt: Prompt) -> Iterator[tuple[int, LabelLine | InputError]]:
    """(line number, the line's labels or the InputError that replaced it) for each non-blank line of `path`; a file
    that cannot be read to its end raises (errors.read_lines)."""
    if kind is LabelFormat.openai_batch:
        for line, result in read_result_lines(read_lines(path), path):
            if isinstance(result, InputError):
                yield line, result
                continue
            try:
                yield line, batch_line(result, path, line, prompt)
            except InputError as e:
                yield line, e
        return
    if kind is LabelFormat.qrels:
        for line, raw in read_lines(path):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield line, InputError(path, line, f"not UTF-8 ({e.reason} at byte {e.start})")
                continue
            if text.strip():
                try:
                    labels = qrels_line(text, path, line, prompt.max_level)
                except InputError as e:
                    yield line, e
                    continue
                if labels is not None:
                    yield line, labels
        return
    for line, record in _json_lines(path):
        if isinstance(record, InputError):
            yield line, record
            continue
        try:
            yield line, crux_ratings_line(record, path, line, prompt.max_level)
        except InputError as e:
            yield line, e
