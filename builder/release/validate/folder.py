"""`validate`: every promise of a release folder, checked against its own data. Each failed check is
named with a count and examples; a release passes only when every check does.

This module is the command's driver (the checks in their report order) and the data checks' names. The checks,
beside it in builder/release/validate/: manifest.py (the folder against manifest.json), reading.py (reading the
data files), rows.py (the pass over their rows), trec.py (the TREC qrels files), derived.py and training_configs.py
(the derived configs), card.py (the card), card_statements.py and training_statements.py (what the card says of an
order, a scope, a kind and a method), load.py (load_dataset), imported.py (imported labels), pilot.py (one
prompt, and the pilot record) and shares.py (the level shares).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from builder.release.contract import SplitStats
from builder.release.layout import LEVELS, TREC_QRELS_SUFFIX, binary_threshold
from builder.release.no_text import text_files
from builder.release.validate.card import check_card, read_card
from builder.release.validate.card_statements import CARD_STATEMENTS, check_card_statements
from builder.release.validate.derived import DerivedPrints, check_derived
from builder.release.validate.imported import CHECK as IMPORT_CHECK
from builder.release.validate.imported import check_import
from builder.release.validate.load import check_loads
from builder.release.validate.manifest import (
    SCHEMA,
    check_files,
    check_links,
    check_manifest_numbers,
    check_schema,
    manifest_profile,
    read_manifest,
)
from builder.release.validate.pilot import ONE_PROMPT, PILOT, check_one_prompt, check_pilot
from builder.release.validate.reading import data_rows, open_files
from builder.release.validate.rederive import Rederivation
from builder.release.validate.rows import (
    compare_complexity,
    find_duplicates,
    recomputed_questions,
    scan_judgments,
    scan_qrels,
    scan_topics,
    split_summaries,
)
from builder.release.validate.shares import check_shares
from builder.release.validate.training_configs import check_training
from builder.release.validate.training_statements import TRAINING_STATEMENTS, check_training_statements
from builder.release.validate.trec import compare_trec_qrels
from generation.stages import stage_hash


@dataclass
class Check:
    """One promise of the release. It failed (failures > 0), was skipped (`skipped` says why it did not run: no
    bounds given, `--no-load`, nothing of its kind in the release), or passed; `note` is what a reader should know
    about a check that ran."""

    name: str
    failures: int = 0
    examples: list = field(default_factory=list)
    note: str = ""
    skipped: str = ""

    def fail(self, example, count: int = 1) -> None:
        self.failures += count
        if len(self.examples) < 5:
            self.examples.append(example)

    def skip(self, reason: str) -> None:
        self.skipped = reason

    @property
    def ok(self) -> bool:
        """Nothing failed: the check passed or was skipped."""
        return self.failures == 0

    @property
    def status(self) -> str:
        return "FAIL" if self.failures else "skipped" if self.skipped else "ok"


@dataclass
class Report:
    release: Path
    checks: list[Check] = field(default_factory=list)
    stats: dict[str, SplitStats] = field(default_factory=dict)  # what the data gives, as the manifest states it
    rows: dict = field(default_factory=dict)  # config -> split -> rows

    def check(self, name: str) -> Check:
        self.checks.append(Check(name))
        return self.checks[-1]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.checks)

    def summary(self) -> str:
        """The closing line: failed, passed and skipped checks counted apart ("P of N checks passed, S skipped")."""
        total, passed, skipped, failed = len(self.checks), self.count("ok"), self.count("skipped"), self.count("FAIL")
        if failed:
            return f"{failed} of {total} checks failed ({passed} passed, {skipped} skipped)"
        return f"all {total} checks passed" if not skipped else f"{passed} of {total} checks passed, {skipped} skipped"


def validate(release: Path, expect: Path | None = None, against: Path | None = None, load: bool = True) -> Report:
    release = Path(release)
    report = Report(release)
    check_links(release, report.check("no file or folder of the release is a link that leads out of it"))
    manifest_check = report.check("manifest.json lists every file with its checksum and row count")
    manifest, problem = read_manifest(release)
    if manifest is None:
        manifest_check.fail(problem)
        return report
    profile = manifest_profile(manifest, report.check("manifest.json's profile parses and matches its hash"))
    check_schema(release, report.check(SCHEMA))
    splits = manifest.splits
    check_files(release, manifest, manifest_check, report)
    checks = {key: report.check(name) for key, name in CHECKS.items()}
    files = open_files(release, splits, checks["readable"], checks["schema"])
    # first, while little else is held: the re-derivation's sorted runs and merge are validate's largest memory
    check_training(release, manifest, profile, splits, files, report)
    questions, index = scan_topics(release, splits, files, checks)
    prints = DerivedPrints(splits, index, binary_threshold(profile))
    scans, complexity = scan_judgments(
        release,
        splits,
        files,
        index,
        profile,
        checks,
        Rederivation(manifest.prompt, bool(manifest.imported), profile, report),
        prints,
    )
    for code, split in enumerate(splits):
        find_duplicates(release, split, files, index, scans[split].keys, checks["unique"])
        qrels_rows, printed = scan_qrels(release, split, files, index, code, checks)
        if (qrels_rows, printed) != (scans[split].graded, scans[split].graded_print):
            checks["qrels"].fail(
                f"qrels/{split}: {qrels_rows:,} rows that are not the {scans[split].graded:,} graded "
                "judgments (subq_id, docid, level) of the split"
            )
        compare_trec_qrels(release, split, index, (qrels_rows, printed), checks["trec"])
    check_derived(release, splits, files, index, questions, scans, prints, report)
    recomputed = recomputed_questions(questions, complexity)
    compare_complexity(questions, recomputed, checks["complexity"])
    stats = split_summaries(recomputed, scans)
    rows = data_rows(files, splits)
    report.stats, report.rows = stats, rows
    check_manifest_numbers(release, manifest, profile, rows, stats, report)
    del questions, index, prints, scans, complexity, recomputed  # the data's pass is done: the card's checks need none
    card = check_card(release, manifest, rows, stats, splits, report)
    check_loads(
        release,
        rows,
        splits,
        card,
        load,
        report.check("load_dataset(RELEASE, config) loads every config and split with the schema's Features"),
    )
    body = read_card(release)[1]
    check_import(
        release,
        manifest,
        stats,
        [p for s in splits for p in files.of("judgments", s)],
        body,
        report.check(IMPORT_CHECK),
    )
    check_training_statements(release, body, report.check(TRAINING_STATEMENTS))
    check_card_statements(body, manifest, rows, splits, report.check(CARD_STATEMENTS))
    check_one_prompt(manifest, profile, report.check(ONE_PROMPT))
    check_pilot(body, manifest, stage_hash(profile, "judgments") if profile else None, report.check(PILOT))
    check_shares(stats, expect, against, report, manifest)
    root_scripts = report.check("no loading script at the root (datasets refuses them)")
    for path in release.glob("*.py"):
        root_scripts.fail(path.name)
    texts = report.check("no document text in the release folder (ClueWeb22's licence forbids redistributing it)")
    for name in text_files(release):
        texts.fail(
            f"{name}: document text (from `researchy-subq texts` or `training-files`?); move it out of the release"
        )
    return report


CHECKS = {
    "readable": "every data file is a regular file that reads as Parquet",
    "schema": "every file has its table's Arrow schema (and so its datasets Features)",
    "splits": "every question and sub-question is in exactly one split, and its judgments too",
    "orphans": "every judgment's subq_id and qid exist in subquestions and questions, and belong together",
    "unique": "(subq_id, docid) pairs are unique",
    "scale": f"levels are on the scale {LEVELS[0]}-{LEVELS[-1]} and in their own partition",
    "nan": "no NaN in a float column",
    "qrels": "qrels are exactly the graded judgments of their split, and every query-id is a sub-question",
    "trec": f"each split's TREC qrels file (data/qrels/SPLIT{TREC_QRELS_SUFFIX}) holds exactly its qrels config's rows",
    "complexity": "the questions' complexity columns equal what the judgments give",
}
