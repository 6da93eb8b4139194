"""The pilot's sample: whole questions drawn, then pairs within them, written once as `sample.parquet`.

How it is drawn (`SAMPLE_RULE`, also in the file and the pilot record):
1. The population is every question with at least one pair: its sub-questions x its pool's candidates, the pairs
   `judge` would grade. Its question ids are sorted, so the draw does not depend on file order.
2. `questions` of them are drawn uniformly without replacement: `random.Random(seed).sample`.
3. Each drawn question gets an equal share of `pairs`, capped at the pairs it has; what a small question leaves is
   shared equally among the larger ones (questions taken from the smallest up).
4. Within a question its share is drawn uniformly without replacement from its pairs, with
   `random.Random(f"{seed}:{qid}")`, so one question's pairs do not depend on which others were drawn. The pairs are
   numbered sub-question by sub-question (file order), candidates in pool order within each: one numbering for both
   settings, whatever order each judges them in (a document-first prompt judges them by document).

The file holds the pairs (qid, subq_id, docid), and the definition (the rule, the seed, what was asked and what was
taken, the population, and the sha256 of the inputs it was drawn from) as JSON in its Parquet metadata. It is
written atomically once; a resumed or parallel run reads it and refuses it when asked for another sample.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from generation.corpus.topics import question_files
from generation.errors import ArgumentError
from generation.notices import warn
from generation.storage.atomic_files import replace_file
from generation.storage.schema import arrow_schema
from generation.storage.shards import DONE_DIR, Completion, ShardError, sha256_file

SAMPLE = "pilot_sample"  # the table (generation/storage/schema.py) and the file's stem
SAMPLE_FILE = f"{SAMPLE}.parquet"
METADATA_KEY = b"pilot_sample"
SAMPLE_RULE = (
    "whole questions drawn uniformly without replacement from the questions with pairs (ids sorted; "
    "random.Random(seed).sample); each an equal share of the pairs, capped at its own, what a small question "
    "leaves shared among the rest; within a question, its share drawn uniformly without replacement from its pairs "
    "numbered by sub-question then candidate (random.Random(f'{seed}:{qid}'))"
)


@dataclass(frozen=True)
class SampleRequest:
    pairs: int = 2000
    questions: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("pairs", "questions"):
            if getattr(self, name) < 1:
                raise ArgumentError(f"--{name} {getattr(self, name)}: must be >= 1")
        if self.seed < 0:  # numpy's bootstrap generator takes no negative seed
            raise ArgumentError(f"--seed {self.seed}: must be >= 0")


@dataclass(frozen=True)
class Population:
    """Per question, in sorted id order: its sub-question ids (file order) and its candidates' docids (pool order)."""

    subquestions: dict[str, list[str]]
    candidates: dict[str, list[str]]
    inputs: dict

    @property
    def sizes(self) -> dict[str, int]:
        return {q: len(s) * len(self.candidates.get(q, [])) for q, s in sorted(self.subquestions.items())}


def read_population(subquestions: Path, candidate_files: list[Path], candidates: Path) -> Population:
    """The questions with pairs, read as `judge` reads them (generation/stages/judge.py `pairs_of`), without texts."""
    _, subq_path = question_files(subquestions)
    subqs = pq.read_table(subq_path, columns=["subq_id", "qid"])
    pool = ds.dataset(candidate_files, format="parquet").to_table(columns=["qid", "docid"])
    by_question: dict[str, list[str]] = {}
    for subq_id, qid in zip(subqs["subq_id"].to_pylist(), subqs["qid"].to_pylist()):
        by_question.setdefault(qid, []).append(subq_id)
    pools: dict[str, list[str]] = {}
    for qid, docid in zip(pool["qid"].to_pylist(), pool["docid"].to_pylist()):
        pools.setdefault(qid, []).append(docid)
    with_pairs = {q: s for q, s in by_question.items() if pools.get(q)}
    records = [Completion.read(Path(candidates) / DONE_DIR / f"{p.stem}.json") for p in candidate_files]
    inputs = {
        "subquestions_sha256": sha256_file(subq_path),
        "candidates_sha256": sorted(r.sha256 for r in records),
    }
    return Population(dict(sorted(with_pairs.items())), {q: pools[q] for q in with_pairs}, inputs)


