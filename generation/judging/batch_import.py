"""OpenAI Batch result lines matched to the pairs of an export (generation/judging/batch_files.py), into grades.

Result lines as `vllm run-batch` writes them and as the OpenAI Batch API writes its output and error
files (OpenAI's `BatchRequestOutput`, "the per-line object of the batch output and error files": `id`,
`custom_id`, `response` {`status_code`, `request_id`, `body`} or null, `error` {`code`, `message`} or null; vLLM
0.32 writes the same, with `error` an ErrorResponse or a string), each line read by the import-labels stage's
reader (generation/judging/batch_results.py). Matched to a pair plan by custom_id; nothing
is dropped or doubled silently (see `ImportResult`); the outcome does not depend on the order of files or lines,
so importing the same files twice gives the same result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from generation.errors import InputError, read_lines
from generation.judging.batch_files import judge_format, parse_custom_id
from generation.judging.batch_results import BatchResult, read_result_lines
from generation.judging.judges import Grade, LLMJudge, RequestFailed, failed
from generation.judging.openai_format import AnswerUnreadable
from generation.storage.rejects import Rejects

EXAMPLES = 5  # examples kept per kind of problem


@dataclass
class Problems:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str, times: int = 1) -> None:
        self.count += times
        if len(self.examples) < EXAMPLES:
            self.examples.append(example)

    def absorb(self, other: Problems) -> None:
        self.count += other.count
        self.examples += other.examples[: EXAMPLES - len(self.examples)]

    def as_record(self) -> dict:
        return {"count": self.count, "examples": list(self.examples)}


@dataclass
class ImportResult:
    grades: dict[str, Grade]  # custom_id -> Grade, for the plan's pairs that have one
    lines: int = 0
    duplicates: int = 0  # repeated lines with the same answer: counted once
    graded_before: int = 0  # lines for pairs an earlier import graded
    # lines naming no pair of the plan: a well-formed id of a pair this shard does not hold (another shard's, or
    # one graded and since changed), a file of which no line names a pair of the shard (another export's results),
    # or an id that is not `qid::docid::position` at all
    not_in_shard: Problems = field(default_factory=Problems)
    another_export: Problems = field(default_factory=Problems)
    malformed_ids: Problems = field(default_factory=Problems)
    conflicting: Problems = field(default_factory=Problems)  # pairs answered differently: left out of grades
    error_lines: Problems = field(default_factory=Problems)  # failed requests; a pair with only these gets status
    superseded_errors: int = 0  # request_failed; error lines of a pair that also has an answer
    missing: Problems = field(default_factory=Problems)  # plan pairs without any line
    unresolved: set[str] = field(default_factory=set)  # the pairs to export again: missing or answered differently

    def counts(self) -> dict[str, int]:
        return {
            "lines": self.lines,
            "graded": len(self.grades),
            "graded before": self.graded_before,
            "duplicates": self.duplicates,
            "not in shard": self.not_in_shard.count,
            "another export": self.another_export.count,
            "malformed ids": self.malformed_ids.count,
            "conflicting": self.conflicting.count,
            "error_lines": self.error_lines.count,
            "superseded_errors": self.superseded_errors,
            "missing": self.missing.count,
        }


def read_results(files: Iterable[str | Path], rejects: Rejects | None = None) -> Iterator[tuple[str, BatchResult]]:
    """("file:line", the line's BatchResult) of each result line, read by generation/judging/batch_results.py (also
    the authors' lines, which carry the pair's id in `id`). A line that is not a result line is an InputError, or
    counted in `rejects` when given."""
    for path in map(Path, files):
        for number, result in read_result_lines(read_lines(path), path):
            if isinstance(result, InputError):
                if rejects is None:
                    raise result
                rejects.reject(result, None, "malformed result line")
                continue
            yield f"{path}:{number}", result


def import_results(
    files: Iterable[str | Path],
    plan: Iterable[str],
    grade: Callable[[dict, bool], Grade],
    cut_by_tokens: Iterable[str] = (),
    rejects: Rejects | None = None,
    graded_before: Iterable[str] = (),
) -> ImportResult:
    """Grades for the plan's custom_ids from result files. `grade(body, cut)` turns an answered line's response
    body into a Grade (`answer_grader`). Per pair: one answer (however often repeated) is its grade; different
    answers are a conflict, and the pair is left out; error lines alone give status request_failed (the
    smallest error text, whatever the order); no line at all is missing. Lines for `graded_before` (pairs an
    earlier import graded: files given again) are counted apart; lines naming no pair of the plan are counted, with
    examples, as not in the shard, of another export (a file none of whose lines is the shard's) or malformed ids."""
    wanted = list(dict.fromkeys(plan))
    planned, cut, before = set(wanted), set(cut_by_tokens), set(graded_before)
    answers: dict[str, dict[tuple, tuple[Grade, str]]] = defaultdict(dict)
    errors: dict[str, list[tuple[str, str]]] = defaultdict(list)
    result = ImportResult(grades={})
    for path in files:
        foreign, ours = Problems(), 0  # this file's lines of pairs outside the shard; lines of the shard's pairs
        for where, line in read_results([path], rejects):
            result.lines += 1
            cid, error = line.custom_id, line.error
            if cid not in planned:
                if cid in before:
                    result.graded_before += 1
                    ours += 1
                elif not well_formed(cid):
                    result.malformed_ids.add(f"{where}: {cid!r} is not 'qid::docid::position'")
                else:
                    foreign.add(f"{where}: {cid!r}")
                continue
            ours += 1
            _collect(result, answers, errors, grade, where, cid, error, line, cid in cut)
        if foreign.count and not ours:
            result.another_export.add(
                f"{path}: {foreign.count:,} lines, none of a pair of this shard, e.g. "
                f"{foreign.examples[0].rsplit(': ', 1)[1]}",
                foreign.count,
            )
        else:
            result.not_in_shard.absorb(foreign)
    _settle(result, wanted, answers, errors)
    result.unresolved = planned - set(result.grades)
    return result


def well_formed(cid: str) -> bool:
    try:
        parse_custom_id(cid)
    except ValueError:
        return False
    return True


def _collect(result: ImportResult, answers, errors, grade, where: str, cid: str, error, line, cut: bool) -> None:
    """One result line of a planned pair: its answer's grade, or its error."""
    if error is None:
        graded = grade(line.body, cut)
        key = (graded.level, graded.raw, graded.status, tuple(graded.probs or ()))
        if key in answers[cid]:
            result.duplicates += 1
        answers[cid].setdefault(key, (graded, where))
    else:
        result.error_lines.add(f"{where}: {cid}: {error[:200]}")
        errors[cid].append((error, where))


def _settle(result: ImportResult, wanted: list[str], answers, errors) -> None:
    """Each planned pair's grade from its lines: one answer, a conflict, its errors alone, or missing."""
    for cid in wanted:
        found = answers.get(cid)
        if found and len(found) > 1:
            shown = "; ".join(f"{w}: {g.raw!r}" for g, w in list(found.values())[:3])
            result.conflicting.add(f"{cid}: {shown}")
        elif found:
            result.grades[cid] = next(iter(found.values()))[0]
            result.superseded_errors += len(errors.get(cid, ()))
        elif cid in errors:
            error, where = min(errors[cid])  # `raw` is published: the file's name, not where it lay
            result.grades[cid] = failed(RequestFailed(f"{error} (batch result {Path(where).name})"))
        else:
            result.missing.add(cid)


def answer_grader(judge: LLMJudge) -> Callable[[dict, bool], Grade]:
    """`grade(body, cut)` for `import_results`: the judge's own parsing of the backend's answer (the profile's
    parser in generate mode, the digit distribution in distribution mode); an unreadable body is request_failed."""
    fmt = judge_format(judge)
    read: Callable[[dict], str | list[float]]
    if judge.config.mode == "distribution":
        texts = [judge.encoder.tokenizer.decode([t]) for t in judge.digit_ids]
        read = lambda body: fmt.digit_row(body, judge.digit_ids, texts)  # noqa: E731
    else:
        read = fmt.text

    def grade(body: dict, cut: bool) -> Grade:
        try:
            return judge.grade_answer(read(body), cut)
        except AnswerUnreadable as error:
            return judge.grade_answer(RequestFailed(str(error)), cut)

    return grade
