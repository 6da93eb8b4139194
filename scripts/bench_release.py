"""Release benchmark at growing scale: synthesize judgments with the paper's Table 1 level mix (1,288,976
sub-questions and 24,316,320 judgments at scale 1), then, each in its own process, time

- the floor: a plain streaming pyarrow pass that reads the input shards in 262k-row batches and writes one
  zstd writer per level partition (what any release build must at least do),
- `build-release` (build_release: data, statistics, complexity, card, manifest, training configs),
- `build-release` without the training configs (`hard-negatives`, `graded-lists`: their writer replaced by one that
  does nothing), so what they cost shows as the ratio of the two builds,
- the training configs alone (builder/release/assemble/training_configs.py): the same streaming pass with only their rows fed,
- `validate` (every check, with the load_dataset checks streaming one row per config and split),

and print CPU seconds (user + system), wall seconds and peak memory (VmHWM) of each, with the ratios the
goals are stated in (build <= 1.5x the floor's CPU, validate <= 1.5x build's, peak <= 1 GB, the training configs
within ~1.3x of the build without them) and the machine's load while it ran; then the hard-negatives coverage of
each scale (positives with a row, negatives by source). With `--runs-depth N` the synthetic questions also get
BM25 and reranker runs of N documents (their pool first, then documents no pool holds), given to the build as
`--runs`, so the `retrieved_unjudged` source is used.

Usage: python scripts/bench_release.py [--scales 0.125,0.25,0.5,1] [--subquestions 0.25] [--runs-depth 100]
       [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench_common import timed
from rich.console import Console
from rich.table import Table

from builder.standins.synthetic import PAPER_JUDGMENTS, PAPER_SUBQUESTIONS, synthesize

FLOOR = """
import pyarrow.compute as pc, pyarrow.parquet as pq
from generation.storage.schema import arrow_schema
schema = arrow_schema("judgments")
out = Path({out!r}); out.mkdir(parents=True, exist_ok=True)
writers = {{}}
for path in sorted(Path({judgments!r}).glob("judgments-*.parquet")):
    for batch in pq.ParquetFile(path).iter_batches(batch_size=262_144):
        level = batch.column("level")
        for name, mask in [(f"level_{{n}}", pc.equal(level, n)) for n in range(6)] + [("unparsed", pc.is_null(level))]:
            part = batch.filter(mask)
            if part.num_rows:
                if name not in writers:
                    writers[name] = pq.ParquetWriter(out / f"{{name}}.parquet", schema, compression="zstd")
                writers[name].write_batch(part)
for writer in writers.values():
    writer.close()
"""
BUILD = """
{stub}
from builder.release.assemble.folder import ReleaseOptions, build_release
build_release(ReleaseOptions(judgments=[Path({judgments!r})], questions=[Path(p) for p in {questions!r}],
                out=Path({out!r}), profile="paper", repo="org/researchy-subq-judgments", runs={runs!r} and [Path(p) for p in {runs!r}]))
"""
WITHOUT_TRAINING = """
import builder.release.assemble.data_files as data_files
from builder.release.assemble.training_configs import TrainingCounts

class NoTrainingConfigs:
    def __init__(self, *args, **kwargs):
        pass

    def add(self, rows, subquestion):
        pass

    def close(self, summary):
        return TrainingCounts()

    def retrieved_column(self, questions):
        return None

data_files.TrainingWriters = NoTrainingConfigs
"""
TRAINING = """
from builder.release.assemble.data_files import ReleaseSummary, judgment_inputs, load_questions, present, route, topic_index
from builder.release.assemble.training_configs import TrainingWriters, with_dev_split
from generation.profiles.profile import load_profile
profile = load_profile("paper")
questions, subquestions = load_questions([Path(p) for p in {questions!r}])
questions = with_dev_split(questions, profile.training)
splits = present(questions)
index = topic_index(questions, subquestions, splits)
writers = TrainingWriters(Path({out!r}), subquestions, index.split_of_subquestions(), splits, profile, 5_000_000,
                          runs={runs!r} and [Path(p) for p in {runs!r}])
