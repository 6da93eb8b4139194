"""The served judge's faults for scripts/hostile.py: a poison pair, a Retry-After of an hour,
SIGKILLs while the failed pairs are retried, and batch result lines of no pair of the shard. The server is the
kit's loopback stand-in (builder/standins/openai_server.py) running in this process; the judge runs as real processes
(`python -m builder.cli.main judge ... --endpoint`), so a kill is a real SIGKILL."""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from hostile_processes import ENV, judge_command, kill_loop, leftovers

from builder.standins.models import save_digit_llama
from builder.standins.openai_server import Fault, StandIn, answered, fingerprint, run_batch_on, served_judge_profile

PROBE = "Is this a probe request?"  # generation/backends/openai_server.py PROBE_QUESTION


def served_profile(w: Path, env: dict, **server) -> Path:
    """The small profile (its bm25/rerank/pool sections, so its candidates stay valid) with the paper's judge on a
    tiny chat Llama served as `standin-judge`."""
    model = w / "served" / "chat-llama"
    if not model.exists():
        save_digit_llama(model)
    data = served_judge_profile(yaml.safe_load(Path(env["small_profile"]).read_text()), model, **server)
    path = w / "served" / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(command: list[str]) -> tuple[int, str]:
    done = subprocess.run(command, env=ENV, capture_output=True, text=True)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def rows(out: Path) -> list[dict]:
    return sorted(
        pq.read_table(next(out.glob("judgments-*.parquet"))).to_pylist(), key=lambda r: (r["subq_id"], r["docid"])
    )


def failed_pairs(out: Path) -> int:
    return json.loads(next((out / "_done").glob("judgments-*.json")).read_text())["extra"]["failed_pairs"]


def served_judge(w: Path, env: dict) -> list[tuple[str, bool, str]]:
    """(case, handled, what the kit said) for each fault of a served judge."""
    root = w / "served"
    root.mkdir(parents=True, exist_ok=True)
    profile = served_profile(w, env)
    server = StandIn()
    results = []
    try:
        endpoint = ["--endpoint", server.endpoint]
        code, said = run(judge_command(env, profile, root / "reference", *endpoint))
        reference = rows(root / "reference") if code == 0 else None

        on = [True]  # the first pair's connection drops on every attempt while on[0]
        target: list[int] = []  # the first pair's fingerprint

        def poisoned(body):
            if PROBE in json.dumps(body):
                return False
            target.append(fingerprint(body)) if not target else None
            return on[0] and fingerprint(body) == target[0]

        server.fail(poisoned, *[Fault(drop=True)] * 10_000)
        code, said = run(judge_command(env, profile, root / "poison", *endpoint))
        first = code == 0 and failed_pairs(root / "poison") == 1 and "failed (RequestFailed" in said
        on[0] = False
        code, again = run(judge_command(env, profile, root / "poison", *endpoint))
        ok = first and code == 0 and rows(root / "poison") == reference and failed_pairs(root / "poison") == 0
        results.append(
            (
                "a poison pair (its connection always drops): the shard finishes, the pair is retried on the next run",
                ok,
                said[said.find("warning: judge") :][:220],
            )
        )

        server.fail(lambda body: True, *[Fault(429, headers=(("Retry-After", "3600"),))] * 3)
        capped = served_profile(w, env, max_retry_after_s=1)
        started = time.monotonic()
        code, said = run(judge_command(env, capped, root / "retry-after", *endpoint))
        ok = code == 0 and time.monotonic() - started < 300 and said.count("asked to wait 3600 s") == 1
        results.append(("Retry-After: 3600 (a proxy's 429)", ok, said[said.find("warning:") :][:220]))

        sick = [True]
        server.fail(
            lambda body: sick[0] and fingerprint(body) % 3 == 0 and PROBE not in json.dumps(body),
            *[Fault(503)] * 100_000,
        )
        code, said = run(judge_command(env, profile, root / "killed-retry", *endpoint))
        failed = failed_pairs(root / "killed-retry") if code == 0 else 0
        sick[0], server.answer_delay = False, 0.05
        kills, finished = kill_loop(
            judge_command(env, profile, root / "killed-retry", *endpoint), root / "killed-retry", 3, random.Random(28)
        )
        server.answer_delay = 0.0
        ok = (
            failed > 16
            and kills > 0
            and finished == 1
            and rows(root / "killed-retry") == reference
            and failed_pairs(root / "killed-retry") == 0
            and not leftovers(root / "killed-retry")
        )
        results.append(
            (
                f"{kills} SIGKILLs while {failed} failed pairs were retried",
                ok,
                "the shard equals an uninterrupted run's" if ok else "NOT the same shard",
            )
        )
        results.append(batch_lines(w, env, profile, server))
    finally:
        server.close()
    return results


def batch_lines(w: Path, env: dict, profile: Path, server: StandIn) -> tuple[str, bool, str]:
    """Result lines of no pair of the shard: a pair of another shard, a malformed id, another export's file."""
    root = w / "served" / "batch"
    code, said = run(judge_command(env, profile, root / "out", "--export-batch", str(root / "requests")))
    run_batch_on(server, root / "requests" / "requests-00000.jsonl", root / "results.jsonl")
    with open(root / "results.jsonl", "a") as f:
        f.write(answered("999::clueweb22-en0000-00-00009::0", " 1") + "\n" + answered("only::two", " 3") + "\n")
    (root / "other.jsonl").write_text(answered("771::clueweb22-en0000-09-00001::1", " 2") + "\n")
    code, said = run(
        judge_command(
            env,
            profile,
            root / "out",
            "--import-batch",
            str(root / "results.jsonl"),
            "--import-batch",
            str(root / "other.jsonl"),
            "--batch-manifest",
            str(root / "requests" / "manifest.json"),
        )
    )
    ok = code == 0 and all(f"{name} 1 (e.g." in said for name in ("not in shard", "another export", "malformed ids"))
    return "batch result lines of no pair of the shard (3 kinds)", ok, said[said.find("batch result lines") :][:220]
