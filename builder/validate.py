"""`validate`: every promise of a release folder, checked against its own data. Each failed check is
named with a count and examples; a release passes only when every check does."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from builder.complexity import summary as complexity_summary
from builder.expectations import load_expectations
from builder.card import STATS_BEGIN, STATS_END, published_configs, stats_markdown
from builder.layout import CONFIGS, FILE_NAME, LEVELS, config
from builder.package import MANIFEST
from builder.stats import SplitStats
from generation.schema import arrow_schema, features

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

    def check(self, name: str) -> Check:
        self.checks.append(Check(name))
        return self.checks[-1]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def read_card(release: Path) -> tuple[dict | None, str, str | None]:
    text = (release / "README.md").read_text(encoding="utf-8")
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return None, text, "README.md has no YAML front matter between --- lines"
    head, body = text[4:].split("\n---\n", 1)
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as e:
        return None, body, f"README.md YAML does not parse: {str(e).splitlines()[0]}"
    return (data if isinstance(data, dict) else None), body, None if isinstance(data, dict) else "YAML is not a mapping"


def pair_hashes(table: pa.Table) -> np.ndarray:
    """64-bit hashes of (subq_id, docid); equal pairs hash equally, collisions are re-checked exactly."""
    subq = pd.util.hash_array(table["subq_id"].to_numpy(zero_copy_only=False))
    doc = pd.util.hash_array(table["docid"].to_numpy(zero_copy_only=False))
    return subq * np.uint64(1_000_003) ^ doc


def judgment_files(release: Path, split: str) -> list[Path]:
    return config("judgments").files(release, split)


def validate(release: Path, expect: Path | None = None, against: Path | None = None, load: bool = True) -> Report:
    release = Path(release)
    report = Report(release)
    manifest_check = report.check("manifest.json lists every file with its checksum and row count")
    try:
        manifest = json.loads((release / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as e:
        manifest_check.fail(f"{MANIFEST}: {e}")
        return report
    _check_files(release, manifest, manifest_check, report)
    splits = manifest["splits"]
    _check_schemas(release, splits, report)
    stats = _check_rows(release, manifest, splits, report)
    _check_card(release, manifest, stats, splits, report, load)
    _check_shares(stats, manifest, expect, against, report)
    root_scripts = report.check("no loading script at the root (datasets refuses them)")
    for path in release.glob("*.py"):
        root_scripts.fail(path.name)
    return report


def _check_files(release: Path, manifest: dict, check: Check, report: Report) -> None:
    from generation.shards import sha256_file

    listed = manifest.get("files", {})
    on_disk = {str(p.relative_to(release)) for p in (release / "data").rglob("*.parquet")}
    for name in sorted(set(listed) - on_disk):
        check.fail(f"{name}: listed but missing")
    for name in sorted(on_disk - set(listed)):
        check.fail(f"{name}: present but not listed")
    for name in sorted(set(listed) & on_disk):
        if sha256_file(release / name) != listed[name]["sha256"]:
            check.fail(f"{name}: sha256 differs from the manifest")
    names = report.check("shard names XXXXX-of-YYYYY are complete in every folder")
    groups: dict[tuple, list] = {}
    for name in on_disk | set(listed):
        match = FILE_NAME.match(Path(name).name)
        if not match:
            names.fail(f"{name}: not named split-XXXXX-of-YYYYY.parquet")
            continue
        groups.setdefault((str(Path(name).parent), match["split"], int(match["count"])), []).append(int(match["index"]))
    for (folder, split, count), indexes in groups.items():
        present = {i for i in indexes if (release / folder / f"{split}-{i:05d}-of-{count:05d}.parquet").exists()}
        for i in sorted(set(range(count)) - present):
            names.fail(f"{folder}/{split}-{i:05d}-of-{count:05d}.parquet: missing")


def _check_schemas(release: Path, splits: list[str], report: Report) -> None:
    check = report.check("every file has its table's Arrow schema (and so its datasets Features)")
    for c in CONFIGS:
        expected = arrow_schema(c.table).remove_metadata()
        for split in splits:
            for path in c.files(release, split):
                found = pq.read_schema(path).remove_metadata()
                if not found.equals(expected):
                    diff = [f"{f.name}: {f.type}" for f in found if f.name not in expected.names
                            or expected.field(f.name).type != f.type]
                    check.fail(f"{path.relative_to(release)}: {diff or found.names}")


def _check_rows(release: Path, manifest: dict, splits: list[str], report: Report) -> dict:
    unique = report.check("(subq_id, docid) pairs are unique")
    orphans = report.check("every judgment's subq_id and qid exist in subquestions and questions")
    scale = report.check(f"levels are on the scale {LEVELS[0]}-{LEVELS[-1]} and in their own partition")
    pool = manifest.get("profile", {}).get("pool", {})
    stats = {}
    for split in splits:
        subqs = pa.concat_tables([pq.read_table(p, columns=["subq_id", "qid"]) for p in config("subquestions").files(release, split)])
        qs = pa.concat_tables([pq.read_table(p, columns=["qid", "clicked"]) for p in config("questions").files(release, split)])
        acc = SplitStats(subquestions=subqs.num_rows, clicked_total=sum(len(c) for c in qs["clicked"].to_pylist()))
        hashes = []
        for path in judgment_files(release, split):
            partition = path.parent.name
            for batch in pq.ParquetFile(path).iter_batches(batch_size=262_144):
                table = pa.Table.from_batches([batch])
                acc.add(table, pool.get("bm25_top"), pool.get("rerank_top"))
                hashes.append(pair_hashes(table))
                for column, known in (("subq_id", subqs["subq_id"]), ("qid", qs["qid"])):
                    missing = pc.invert(pc.is_in(table[column], value_set=known))
                    if pc.any(missing).as_py():
                        bad = pc.filter(table[column], missing)
                        orphans.fail(f"{split}: {column} {bad[0]} not in its table", len(bad))
                levels = table["level"]
                wrong = pc.invert(pc.equal(pc.cast(pc.is_null(levels), pa.int8()), pa.scalar(1 if partition == "unparsed" else 0, pa.int8())))
                if partition != "unparsed":
                    wrong = pc.or_(wrong, pc.not_equal(levels, int(partition.removeprefix("level_"))).fill_null(True))
                if pc.any(wrong).as_py():
                    values = pc.filter(levels, wrong)
                    scale.fail(f"{path.relative_to(release)}: level {values[0]} in partition {partition}", len(values))
        _find_duplicates(release, split, np.concatenate(hashes) if hashes else np.array([], np.uint64), unique)
        stats[split] = acc.summary()
        stats[split]["complexity"] = complexity_summary(pa.concat_tables(
            [pq.read_table(p) for p in config("questions").files(release, split)]))
    return stats


def _find_duplicates(release: Path, split: str, hashes: np.ndarray, check: Check) -> None:
    ordered = np.sort(hashes)
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    if len(repeated) == 0:
        return
    seen: dict[tuple, int] = {}
    for path in judgment_files(release, split):
        table = pq.read_table(path, columns=["subq_id", "docid"])
        keep = np.isin(pair_hashes(table), repeated)
        for pair in zip(*(table.filter(pa.array(keep))[c].to_pylist() for c in ("subq_id", "docid"))):
            seen[pair] = seen.get(pair, 0) + 1
    for pair, n in seen.items():
        if n > 1:
            check.fail(f"{split}: {pair} appears {n} times", n - 1)


def _check_card(release: Path, manifest: dict, stats: dict, splits: list[str], report: Report, load: bool) -> None:
    yaml_check = report.check("README.md YAML parses and declares every config with exact num_examples")
    data, body, problem = read_card(release)
    if problem:
        yaml_check.fail(problem)
    rows = {c.name: {s: sum(pq.ParquetFile(p).metadata.num_rows for p in c.files(release, s)) for s in splits}
            for c in CONFIGS}
    if data is not None:
        declared = {i.get("config_name"): {s["name"]: s["num_examples"] for s in i.get("splits", [])}
                    for i in data.get("dataset_info", []) or []}
        for c in published_configs(rows, splits):
            for split, n in rows[c.name].items():
                if n and declared.get(c.name, {}).get(split) != n:
                    yaml_check.fail(f"{c.name}/{split}: num_examples {declared.get(c.name, {}).get(split)} in the card, "
                                    f"{n} in the data")
    numbers = report.check("every number in the card's statistics equals the data")
    section = body[body.find(STATS_BEGIN): body.find(STATS_END) + len(STATS_END)] if STATS_BEGIN in body else ""
    expected = stats_markdown(stats)
    if section != expected:
        for line_card, line_data in zip(section.splitlines() or [""], expected.splitlines()):
            if line_card != line_data:
                numbers.fail(f"card says {line_card!r}, data gives {line_data!r}")
        if len(section.splitlines()) != len(expected.splitlines()):
            numbers.fail(f"statistics section has {len(section.splitlines())} lines, expected {len(expected.splitlines())}")
    if manifest.get("stats") != stats:
        numbers.fail("manifest.json stats differ from the data")
    loads = report.check("load_dataset(RELEASE, config) loads every config and split with the schema's Features")
    if not load or data is None:
        loads.note = "skipped" if not load else "no YAML"
        return
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
        try:
            dataset = load_dataset(str(release), c.name, streaming=True)
            for split, stream in dataset.items():
                next(iter(stream))
                if stream.features != features(c.table):
                    loads.fail(f"{c.name}/{split}: features {stream.features} differ from the schema module's")
        except Exception as e:  # noqa: BLE001
            loads.fail(f"{c.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")


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
        previous = json.loads((Path(against) / MANIFEST).read_text())["stats"]
        reference = {split: {lv: (v - tolerance, v + tolerance) for lv, v in s["level_share"].items()}
                     for split, s in previous.items()}
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
