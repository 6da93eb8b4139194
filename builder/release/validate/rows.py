"""`validate`'s pass over the rows of the data files (opened by reading.py): one streaming pass per file set
that recomputes what the card and manifest state and checks every row.

Per judgments batch: positions of qid and subq_id (orphans, a sub-question of another question, a question
of another split), the level against its partition, NaN in float columns, a 64-bit key per
(subq_id, docid) for uniqueness, an order-free fingerprint of the graded rows that the qrels must
reproduce, and validate's own statistics and complexity counts (statistics.py, retrieval_complexity.py: written
apart from build-release's, so that one mistake is not made twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from builder.release.contract import SplitStats
from builder.release.layout import PARTITIONS
from builder.release.topic_index import MISSING, TopicIndex, hashed_codes, mix, string_hashes
from builder.release.validate.reading import Readable, batches, fingerprint, nan_count, read_all
from builder.release.validate.retrieval_complexity import Answers, complexity_summary, with_complexity
from builder.release.validate.statistics import SplitCount
from generation.profiles.profile import Complexity, Profile
from generation.storage.spill import KeyRuns

JUDGMENT_COLUMNS = [
    "subq_id",
    "qid",
    "docid",
    "url_hash",
    "level",
    "raw",
    "status",
    "source",
    "context_cut_by_tokens",
    "bm25_rank",
    "rerank_rank",
    "clicked",
    "expected",
    "probs",
    "extract_verbatim",
]


@dataclass
class SplitScan:
    stats: SplitCount
    keys: KeyRuns = field(default_factory=KeyRuns)  # 64-bit (subq_id, docid) key per judgment, spilled to disk
    graded: int = 0
    graded_print: int = 0  # sum of mix(subq, doc, level) over graded judgments, mod 2^64


def first_occurrences(table: pa.Table, key: str) -> pa.Table:
    """The table without repeated keys (reported by the caller), so positions are unambiguous."""
    repeated = pd.Index(table[key].to_numpy(zero_copy_only=False), dtype=object).duplicated()
    return table.filter(pa.array(~repeated)) if repeated.any() else table


def scan_topics(release: Path, splits: list[str], files: Readable, checks: dict):
    """Questions and sub-questions of every split; a question (or sub-question) in two splits or twice,
    a sub-question of a question not in its split, NaN in a float column: each a report line."""
    questions, subquestions = [], []
    for split in splits:
        q = read_all(files.of("questions", split), None, checks["readable"], release, "questions")
        s = read_all(files.of("subquestions", split), ["subq_id", "qid"], checks["readable"], release, "subquestions")
        for column, n in nan_count(q, "questions").items():
            checks["nan"].fail(f"questions/{split}: {n} NaN in {column}", n)
        questions.append(q.append_column("release_split", pa.array([split] * q.num_rows)))
        subquestions.append(s.append_column("release_split", pa.array([split] * s.num_rows)))
    questions, subquestions = pa.concat_tables(questions), pa.concat_tables(subquestions)
    for table, key, name in ((questions, "qid", "questions"), (subquestions, "subq_id", "subquestions")):
        counts = pc.value_counts(table[key])
        repeated = counts.filter(pc.greater(counts.field("counts"), 1))
        for value in repeated.field("values")[:5].to_pylist():
            where = table.filter(pc.equal(table[key], value))["release_split"].to_pylist()
            checks["splits"].fail(f"{name}: {key} {value} appears {len(where)} times ({', '.join(where)})")
        if len(repeated) > 5:
            checks["splits"].fail(f"{name}: {len(repeated) - 5} more repeated {key}s", len(repeated) - 5)
    questions, subquestions = first_occurrences(questions, "qid"), first_occurrences(subquestions, "subq_id")
    wrong_split = pc.not_equal(questions["split"], questions["release_split"])
    for qid in questions.filter(wrong_split)["qid"][:5].to_pylist():
        checks["splits"].fail(f"questions: qid {qid} stored under another split than its `split` column")
    index = TopicIndex(
        questions["qid"], splits, questions["release_split"], subquestions["subq_id"], subquestions["qid"]
    )
    subq_split = index.split_of_subquestions()
    stored = np.array([splits.index(s) for s in subquestions["release_split"].to_pylist()], np.int64)
    bad = np.flatnonzero(subq_split != stored)
    if len(bad):
        checks["orphans"].fail(
            f"subquestions: {len(bad)} belong to no question of their split, e.g. "
            f"{subquestions['subq_id'][int(bad[0])]}",
            len(bad),
        )
    return questions, index


def scan_judgments(
    release: Path,
    splits: list[str],
    files: Readable,
    index: TopicIndex,
    profile: Profile | None,
    checks: dict,
    rederive=None,
    derived=None,
) -> tuple[dict[str, SplitScan], Answers]:
    """The one pass over the judgment files; `rederive` (builder/release/validate/rederive.py) sees every batch, `derived`
    (builder/release/validate/derived.py) its rows of known sub-questions."""
    settings = profile.complexity if profile is not None else Complexity()
    pool = profile.pool if profile is not None else None
    complexity = Answers(
        index.subquestions_of, index.subq_question, settings.answer_level, settings.completeness_threshold
    )
    scans = {}
    subq_split = index.split_of_subquestions()
    for code, split in enumerate(splits):
        scan = scans[split] = SplitScan(
            SplitCount(
                len(index.subq_question),
                int((subq_split == code).sum()),
                pool.bm25_top if pool else None,
                pool.rerank_top if pool else None,
            )
        )
        for path in files.of("judgments", split):
            partition = PARTITIONS.index(path.parent.name)
            name = path.relative_to(release)
            offset = 0
            for table in batches(path, JUDGMENT_COLUMNS, checks["readable"], release):
                if rederive is not None:
                    rederive.add(table, offset)
                offset += table.num_rows
                question = index.question_positions(table["qid"])
                subquestion = index.subquestion_positions(table["subq_id"])
                for values, column in ((question, "qid"), (subquestion, "subq_id")):
                    missing = values == MISSING
                    if missing.any():
                        checks["orphans"].fail(
                            f"{name}: {column} {table[column][int(np.flatnonzero(missing)[0])]} not in its table",
                            int(missing.sum()),
                        )
                known = (question != MISSING) & (subquestion != MISSING)
                other = known & (index.subq_question[np.where(known, subquestion, 0)] != question)
                if other.any():
                    row = int(np.flatnonzero(other)[0])
                    checks["orphans"].fail(
                        f"{name}: subq_id {table['subq_id'][row]} belongs to another question "
                        f"than qid {table['qid'][row]}",
                        int(other.sum()),
                    )
                elsewhere = (question != MISSING) & (
                    index.question_split[np.where(question != MISSING, question, 0)] != code
                )
                if elsewhere.any():
                    checks["splits"].fail(
                        f"{name}: qid {table['qid'][int(np.flatnonzero(elsewhere)[0])]} is a question of another split",
                        int(elsewhere.sum()),
                    )
                level = table["level"]
                if partition == len(PARTITIONS) - 1:
                    wrong = pc.is_valid(level)
                else:
                    wrong = pc.not_equal(level, partition).fill_null(True)
                n_wrong = pc.sum(wrong).as_py() or 0
                if n_wrong:
                    checks["scale"].fail(
                        f"{name}: level {pc.filter(level, wrong)[0]} in partition {path.parent.name}", n_wrong
                    )
                for column, n in nan_count(table, "judgments").items():
                    checks["nan"].fail(f"{name}: {n} NaN in {column}", n)
                document, distinct_documents, document_codes = hashed_codes(table["docid"])
                scan.keys.add(mix(subquestion, document))
                if not known.all():
                    table, question, subquestion, document, document_codes = (
                        table.filter(pa.array(known)),
                        question[known],
                        subquestion[known],
                        document[known],
                        document_codes[known],
                    )
                scan.stats.add(table, question, subquestion, document)
                complexity.add(question, subquestion, document, table["level"])
                if derived is not None:
                    derived.add(code, table, question, subquestion, document, distinct_documents, document_codes)
                graded = pc.is_valid(table["level"]).to_numpy(zero_copy_only=False)
                scan.graded += int(graded.sum())
                scan.graded_print = (
                    scan.graded_print
                    + fingerprint(
                        subquestion[graded], document[graded], table["level"].drop_null().to_numpy(zero_copy_only=False)
                    )
                ) % 2**64
            if rederive is not None:
                rederive.end_file(name)
    return scans, complexity


def scan_qrels(
    release: Path, split: str, files: Readable, index: TopicIndex, code: int, checks: dict
) -> tuple[int, int]:
    rows, printed = 0, 0
    for path in files.of("qrels", split):
        for table in batches(path, None, checks["readable"], release):
            subquestion = index.subquestion_positions(table["query-id"])
            unknown = subquestion == MISSING
            if unknown.any():
                checks["qrels"].fail(
                    f"{path.relative_to(release)}: query-id {table['query-id'][int(np.flatnonzero(unknown)[0])]}"
                    " is no sub-question",
                    int(unknown.sum()),
                )
            split_of = index.split_of_subquestions()[np.where(unknown, 0, subquestion)]
            other = ~unknown & (split_of != code)
            if other.any():
                checks["qrels"].fail(f"{path.relative_to(release)}: query-id of another split", int(other.sum()))
            rows += table.num_rows
            printed = (
                printed
                + fingerprint(
                    subquestion,
                    string_hashes(table["corpus-id"]),
                    table["score"].fill_null(-1).to_numpy(zero_copy_only=False),
                )
            ) % 2**64
    return rows, printed


def find_duplicates(release: Path, split: str, files: Readable, index: TopicIndex, keys: KeyRuns, check) -> None:
    """Pairs whose 64-bit key repeats are re-read as strings and counted exactly (hash collisions pass). The
    keys, 8 bytes a judgment, are sorted in runs on disk past a fixed memory (generation/storage/spill.py)."""
    repeated = keys.repeated()
    if len(repeated) == 0:
        return
    seen: dict[tuple, int] = {}
    for path in files.of("judgments", split):
        for table in batches(path, ["subq_id", "docid"], check, release):
            key = mix(index.subquestion_positions(table["subq_id"]), string_hashes(table["docid"]))
            for row in table.filter(pa.array(np.isin(key, repeated))).to_pylist():
                pair = (row["subq_id"], row["docid"])
                seen[pair] = seen.get(pair, 0) + 1
    for pair, n in seen.items():
        if n > 1:
            check.fail(f"{split}: {pair} appears {n} times", n - 1)


def recomputed_questions(questions: pa.Table, complexity: Answers) -> pa.Table:
    """The stored questions with their complexity columns recomputed from the judgments."""
    return with_complexity(questions.drop_columns(["release_split"]), complexity)


def compare_complexity(stored: pa.Table, recomputed: pa.Table, check) -> None:
    for column in ("answerable", "answerable_share", "completeness", "retrieval_complex"):
        a, b = stored[column], recomputed[column]
        if a.type != b.type:
            continue
        same_null = pc.equal(pc.is_null(a), pc.is_null(b))
        if pa.types.is_floating(a.type):
            close = pc.less_equal(pc.abs(pc.subtract(a, b)), 1e-6).fill_null(True)
        else:
            close = pc.equal(a, b).fill_null(True)
        bad = pc.invert(pc.and_(same_null, close))
        n = pc.sum(bad).as_py() or 0
        if n:
            row = pc.filter(stored["qid"], bad)[0]
            check.fail(f"questions: {column} of qid {row} differs from the judgments' ({n} questions)", n)


def split_summaries(questions: pa.Table, scans: dict[str, SplitScan]) -> dict[str, SplitStats]:
    stats = {}
    for split, scan in scans.items():
        part = questions.filter(pc.equal(questions["split"], split))
        clicked = int(pc.sum(pc.list_value_length(part["clicked"])).as_py() or 0)
        stats[split] = scan.stats.summary(clicked, complexity_summary(part))
    return stats