for _, routed in route(judgment_inputs([Path({judgments!r})]), index):
    writers.add(routed.batch.table, routed.batch.subquestion)
summary = ReleaseSummary()
writers.close(summary)
print("ROWS", sum(summary.rows["hard-negatives"].values()), sum(summary.rows["graded-lists"].values()))
"""
VALIDATE = """
from builder.release.validate.folder import validate
report = validate(Path({out!r}))
bad = [(c.name, c.examples) for c in report.checks if not c.ok]
if bad:
    raise SystemExit(f"checks failed: {{bad}}")
"""


def parquet_write_cost(release: Path, scratch: Path) -> dict[str, tuple[float, int]]:
    """Rewrites the release's judgment files with plain zstd and with the release writer (content-defined
    chunking + page index): seconds and bytes of each, what the CDC option costs."""
    import pyarrow.parquet as pq

    from builder.release.layout import open_parquet_writer
    from generation.storage.atomic_files import COMPRESSION

    files = sorted((release / "data" / "judgments").rglob("*.parquet"))
    writers = {
        "plain zstd": lambda path, schema: pq.ParquetWriter(path, schema, compression=COMPRESSION),
        "CDC + page index": open_parquet_writer,
    }
    scratch.mkdir(parents=True, exist_ok=True)
    cost = {}
    for name, open_writer in writers.items():
        seconds, size = 0.0, 0
        for i, path in enumerate(files):
            source = pq.ParquetFile(path)
            target = scratch / f"{i}.parquet"
            start = time.perf_counter()
            with open_writer(target, source.schema_arrow) as writer:
                for batch in source.iter_batches(batch_size=262_144):
                    writer.write_batch(batch)
            seconds += time.perf_counter() - start
            size += target.stat().st_size
            target.unlink()
        cost[name] = (seconds, size)
    return cost


def run_scale(work: Path, scale: float, subquestions: float | None = None, runs_depth: int = 0) -> dict:
    inputs = synthesize(
        work / "inputs",
        subquestions=int(PAPER_SUBQUESTIONS * (subquestions or scale)),
        judgments=int(PAPER_JUDGMENTS * scale),
        shards=8,
        seed=0,
        runs_depth=runs_depth,
    )
    questions = [str(p) for p in inputs["questions"].values()]
    runs = [str(inputs["runs"])] if runs_depth else []
    judgments = str(inputs["judgments"])
    out = work / "release"
    floor = timed(FLOOR.format(judgments=judgments, out=str(work / "floor")))
    build = timed(BUILD.format(stub="", judgments=judgments, questions=questions, out=str(out), runs=runs))
    without = timed(
        BUILD.format(
            stub=WITHOUT_TRAINING, judgments=judgments, questions=questions, out=str(work / "without"), runs=runs
        )
    )
    shutil.rmtree(work / "without", ignore_errors=True)
    training = timed(TRAINING.format(judgments=judgments, questions=questions, out=str(work / "training"), runs=runs))
    check = timed(VALIDATE.format(out=str(out)))
    from builder.release.contract import read_manifest

    manifest = read_manifest(out)
    return {
        "scale": scale,
        "judgments": inputs["judgments_total"],
        "subquestions": inputs["subquestions"],
        "floor": floor,
        "build": build,
        "without": without,
        "validate": check,
        "release": out,
        "training": training,
        "training_rows": tuple(sum(manifest.rows[c].values()) for c in ("hard-negatives", "graded-lists")),
        "coverage": manifest.training.model_dump(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="0.125,0.25,0.5,1", help="fractions of the paper's size, comma-separated")
    parser.add_argument(
        "--subquestions",
        type=float,
        default=None,
        help="hold the sub-questions at this fraction of the paper's while the judgments follow --scales "
        "(more candidates per question): memory against the judgments alone",
    )
    parser.add_argument(
        "--runs-depth", type=int, default=0, help="also synthesize BM25 and reranker runs this deep, built with --runs"
    )
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--writer-cost",
        action="store_true",
        help="also rewrite the largest scale's judgment files with plain zstd and with the release writer",
    )
    args = parser.parse_args()
    root = args.work or Path(tempfile.mkdtemp(prefix="bench-release-"))
    load_before, started = os.getloadavg(), time.perf_counter()
    rows = []
    for scale in (float(s) for s in args.scales.split(",")):
        work = root / f"scale-{scale:g}"
        rows.append(run_scale(work, scale, args.subquestions, args.runs_depth))
        if args.writer_cost and scale == max(float(x) for x in args.scales.split(",")):
            rows[-1]["writer_cost"] = parquet_write_cost(rows[-1]["release"], work / "rewrite")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    table = Table(
        title=f"release build and validate, {os.cpu_count()} cores; load average (1/5/15 min) "
        f"{'/'.join(f'{x:.1f}' for x in load_before)} before, "
        f"{'/'.join(f'{x:.1f}' for x in load_after)} after ({time.perf_counter() - started:.0f} s)"
    )
    for column in (
        "scale",
        "judgments",
        "sub-questions",
        "floor CPU s",
        "build CPU s",
        "build / floor",
        "build without training configs CPU s",
        "build / without",
        "validate CPU s",
        "validate / build",
        "peak MB floor / build / validate",
        "wall s floor / build / validate",
        "rows hard-negatives / graded-lists",
        "training alone CPU s / peak MB",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        floor, build, check = r["floor"], r["build"], r["validate"]
        table.add_row(
            f"{r['scale']:g}",
            f"{r['judgments']:,}",
            f"{r['subquestions']:,}",
            f"{floor[1]:.1f}",
            f"{build[1]:.1f}",
            f"{build[1] / floor[1]:.2f}",
            f"{r['without'][1]:.1f}",
            f"{build[1] / r['without'][1]:.2f}",
            f"{check[1]:.1f}",
            f"{check[1] / build[1]:.2f}",
            f"{floor[2]:,.0f} / {build[2]:,.0f} / {check[2]:,.0f}",
            f"{floor[0]:.1f} / {build[0]:.1f} / {check[0]:.1f}",
            " / ".join(f"{n:,}" for n in r["training_rows"]),
            f"{r['training'][1]:.1f} / {r['training'][2]:,.0f}",
        )
    Console(width=200).print(table)
    coverage = Table(title="hard-negatives: positives with a row, negatives by source (manifest.training)")
    for column in ("scale", "runs", "positives", "with a row", "judged", "retrieved_unjudged", "other_question"):
        coverage.add_column(column, justify="right")
    for r in rows:
        c = r["coverage"]
        negatives = sum(c["negatives_by_source"].values()) or 1
        kept = c["positives"] - c["short_positives"]
        coverage.add_row(
            f"{r['scale']:g}",
            f"{args.runs_depth or 'none'}",
            f"{c['positives']:,}",
            f"{kept:,} ({kept / max(c['positives'], 1):.2%})",
            *(
                f"{n:,} ({n / negatives:.1%})"
                for n in (c["negatives_by_source"][s] for s in ("judged", "retrieved_unjudged", "other_question"))
            ),
        )
    Console(width=200).print(coverage)
    for r in rows:
        if "writer_cost" in r:
            files = Table(title=f"writing the judgment files of scale {r['scale']:g} again (read time included)")
            for column in ("writer", "wall time", "bytes"):
                files.add_column(column, justify="right")
            for name, (seconds, size) in r["writer_cost"].items():
                files.add_row(name, f"{seconds:.1f} s", f"{size:,}")
            Console(width=200).print(files)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
