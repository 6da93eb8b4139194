"""The SIGKILLs and races of scripts/hostile.py, run as real processes (`python -m builder.cli.main`): a stage
killed at random moments then finished (its output equal to an uninterrupted run's, nothing left behind), and two
workers on one shard or two shards finishing together."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
CLI = [sys.executable, "-m", "builder.cli.main"]


def judge_command(env: dict, profile: Path, out: Path, *more: str) -> list[str]:
    return [
        *CLI,
        "judge",
        "--profile",
        str(profile),
        "--subquestions",
        str(env["questions"]),
        "--candidates",
        str(env["candidates"]),
        "--index",
        str(env["index"]),
        "--out",
        str(out),
        *more,
    ]


def parquet_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet"))


def leftovers(folder: Path) -> list[str]:
    return [
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if ".tmp" in p.name or p.parent.name == "_locks" or "anserini-input" in p.name or p.name.endswith(".building")
    ]


def writing(folder: Path) -> bool:
    """A writer has started: a tmp file, a half-built index or Anserini's staging copy is there."""
    return folder.exists() and any(
        ".tmp" in p.name or ".building" in p.name or "anserini-input" in p.name for p in folder.rglob(".*")
    )


def kill_loop(command: list[str], watch: Path, kills: int, rng: random.Random) -> tuple[int, int]:
    """Kills `command` at random moments `kills` times (each once it has started writing under `watch`),
    then lets it finish. Returns (kills done, finished cleanly)."""
    done = 0
    for _ in range(kills):
        proc = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and not writing(watch):
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.8))
        if proc.poll() is not None:
            continue
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done += 1
    final = subprocess.run(command, env=ENV, capture_output=True, text=True)
    return done, int(final.returncode == 0)


def kills(w: Path, env: dict, per_stage: int) -> list[tuple[str, int, int]]:
    rng = random.Random(13)
    big = w / "kills" / "docs"
    big.mkdir(parents=True)
    with open(big / "docs.jsonl", "w") as f:
        for i in range(60_000):
            f.write(json.dumps({"id": f"doc-{i}", "contents": f"document {i} " + "lorem ipsum " * 40}) + "\n")
    stages = {
        "corpus": lambda out: [*CLI, "corpus", "--input", str(big), "--out", str(out)],
        "judge": lambda out: judge_command(env, env["small_profile"], out),
        "index": lambda out: [*CLI, "index", "--corpus", str(w / "kills" / "reference-corpus"), "--index", str(out)],
    }
    rows = []
    for name, command in stages.items():
        reference = w / "kills" / f"reference-{name}"
        subprocess.run(command(reference), env=ENV, check=True, capture_output=True)
        target = w / "kills" / f"killed-{name}"
        done, finished = kill_loop(command(target), target if name != "index" else target.parent, per_stage, rng)
        if name == "index":  # the same documents indexed (Lucene segments differ from build to build)
            record = "researchy_subq_index.json"
            same = (
                finished
                and (target / record).exists()
                and json.loads((target / record).read_text())["documents"]
                == json.loads((reference / record).read_text())["documents"]
            )
        else:
            same = finished and all(
                pq.read_table(target / p).equals(pq.read_table(reference / p)) for p in parquet_files(reference)
            )
        clean = not leftovers(target if name != "index" else target.parent)
        rows.append((name, done, done if (same and clean) else 0))
    return rows


def races(w: Path, env: dict) -> list[tuple[str, bool, str]]:
    root = w / "races"
    docs = root / "docs"
    docs.mkdir(parents=True)
    for part in range(2):
        with open(docs / f"part-{part}.jsonl", "w") as f:
            for i in range(60_000):
                f.write(
                    json.dumps({"id": f"doc-{part}-{i}", "contents": "words " * 40, "url": f"https://x/{part}/{i}"})
                    + "\n"
                )
    results = []
    out_dir = root / "same-shard"
    command = [*CLI, "corpus", "--input", str(docs), "--out", str(out_dir)]
    first = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while first.poll() is None and not (out_dir.exists() and any(".tmp" in p.name for p in out_dir.glob(".*"))):
        time.sleep(0.02)
    second = subprocess.run(command, env=ENV, capture_output=True, text=True)
    first.wait()
    said = " ".join((second.stdout + second.stderr).split())
    ok = second.returncode == 1 and f"pid {first.pid}" in said and first.returncode == 0 and not leftovers(out_dir)
    results.append(("two workers, one corpus shard", ok, said[-110:]))
    out_dir = root / "two-shards"
    procs = [
        subprocess.Popen(
            [*CLI, "corpus", "--input", str(docs), "--out", str(out_dir), "--shard", str(i), "--num-shards", "2"],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outputs = [p.communicate()[0] for p in procs]
    url_map = out_dir / "url_hash_map.parquet"
    ok = (
        all(p.returncode == 0 for p in procs)
        and url_map.exists()
        and pq.read_metadata(url_map).num_rows == 120_000
        and not leftovers(out_dir)
    )
    results.append(("two corpus shards finishing together (url-hash map)", ok, " ".join(outputs[-1].split())[-110:]))
    out_dir = root / "same-judge-shard"
    command = judge_command(env, env["small_profile"], out_dir)
    first = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while first.poll() is None and not (out_dir / "_locks").exists():
        time.sleep(0.02)
    second = subprocess.run(command, env=ENV, capture_output=True, text=True)
    first.wait()
    said = " ".join((second.stdout + second.stderr).split())
    rows = pq.read_table(out_dir / "judgments-00000-of-00001.parquet") if first.returncode == 0 else None
    pairs = rows.select(["subq_id", "docid"]).to_pylist() if rows is not None else []
    ok = (
        second.returncode == 1
        and f"pid {first.pid}" in said
        and rows is not None
        and len(pairs) == len({(p["subq_id"], p["docid"]) for p in pairs})
        and not leftovers(out_dir)
    )
    results.append(("two workers, one judge shard", ok, said[-110:]))
    return results