def quotas(sizes: list[int], total: int) -> list[int]:
    """An equal share of `total` for each size, capped at it; what a small one leaves goes to the larger ones."""
    out, remaining = [0] * len(sizes), total
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i], i))
    for taken, i in enumerate(order):
        share = -(-remaining // (len(sizes) - taken))
        out[i] = min(sizes[i], share)
        remaining -= out[i]
    return out


def draw(population: Population, request: SampleRequest) -> tuple[pa.Table, dict]:
    """The sample's pairs (qid, subq_id, docid) and its definition, by `SAMPLE_RULE`."""
    sizes = population.sizes
    if not sizes:
        raise ArgumentError("no question has a pair to judge (sub-questions x candidates): nothing to sample")
    qids = list(sizes)
    drawn = sorted(random.Random(request.seed).sample(qids, min(request.questions, len(qids))))
    available = sum(sizes[q] for q in drawn)
    shares = dict(zip(drawn, quotas([sizes[q] for q in drawn], min(request.pairs, available))))
    rows: dict[str, list[str]] = {"qid": [], "subq_id": [], "docid": []}
    for qid in drawn:
        subqs, docs = population.subquestions[qid], population.candidates[qid]
        for index in sorted(random.Random(f"{request.seed}:{qid}").sample(range(sizes[qid]), shares[qid])):
            rows["qid"].append(qid)
            rows["subq_id"].append(subqs[index // len(docs)])
            rows["docid"].append(docs[index % len(docs)])
    taken = len(rows["qid"])
    definition = {
        "rule": SAMPLE_RULE,
        "seed": request.seed,
        "asked": {"questions": request.questions, "pairs": request.pairs},
        "taken": {
            "questions": len(drawn),
            "pairs": taken,
            "pairs_per_question": {"min": min(shares.values()), "max": max(shares.values())},
        },
        "population": {"questions": len(qids), "pairs": sum(sizes.values())},
        "inputs": population.inputs,
    }
    return pa.table(rows, schema=arrow_schema(SAMPLE)), definition


def shortfalls(definition: dict) -> list[str]:
    """What the sample could not give as asked, one line each (empty when it gave what was asked)."""
    asked, taken, population = definition["asked"], definition["taken"], definition["population"]
    lines = []
    if asked["questions"] > population["questions"]:
        lines.append(
            f"--questions {asked['questions']:,}: only {population['questions']:,} questions have pairs; all are taken"
        )
    if taken["pairs"] < asked["pairs"]:
        whole = "all the pairs" if taken["pairs"] == population["pairs"] else "all their pairs"
        lines.append(
            f"--pairs {asked['pairs']:,}: the {taken['questions']:,} questions drawn hold {taken['pairs']:,} pairs; "
            f"{whole} are taken"
        )
    return lines


def write_sample(folder: Path, table: pa.Table, definition: dict) -> Path:
    """`folder/pilot_sample.parquet`, atomically, its definition in the file's metadata."""
    metadata = {**(table.schema.metadata or {}), METADATA_KEY: json.dumps(definition, sort_keys=True).encode()}
    folder.mkdir(parents=True, exist_ok=True)
    return replace_file(folder, SAMPLE_FILE, lambda tmp: pq.write_table(table.replace_schema_metadata(metadata), tmp))


def read_sample(path: Path) -> tuple[pa.Table, dict]:
    """The sample's pairs and definition; a ShardError naming the file when it is not a pilot sample."""
    try:
        table = pq.read_table(path)
        definition = json.loads(table.schema.metadata[METADATA_KEY])
    except (OSError, KeyError, TypeError, ValueError, pa.ArrowException) as e:
        raise ShardError(
            f"{path}: not a pilot sample ({str(e).splitlines()[0][:100]}); remove it to draw the sample again"
        ) from None
    return table, definition


def sample_for(folder: Path, population: Population, request: SampleRequest) -> tuple[pa.Table, dict, Path]:
    """The pilot's sample in `folder`: drawn and written when absent, else read and checked to be the one asked for
    (the same request over the same inputs). Shortfalls are said on stderr either way."""
    path = Path(folder) / SAMPLE_FILE
    if path.exists():
        table, definition = read_sample(path)
        asked = {"seed": request.seed, "questions": request.questions, "pairs": request.pairs}
        found = {"seed": definition.get("seed"), **(definition.get("asked") or {})}
        if found != asked or definition.get("inputs") != population.inputs:
            what = "another request" if found != asked else "other inputs (sub-questions or candidates changed)"
            raise ShardError(
                f"{path}: a sample drawn for {what} ({found}); this run asks {asked}. Use another --out, or remove "
                "the folder to start the pilot again"
            )
    else:
        table, definition = draw(population, request)
        write_sample(folder, table, definition)
    for line in shortfalls(definition):
        warn(f"pilot: {line}")
    return table, definition, path
