"""The bad inputs of scripts/hostile.py for the commands over judgments and releases: plan, simulate, evaluate,
agreement, validate, publish, demo and build-release (the pipeline stages' are in hostile_inputs.py)."""

from __future__ import annotations

from pathlib import Path

from hostile_files import shared_files


def release_cases(w: Path, env: dict) -> list[tuple[str, str, list]]:
    """(label, expected, argv) as hostile_inputs.cases gives them, for the analysis and release commands."""
    q, idx, cands, release = (env[k] for k in ("questions", "index", "candidates", "release"))
    small = env["small_profile"]
    a_file, foreign = shared_files(w)
    run = w / "run.trec"
    run.write_text("".join(f"{qid} Q0 {doc} {r} {10 - r} t\n" for r, (qid, doc) in enumerate(env["run_pairs"], 1)))
    dup_run = w / "dup.trec"
    dup_run.write_text("q Q0 d1 1 2.0 t\nq Q0 d1 2 1.0 t\n")
    stranger_run = w / "stranger.trec"
    stranger_run.write_text("no-such-question Q0 d1 1 2.0 t\n")
    short_run = w / "short.trec"
    short_run.write_text("q Q0 d1 1\n")
    typo = w / "typo.yaml"
    typo.write_text("levles:\n  5: [0.0, 1.0]\n")
    inverted = w / "inverted.yaml"
    inverted.write_text("levels:\n  5: [0.5, 0.1]\n")
    qrels = w / "other.qrels"
    qrels.write_text("nobody 0 nothing 3\n")
    return [
        (
            "plan: --utilisation 0",
            "error",
            [
                "plan",
                "--profile",
                small,
                "--subquestions",
                q,
                "--candidates",
                cands,
                "--index",
                idx,
                "--utilisation",
                "0",
            ],
        ),
        ("simulate: --budgets abc", "error", ["simulate", release, "--budgets", "abc"]),
        ("simulate: budget 1.5", "error", ["simulate", release, "--budgets", "0.5,1.5"]),
        ("simulate: --repeats 0", "error", ["simulate", release, "--repeats", "0"]),
        ("simulate: release missing", "error", ["simulate", w / "nope"]),
        ("evaluate: alpha-ndcg@0", "error", ["evaluate", release, "--run", run, "--metrics", "alpha-ndcg@0"]),
        ("evaluate: alpha 1.5", "error", ["evaluate", release, "--run", run, "--metrics", "alpha-ndcg@10:1.5"]),
        ("evaluate: duplicate docids in a run", "error", ["evaluate", release, "--run", dup_run]),
        ("evaluate: a run over zero questions", "error", ["evaluate", release, "--run", stranger_run]),
        ("evaluate: a malformed run line", "error", ["evaluate", release, "--run", short_run]),
        ("agreement: --against missing", "error", ["agreement", "--judgments", release, "--against", w / "nope"]),
        ("agreement: zero shared pairs", "error", ["agreement", "--judgments", release, "--against", qrels]),
        (
            "agreement: bad scale mapping",
            "error",
            ["agreement", "--judgments", release, "--against", release, "--map-a", "0:x"],
        ),
        ("validate: release missing", "error", ["validate", w / "nope"]),
        ("validate: --expect with a misspelt key", "error", ["validate", release, "--expect", typo, "--no-load"]),
        ("validate: --expect with low > high", "error", ["validate", release, "--expect", inverted, "--no-load"]),
        ("publish: invalid repo id", "error", ["publish", release, "--repo", "not a repo"]),
        ("publish: release missing", "error", ["publish", w / "nope", "--repo", "org/name"]),
        ("demo: --out is someone else's folder", "error", ["demo", "--out", foreign]),
        (
            "build-release: --out is someone else's folder",
            "error",
            ["build-release", "--judgments", env["judgments"], "--questions", q, "--out", foreign, "--profile", "demo"],
        ),
        (
            "build-release: --out is a file",
            "error",
            ["build-release", "--judgments", env["judgments"], "--questions", q, "--out", a_file, "--profile", "demo"],
        ),
    ]
