"""`validate`: every promise of a release folder, checked against its own data. Each failed check is
named with a count and examples; a release passes only when every check does."""
from __future__ import annotations

import json
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import yaml
from pydantic import ValidationError

from builder.release.no_text import text_files
from builder.release.expectations import load_expectations
from builder.release.card import PLOT, STATS_BEGIN, STATS_END, published_configs, stats_markdown
from builder.release.imported import CHECK as IMPORT_CHECK, check_import
from builder.release.layout import CONFIGS, FILE_NAME, LEVELS, SPLITS, TREC_QRELS_SUFFIX, data_files, file_rows
from builder.release.trec import compare_trec_qrels
from builder.release.package import MANIFEST
from builder.release.configs import binary_threshold
from builder.release.rederive import Rederivation
from builder.release.validate_card import check_figures, check_plot, check_prompt
from builder.release.validate_derived import DerivedPrints, check_derived
from builder.release.validate_training import check_training
from builder.release.validate_data import (compare_complexity, data_rows, find_duplicates, open_files, recomputed_questions,
                                   scan_judgments, scan_qrels, scan_topics, split_summaries)
from generation.profiles import Profile
from generation.schema import features
from generation.shards import sha256_file

DEFAULT_UNPARSED_MAX = 0.01
DEFAULT_TOLERANCE = 0.02


@dataclass
class Check:
    name: str
    failures: int = 0
    examples: list = field(default_factory=list)
    note: str = ""

    def fail(self, example, count: int = 1) -> None:
        self.failures += count
        if len(self.examples) < 5:
            self.examples.append(example)

    @property
    def ok(self) -> bool:
        return self.failures == 0


