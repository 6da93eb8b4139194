"""Import the authors' labels, build a release of them and validate it.

Labels made elsewhere (the authors' ratings, graded qrels, OpenAI Batch results) become ordinary judgment shards
whose completion records name the files they came from. A release built from them validates as a judged one. Run
it on the demo's train questions with a ratings file of the authors' format (one `{"id", "docid", "rating": [...]}`
line per question and document):

    .venv/bin/python examples/import_labels.py ratings.jsonl --subquestions demo-output/questions/train \
        --out demo-output/imported

It prints the import's counts, then every validate check (ok, skipped with its reason, or FAIL with its first
example) and the count of each; the exit status is 1 if one fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.cli.script import run
from builder.cli.support import check_folder_arg
from builder.release.assemble.folder import ReleaseOptions, build_release
from builder.release.validate.expectations import ExpectationError, load_expectations
from builder.release.validate.folder import validate
from generation.errors import ArgumentError
from generation.labels.formats import LabelFormat
from generation.profiles.profile import load_profile
from generation.stages.import_labels import ImportLabelsStage


def main() -> None:
    parser = argparse.ArgumentParser(description="Import labels, build a release of them and validate it.")
    parser.add_argument("files", nargs="+", type=Path, help="label files (.gz too)")
    parser.add_argument("--format", default="crux-ratings", choices=[f.value for f in LabelFormat])
    parser.add_argument("--profile", default="crux-code", help="the profile the release states (its scale, parser)")
    parser.add_argument("--judge", default="Llama-3.3-70B-Instruct (the authors' ratings)", help="who made them")
    parser.add_argument("--subquestions", type=Path, default=Path("demo-output/questions/train"))
    parser.add_argument("--corpus", type=Path, default=None, help="map URL-hashes to ClueWeb22-IDs with this corpus")
    parser.add_argument(
        "--out", type=Path, default=Path("demo-output/imported"), help="judgments/ and release/ go here"
    )
    parser.add_argument("--expect", type=Path, default=None, help="validate's YAML bounds (e.g. unparsed_max)")
    args = parser.parse_args()

    check_folder_arg(args.out, "--out")
    try:
        load_expectations(args.expect)  # before the import: a misspelt key is an error, not a bound switched off
    except ExpectationError as e:
        raise ArgumentError(str(e)) from None
    profile = load_profile(args.profile)
    judgments, release = args.out / "judgments", args.out / "release"
    print(f"importing {len(args.files)} file(s) -> {judgments}", file=sys.stderr)
    summary = ImportLabelsStage(
        profile, judgments, args.subquestions, args.files, args.format, args.judge, corpus=args.corpus
    ).run()
    print(f"imported: {summary.rows:,} judgments from {summary.lines:,} lines; statuses: "
          + ", ".join(f"{s} {n:,}" for s, n in sorted(summary.statuses.items())))  # fmt: skip

    print(f"building the release -> {release}", file=sys.stderr)
    build_release(ReleaseOptions(judgments=[judgments], questions=[args.subquestions], out=release, profile=profile))
    print(f"validating {release} (every config loaded with datasets)", file=sys.stderr)
    report = validate(release, args.expect)
    for check in report.checks:
        detail = check.examples[0] if check.failures else check.skipped
        print(f"{check.status:<7}  {check.name}" + (f": {detail}" if detail else ""))
    print(report.summary())
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    run(main)
