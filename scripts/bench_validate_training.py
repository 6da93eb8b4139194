"""What `validate`'s own re-derivation of the training configs costs (builder/release/validate/training_reference.py):
synthesize judgments with the paper's Table 1 level mix at each scale (24,316,320 judgments at scale 1), build the
release, then time the training check alone (`check_training`: the dev split, `hard-negatives`, `graded-lists`,
`questions.retrieved_unjudged`, `manifest.training`) in a fresh process, and print CPU seconds, wall seconds, peak
memory (VmHWM) and judgments a CPU second.

Usage: python scripts/bench_validate_training.py [--scales 0.02,0.1] [--runs-depth 0] [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bench_common import timed

from builder.standins.synthetic import PAPER_JUDGMENTS, PAPER_SUBQUESTIONS, synthesize

BUILD = """
from builder.release.assemble.folder import ReleaseOptions, build_release
build_release(ReleaseOptions(judgments=[Path({judgments!r})], questions=[Path(p) for p in {questions!r}],
                out=Path({out!r}), profile="paper", repo="org/researchy-subq-judgments", runs={runs!r} and [Path(p) for p in {runs!r}]))
"""
CHECK = """
from builder.release.contract import read_manifest
from builder.release.validate.folder import Report
from builder.release.validate.reading import open_files
from builder.release.validate.training_configs import check_training
release = Path({out!r})
manifest = read_manifest(release)
report = Report(release)
files = open_files(release, list(manifest.splits), report.check("readable"), report.check("schema"))
start = time.perf_counter()
check_training(release, manifest, manifest.profile, list(manifest.splits), files, report)
bad = [(c.name, c.examples[:2]) for c in report.checks if not c.ok]
if bad:
    raise SystemExit(f"checks failed: {{bad}}")
"""


def run_scale(work: Path, scale: float, runs_depth: int) -> tuple[int, tuple[float, float, float]]:
    inputs = synthesize(
        work / "inputs",
        subquestions=int(PAPER_SUBQUESTIONS * scale),
        judgments=int(PAPER_JUDGMENTS * scale),
        shards=4,
        seed=0,
        runs_depth=runs_depth,
    )
    questions = [str(p) for p in inputs["questions"].values()]
    runs = [str(inputs["runs"])] if runs_depth else []
    out = str(work / "release")
    timed(BUILD.format(judgments=str(inputs["judgments"]), questions=questions, out=out, runs=runs))
    return inputs["judgments_total"], timed(CHECK.format(out=out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="0.02,0.1", help="fractions of the paper's size, comma-separated")
    parser.add_argument("--runs-depth", type=int, default=0, help="also synthesize runs this deep (build --runs)")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    root = args.work or Path(tempfile.mkdtemp(prefix="bench-validate-training-"))
    print("| scale | judgments | CPU s | wall s | peak MB | judgments / CPU s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    try:
        for scale in (float(s) for s in args.scales.split(",")):
            judgments, (wall, cpu, peak) = run_scale(root / f"scale-{scale}", scale, args.runs_depth)
            print(f"| {scale} | {judgments:,} | {cpu:.1f} | {wall:.1f} | {peak:.0f} | {judgments / cpu:,.0f} |")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
