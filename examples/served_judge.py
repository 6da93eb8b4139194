"""Judge pairs through a served model: any OpenAI-compatible server (`vllm serve`, SGLang, TGI, a hosted API).

The profile's judge runs with the `openai` backend against the server's base URL: the kit builds each prompt and
parses each answer as it does for a local model; the server only turns prompts into text. Start a server, then
run it on the demo's train pairs with a profile whose judge model the server serves:

    vllm serve meta-llama/Llama-3.3-70B-Instruct --port 8000 &
    .venv/bin/python examples/served_judge.py --endpoint http://localhost:8000/v1 --profile paper \
        --out demo-output/served

It prints the judge, the pairs by status and the level shares. The profile it ran under (its judge section now names the server)
is written beside the judgments: pass it as `--profile` to `build-release`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.pasteable import profile_argument
from generation.profiles import judge_run_profile, load_profile
from generation.stages.judge import run_judge


def main() -> None:
    parser = argparse.ArgumentParser(description="Judge pairs through a served model.")
    parser.add_argument("--endpoint", required=True, help="the server's API base URL, e.g. http://gpu-node:8000/v1")
    parser.add_argument("--profile", default="paper", help="a bundled profile name or a profile file")
    parser.add_argument("--concurrency", type=int, default=None, help="requests in flight (default: the profile's)")
    parser.add_argument("--subquestions", type=Path, default=Path("demo-output/questions/train"))
    parser.add_argument("--candidates", type=Path, default=Path("demo-output/candidates/train"))
    parser.add_argument("--index", type=Path, default=Path("demo-output/index"))
    parser.add_argument("--out", type=Path, default=Path("demo-output/served"), help="folder for the judgments")
    args = parser.parse_args()

    profile, _ = judge_run_profile(load_profile(args.profile), "openai", args.endpoint, args.concurrency)
    print(f"judging through {args.endpoint} ({profile.judge.model}) -> {args.out}", file=sys.stderr)
    summary = run_judge(profile, args.subquestions, args.candidates, args.index, args.out)
    print(f"profile for build-release: {profile_argument(profile, args.out)}", file=sys.stderr)

    if summary.skipped:
        print(f"{args.out}: already judged and recorded done; nothing sent", file=sys.stderr)
    print(f"judge: {summary.judge}")
    print(
        f"pairs: {summary.pairs:,}; statuses: " + ", ".join(f"{s} {n:,}" for s, n in sorted(summary.statuses.items()))
    )
    graded = sum(summary.levels.values())
    for level, count in sorted(summary.levels.items()):
        print(f"level {level}: {count:,} ({count / graded:.1%})")


if __name__ == "__main__":
    main()