@dataclass
class Report:
    release: Path
    checks: list[Check] = field(default_factory=list)
    stats: dict = field(default_factory=dict)  # what the data gives: split -> statistics (as the manifest states them)
    rows: dict = field(default_factory=dict)  # config -> split -> rows

    def check(self, name: str) -> Check:
        self.checks.append(Check(name))
        return self.checks[-1]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def read_card(release: Path) -> tuple[dict | None, str, str | None]:
    try:
        text = (release / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, "", f"README.md: cannot read ({e})"
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return None, text, "README.md has no YAML front matter between --- lines"
    head, body = text[4:].split("\n---\n", 1)
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as e:
        return None, body, f"README.md YAML does not parse: {str(e).splitlines()[0]}"
    return (data if isinstance(data, dict) else None), body, None if isinstance(data, dict) else "YAML is not a mapping"


def validate(release: Path, expect: Path | None = None, against: Path | None = None, load: bool = True) -> Report:
    release = Path(release)
    report = Report(release)
    check_links(release, report.check("no file or folder of the release is a link that leads out of it"))
    manifest_check = report.check("manifest.json lists every file with its checksum and row count")
    manifest, problem = read_manifest(release)
    if problem:
        manifest_check.fail(problem)
        return report
    profile = manifest_profile(manifest, report.check("manifest.json's profile parses and matches its hash"))
    splits = manifest["splits"]
    _check_files(release, manifest, manifest_check, report)
    checks = {key: report.check(name) for key, name in CHECKS.items()}
    files = open_files(release, splits, checks["readable"], checks["schema"])
    questions, index = scan_topics(release, splits, files, checks)
    prints = DerivedPrints(splits, index, binary_threshold(profile))
    scans, complexity = scan_judgments(release, splits, files, index, profile, checks,
                                       Rederivation(manifest, profile, report), prints)
    for code, split in enumerate(splits):
        find_duplicates(release, split, files, index, scans[split].keys, checks["unique"])
        rows, printed = scan_qrels(release, split, files, index, code, checks)
        if (rows, printed) != (scans[split].graded, scans[split].graded_print):
            checks["qrels"].fail(f"qrels/{split}: {rows:,} rows that are not the {scans[split].graded:,} graded "
                                 "judgments (subq_id, docid, level) of the split")
        compare_trec_qrels(release, split, index, (rows, printed), checks["trec"])
    check_derived(release, splits, files, index, questions, scans, prints, report)
    check_training(release, manifest, profile, splits, files, report)
    recomputed = recomputed_questions(questions, complexity)
    compare_complexity(questions, recomputed, checks["complexity"])
    stats = split_summaries(recomputed, scans)
    rows = data_rows(files, splits)
    report.stats, report.rows = stats, rows
    _check_manifest_numbers(release, manifest, profile, rows, stats, report)
    _check_card(release, manifest, rows, stats, splits, report, load)
    check_import(release, manifest, stats, [p for s in splits for p in files.of("judgments", s)],
                 read_card(release)[1], report.check(IMPORT_CHECK))
    _check_shares(stats, manifest, expect, against, report)
    root_scripts = report.check("no loading script at the root (datasets refuses them)")
    for path in release.glob("*.py"):
        root_scripts.fail(path.name)
    texts = report.check("no document text in the release folder (ClueWeb22's licence forbids redistributing it)")
    for name in text_files(release):
        texts.fail(f"{name}: document text (from `researchy-subq texts` or `training-files`?); move it out of the release")
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


def check_links(release: Path, check: Check) -> None:
    """A link out of the release would be read by validate and uploaded by publish as if it were the release's own
    file (a card or manifest elsewhere, a user's file); links are not followed into folders."""
    root = release.resolve()
    for folder, folders, files in os.walk(release):
        for name in folders + files:
            path = Path(folder) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                check.fail(f"{path.relative_to(release)}: a link to {os.readlink(path)}, outside the release")


def read_manifest(release: Path) -> tuple[dict | None, str | None]:
    try:
        manifest = json.loads((release / MANIFEST).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"{MANIFEST}: {e}"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("splits"), list) \
            or not set(manifest["splits"]) <= set(SPLITS) or not isinstance(manifest.get("files"), dict):
        return None, f"{MANIFEST}: needs `splits` (a list from {SPLITS}) and `files`"
    return manifest, None


def manifest_profile(manifest: dict, check: Check) -> Profile | None:
    try:
        profile = Profile.model_validate(manifest.get("profile"))
    except ValidationError as e:
        check.fail(f"{MANIFEST} profile: {str(e).splitlines()[0]}")
        return None
    if profile.config_hash() != manifest.get("profile_hash"):
        check.fail(f"{MANIFEST}: profile_hash {manifest.get('profile_hash')} is not its profile's ({profile.config_hash()})")
    return profile


def _check_files(release: Path, manifest: dict, check: Check, report: Report) -> None:
    listed = manifest.get("files", {})
    on_disk = {str(p.relative_to(release)) for p in data_files(release)}
    for name in sorted(set(listed) - on_disk):
        check.fail(f"{name}: listed but missing")
    for name in sorted(on_disk - set(listed)):
        check.fail(f"{name}: present but not listed")
    for name in sorted(set(listed) & on_disk):
        path = release / name
        if not path.is_file() or path.is_symlink():
            continue  # reported by the readable-files check
        entry = listed[name] if isinstance(listed[name], dict) else {}
        if sha256_file(path) != entry.get("sha256"):
            check.fail(f"{name}: sha256 differs from the manifest")
        elif entry.get("bytes") != path.stat().st_size:
            check.fail(f"{name}: {path.stat().st_size} bytes, {entry.get('bytes')} in the manifest")
    layout = report.check("data/ holds only the layout's folders (level partitions 0-5, unparsed) and splits")
    folders = {f for c in CONFIGS for f in c.folders}
    for path in sorted((release / "data").rglob("*")) if (release / "data").is_dir() else []:
        relative = str(path.relative_to(release / "data"))
        if path.is_dir() and relative not in folders and not any(f.startswith(relative + "/") for f in folders):
            layout.fail(f"data/{relative}/: not a folder of the layout (its files belong to no config)")
    names = report.check("shard names XXXXX-of-YYYYY are complete in every folder")
    groups: dict[tuple, list] = {}
    for name in on_disk | set(listed):
        if name.endswith(TREC_QRELS_SUFFIX):
            split = Path(name).name.removesuffix(TREC_QRELS_SUFFIX)
            if Path(name).parent != Path("data/qrels") or split not in manifest["splits"]:
                layout.fail(f"{name}: a TREC qrels file is data/qrels/SPLIT{TREC_QRELS_SUFFIX} for a split of the "
                            f"manifest's {manifest['splits']}")
            continue
        match = FILE_NAME.match(Path(name).name)
        if not match:
            names.fail(f"{name}: not named split-XXXXX-of-YYYYY.parquet")
            continue
        if match["split"] not in manifest["splits"]:
            layout.fail(f"{name}: split {match['split']!r} is not one of the manifest's {manifest['splits']}")
        groups.setdefault((str(Path(name).parent), match["split"], int(match["count"])), []).append(int(match["index"]))
    for (folder, split, count), indexes in groups.items():
        present = {i for i in indexes if (release / folder / f"{split}-{i:05d}-of-{count:05d}.parquet").exists()}
        for i in sorted(set(range(count)) - present):
            names.fail(f"{folder}/{split}-{i:05d}-of-{count:05d}.parquet: missing")


def _check_manifest_numbers(release: Path, manifest: dict, profile: Profile | None, rows: dict, stats: dict,
                            report: Report) -> None:
    check = report.check("manifest.json's row counts, statistics and model names equal the data and profile")
    for c in CONFIGS:
        for split, n in rows[c.name].items():
            stated = manifest.get("rows", {}).get(c.name, {}).get(split, 0)
            if stated != n:
                check.fail(f"rows {c.name}/{split}: {stated} in the manifest, {n} in the data")
    for name, entry in manifest.get("files", {}).items():
        path = release / name
        if isinstance(entry, dict) and path.is_file() and not path.is_symlink():
            try:
                n = file_rows(path)
            except Exception:  # noqa: BLE001 - unreadable files are reported by the readable-files check
                continue
            if entry.get("rows") != n:
                check.fail(f"{name}: {entry.get('rows')} rows in the manifest, {n} in the file")
    if manifest.get("stats") != stats:
        stated = manifest.get("stats") or {}
        differing = [f"{split}.{key}" for split in stats for key in stats[split]
                     if stated.get(split, {}).get(key) != stats[split][key]]
        check.fail(f"stats differ from the data: {differing or 'splits'}")
    models = manifest.get("models") or {}
    if profile is not None and not manifest.get("imported") and not str(models.get("reranker", "")).startswith(
            profile.rerank.model):  # an import names no reranker: the kit made no pool
        check.fail(f"models.reranker {models.get('reranker')!r} is not the profile's {profile.rerank.model!r}")


def _check_card(release: Path, manifest: dict, rows: dict, stats: dict, splits: list[str], report: Report,
                load: bool) -> None:
    yaml_check = report.check("README.md YAML parses and declares every config with exact num_examples and its own files")
    data, body, problem = read_card(release)
    if problem:
        yaml_check.fail(problem)
    if data is not None:
        declared = {i.get("config_name"): {s.get("name"): s.get("num_examples") for s in i.get("splits", []) or []}
                    for i in data.get("dataset_info", []) or [] if isinstance(i, dict)}
        for c in published_configs(rows, splits):
            for split, n in rows[c.name].items():
                if n and declared.get(c.name, {}).get(split) != n:
                    yaml_check.fail(f"{c.name}/{split}: num_examples {declared.get(c.name, {}).get(split)} in the card, "
                                    f"{n} in the data")
        known = {c.name: c for c in CONFIGS}
        for entry in data.get("configs", []) or []:
            name = entry.get("config_name") if isinstance(entry, dict) else None
            if name not in known:
                yaml_check.fail(f"configs: {name!r} is not a config of the layout")
                continue
            for files in entry.get("data_files", []) or []:
                wanted = known[name].pattern(files.get("split", "")) if isinstance(files, dict) else None
                if not isinstance(files, dict) or files.get("path") != wanted:
                    yaml_check.fail(f"configs: {name} points at {files.get('path') if isinstance(files, dict) else files!r}, "
                                    f"its files are {wanted!r}")
    numbers = report.check("every number in the card's statistics equals the data")
    section = body[body.find(STATS_BEGIN): body.find(STATS_END) + len(STATS_END)] if STATS_BEGIN in body else ""
    expected = stats_markdown(stats)
    if section != expected:
        for line_card, line_data in zip(section.splitlines() or [""], expected.splitlines()):
            if line_card != line_data:
                numbers.fail(f"card says {line_card!r}, data gives {line_data!r}")
        if len(section.splitlines()) != len(expected.splitlines()):
            numbers.fail(f"statistics section has {len(section.splitlines())} lines, expected {len(expected.splitlines())}")
    names = report.check("the card names the manifest's models, profile and profile hash")
    models = manifest.get("models") or {}
    profile = manifest.get("profile") or {}
    for what, value in (("judge", models.get("judge")), ("reranker", models.get("reranker")),
                        ("profile", f"Profile `{profile.get('name')}`"), ("profile hash", manifest.get("profile_hash")),
                        *((("judge precision", models["judge_precision"]),) if "judge_precision" in models else ())):
        if (not value or str(value) not in body) and not (what == "reranker" and manifest.get("imported")):
            names.fail(f"the card does not state the manifest's {what} {value!r}")
    check_prompt(body, manifest, report.check("the card's verbatim judge prompt is the kit's, with the manifest's sha256"))
    check_figures(release, rows, splits, body, data, report.check(
        "the card's configs table, download sizes and byte counts equal the data"))
    check_plot(release, stats, report.check(f"{PLOT} draws the data's level counts"))
    loads = report.check("load_dataset(RELEASE, config) loads every config and split with the schema's Features")
    if not load or data is None:
        loads.note = "skipped" if not load else "no YAML"
        return
    with datasets_log() as logged:
        _load_every_config(release, rows, splits, loads, logged)


@contextmanager
def datasets_log() -> Iterator[list[logging.LogRecord]]:
    """The records `datasets` logs (WARNING and up) while the load checks run, kept instead of printed: a reader
    error it logs before raising (`Failed to read file ... ArrowInvalid`) is the failure the check reports, and
    printed it came before validate's own report. validate's lines are its report's, untouched."""
    logger = logging.getLogger("datasets")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [Keep(logging.WARNING)], False
    try:
        yield records
    finally:
        logger.handlers, logger.propagate = handlers, propagate


def _load_every_config(release: Path, rows: dict, splits: list[str], loads: Check,
                       logged: list[logging.LogRecord]) -> None:
    from datasets import get_dataset_config_names, load_dataset

    try:
        names = get_dataset_config_names(str(release))
    except Exception as e:  # noqa: BLE001 - any loader failure is the finding
        loads.fail(f"config names: {type(e).__name__}: {e}")
        return
    for c in published_configs(rows, splits):
        if c.name not in names:
            loads.fail(f"{c.name}: not a config of the folder")
            continue
        before = len(logged)
        try:
            dataset = load_dataset(str(release), c.name, streaming=True)
            for split, stream in dataset.items():
                next(iter(stream))
                if stream.features != features(c.table):
                    loads.fail(f"{c.name}/{split}: features {stream.features} differ from the schema module's")
        except Exception as e:  # noqa: BLE001
            loads.fail(f"{c.name}: {type(e).__name__}: {first_line(e)[:200] or '(no message)'}")
            continue  # what datasets logged on the way is this failure
        for record in logged[before:]:
            message = f"{c.name}: datasets logged {record.levelname}: {first_line(record.getMessage())[:200]}"
            if record.levelno >= logging.ERROR:
                loads.fail(message)
            elif not loads.note:
                loads.note = message


def first_line(text) -> str:
    """The first line of an error's text; "" for an empty one (datasets raises some without a message)."""
    return (str(text).splitlines() or [""])[0]


def previous_shares(release: Path, check: Check) -> dict:
    """split -> level -> share stated by a previous release's manifest; what it lacks is a report line."""
    try:
        stated = json.loads((release / MANIFEST).read_text()).get("stats")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
        check.fail(f"--against {release}: {MANIFEST} is not readable ({e})")
        return {}
    if not isinstance(stated, dict):
        check.fail(f"--against {release}: {MANIFEST} states no statistics")
        return {}
    return {split: s["level_share"] for split, s in stated.items()
            if isinstance(s, dict) and isinstance(s.get("level_share"), dict)}


def _check_shares(stats: dict, manifest: dict, expect: Path | None, against: Path | None, report: Report) -> None:
    bounds = load_expectations(expect)  # strict: raises ExpectationError on a misspelt key
    unparsed = report.check("unparsed ('Other') share under its bound")
    limit = float(bounds.get("unparsed_max", DEFAULT_UNPARSED_MAX))
    for split, s in stats.items():
        share = s["level_share"]["unparsed"]
        if share > limit:
            unparsed.fail(f"{split}: {share:.4%} > {limit:.4%}")
    shares = report.check("per-level shares within the expected bounds or the previous release")
    tolerance = float(bounds.get("tolerance", DEFAULT_TOLERANCE))
    reference = {}
    if against:
        previous = previous_shares(Path(against), shares)
        reference = {split: {lv: (v - tolerance, v + tolerance) for lv, v in s.items()} for split, s in previous.items()}
        for split in sorted(set(stats) - set(previous)) if not bounds.get("levels") else ():
            shares.fail(f"{split}: --against {against} has no {split} split (or no level shares for it): nothing to "
                        "compare this split's shares with; give --expect bounds for it")
    too_small = [f"{split} ({s['judgments']:,} judgments)" for split, s in stats.items()
                 if s["judgments"] < bounds.get("min_judgments", 0)]
    for split, s in stats.items():
        if s["judgments"] < bounds.get("min_judgments", 0):
            continue
        wanted = dict(bounds.get("levels") or {}) or reference.get(split, {})
        for level, (low, high) in wanted.items():
            share = s["level_share"].get(str(level), 0.0)
            if not low <= share <= high:
                shares.fail(f"{split}: level {level} share {share:.2%} outside [{low:.2%}, {high:.2%}]")
    if not bounds.get("levels") and not against:
        shares.note = "no bounds given (--expect or --against)"
    elif too_small:
        shares.note = f"not held to the bounds, under min_judgments {bounds['min_judgments']:,}: {', '.join(too_small)}"
