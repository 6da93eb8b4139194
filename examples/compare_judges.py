"""Compare two judge settings on one sample of pairs before paying for the change (the pilot).

Setting A is the reference, B the candidate: each a bundled profile name or a profile file, with keys set on top
(`--b-set judge.cut_points=[...]`). Both judge the same question-stratified sample; the pilot measures their
agreement, prices both at the paper's scale and states a verdict. Run it on the demo's stage outputs (the demo's
stand-in judge, B with other cut points):

    .venv/bin/python examples/compare_judges.py --a demo --b demo \
        --b-set 'judge.cut_points=[0.30, 0.42, 0.55, 0.62, 0.75]' --out demo-output/pilot-example

(A demo run that found the real Qwen3 reranker on the machine wrote its profile to demo-output/profiles/: pass that
file as --a and --b.)

It prints the sample, the agreement measures and the verdict; the pilot record goes to OUT/pilot.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.cli.script import run
from builder.cli.support import check_folder_arg
from builder.pilot.options import PilotOptions
from builder.pilot.run import run_pilot


def main() -> None:
    parser = argparse.ArgumentParser(description="Compare two judge settings on one sample of pairs.")
    parser.add_argument("--a", default="demo", help="setting A: a profile name or file")
    parser.add_argument("--a-set", action="append", default=[], help="a key of A's profile, SECTION.KEY=VALUE")
    parser.add_argument("--b", default="demo", help="setting B: a profile name or file")
    parser.add_argument("--b-set", action="append", default=[], help="a key of B's profile, SECTION.KEY=VALUE")
    parser.add_argument("--subquestions", type=Path, default=Path("demo-output/questions/train"))
    parser.add_argument("--candidates", type=Path, default=Path("demo-output/candidates/train"))
    parser.add_argument("--index", type=Path, default=Path("demo-output/index"))
    parser.add_argument("--out", type=Path, default=Path("demo-output/pilot-example"))
    parser.add_argument("--pairs", type=int, default=200, help="pairs in the sample")
    parser.add_argument("--questions", type=int, default=10, help="questions drawn whole")
    parser.add_argument("--resamples", type=int, default=200, help="bootstrap resamples of the intervals")
    args = parser.parse_args()

    check_folder_arg(args.out, "--out")
    options = PilotOptions(**vars(args))  # one field per option of `researchy-subq pilot`
    a, b = " ".join([options.a, *options.a_set]), " ".join([options.b, *options.b_set])
    print(f"judging the sample under A ({a}), then B ({b})", file=sys.stderr)
    _, record = run_pilot(options)
    assert record is not None  # one process judged every shard, so the record is written

    taken = record.sample.taken
    print(f"sample: {taken.pairs:,} pairs of {taken.questions:,} questions")
    print("differences: " + ("; ".join(record.differences) or "none"))
    for name, value in record.agreement.measures.items():
        print(f"{name}: {value:.3f}" if isinstance(value, float) else f"{name}: {value}")
    print(record.verdict.line)
    print(f"pilot record -> {args.out / 'pilot.json'}", file=sys.stderr)


if __name__ == "__main__":
    run(main)
