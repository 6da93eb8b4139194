"""Judge pairs through a served model: any OpenAI-compatible server (`vllm serve`, SGLang, TGI, a hosted API).

The judge runs with the `openai` backend against the server's base URL: the kit builds each prompt and parses each
answer as it does for a local model; the server only turns prompts into text. `--profile` is the profile the pairs
were made under (the demo's: `demo`); `--judge` takes the judge section from another profile (`paper`: Llama-3.3-70B
and the paper's prompt). The kit tokenizes with the judge model's tokenizer, so its files must be on this machine.
Fetch them, start a server, then run it on the demo's train pairs:

    .venv/bin/hf download meta-llama/Llama-3.3-70B-Instruct --include '*.json'
    vllm serve meta-llama/Llama-3.3-70B-Instruct --port 8000 &
    .venv/bin/python examples/served_judge.py --endpoint http://localhost:8000/v1 --judge paper \
        --out demo-output/served

A server that answers to another name (`vllm serve --served-model-name llama`) needs `--served-model llama`.
It prints the judge, the pairs by status and the level shares. The profile it ran under (its judge section now names
the server) is written beside the judgments: pass it as `--profile` to `build-release`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from builder.cli.script import run
from builder.cli.support import check_folder_arg
from builder.pasteable import profile_argument
from generation.errors import ArgumentError
from generation.profiles.profile import judge_run_profile, load_profile, validated, with_overrides
from generation.stages.judge import JudgeStage


def main() -> None:
    parser = argparse.ArgumentParser(description="Judge pairs through a served model.")
    parser.add_argument("--endpoint", required=True, help="the server's API base URL, e.g. http://gpu-node:8000/v1")
    parser.add_argument("--profile", default="demo", help="the profile the pairs were made under (name or file)")
    parser.add_argument("--judge", default=None, help="take the judge section from this profile (default: --profile's)")
    parser.add_argument("--served-model", default=None, help="the name the server answers to (default: judge.model)")
    parser.add_argument("--concurrency", type=int, default=None, help="requests in flight (default: the profile's)")
    parser.add_argument("--subquestions", type=Path, default=Path("demo-output/questions/train"))
    parser.add_argument("--candidates", type=Path, default=Path("demo-output/candidates/train"))
    parser.add_argument("--index", type=Path, default=Path("demo-output/index"))
    parser.add_argument("--out", type=Path, default=Path("demo-output/served"), help="folder for the judgments")
    args = parser.parse_args()

    check_folder_arg(args.out, "--out")
    profile = load_profile(args.profile)
    if args.judge is not None:
        judge = load_profile(args.judge)
        data = {**profile.model_dump(), "name": f"{profile.name}-{judge.name}-judge", "judge": judge.judge.model_dump()}
        profile = validated(data, f"{args.profile} with the judge of {args.judge}")
    try:
        profile, _ = judge_run_profile(profile, "openai", args.endpoint, args.concurrency)
    except ValueError as e:  # the server settings the profile's judge section refuses
        raise ArgumentError(f"--endpoint/--concurrency: {e}") from None
    if args.served_model is not None:
        profile = with_overrides(
            profile, [f"judge.openai.served_model={json.dumps(args.served_model)}"], "--served-model"
        )
    print(f"judging through {args.endpoint} ({profile.judge.model}) -> {args.out}", file=sys.stderr)
    summary = JudgeStage(profile, args.out, args.subquestions, args.candidates, args.index).run()
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
    run(main)
