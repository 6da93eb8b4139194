"""Tries the kit as a hostile user would and prints the figures of docs/reliability.md:
bad inputs tried / answered with one clear line (or rejects that let the run go on), SIGKILLs survived (the
re-run's output equals an uninterrupted run's, nothing left behind), races handled (a second worker on a
shard is refused and told who holds it; shards finishing together), release corruptions caught by `validate`.

Usage: python scripts/hostile.py [--work DIR] [--kills 4] [--json FILE]
Bad inputs run in-process through the CLI (typer's CliRunner, as a user's shell would see the output);
kills and races run real processes (`python -m builder.cli.main`).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_inputs import cases  # noqa: E402
from hostile_release import DISTRIBUTION_FAULTS, GENERATE_FAULTS, data_file, failed_keys, rewrite, set_first  # noqa: E402
from hostile_server import served_judge  # noqa: E402

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
CLI = [sys.executable, "-m", "builder.cli.main"]
out = Console()


def setup(w: Path) -> dict:
    """Good inputs every case starts from: the bundled sample through pool for two questions, a judged
    release of synthetic judgments, and profiles differing in one section."""
    import pyarrow.compute as pc

    from builder.analysis.synthetic import synthesize
    from builder.release.package import package_release
    from generation.profiles import load_profile
    from generation.sample import CLUEWEB22, RESEARCHY
    from generation.stages.corpus import build_corpus, write_url_map
    from generation.stages.index import build_index
    from generation.stages.judge import run_judge
    from generation.stages.pool import build_pool
    from generation.stages.questions import read_researchy
    from generation.stages.rerank import rerank
    from generation.stages.retrieve import retrieve

    read_researchy([RESEARCHY["test"]], w / "all-questions", split="test")
    q = w / "questions"
    q.mkdir()
    for name in ("questions", "subquestions"):
        table = pq.read_table(w / "all-questions" / f"{name}.parquet")
        keep = pq.read_table(w / "all-questions" / "questions.parquet")["qid"].to_pylist()[:2]
        pq.write_table(table.filter(pc.is_in(table["qid"], pa.array(keep))), q / f"{name}.parquet")
    build_corpus([CLUEWEB22], w / "corpus")
    write_url_map(w / "corpus")
    build_index(w / "corpus", w / "index", threads=2)
    demo = load_profile("demo")
    small = demo.model_copy(update={"bm25": demo.bm25.model_copy(update={"depth": 30}),
                                    "rerank": demo.rerank.model_copy(update={"depth": 30}),
                                    "pool": demo.pool.model_copy(update={"bm25_top": 6, "rerank_top": 6}),
                                    "judge": demo.judge.model_copy(update={"chunk_size": 16})})
    other = small.model_copy(update={"rerank": small.rerank.model_copy(update={"depth": 20})})
    profiles = {}
    for name, profile in (("small", small), ("other-depth", other)):
        profiles[name] = w / f"{name}.yaml"
        profiles[name].write_text(yaml.safe_dump(profile.model_dump(), sort_keys=False))
    retrieve(small, q, w / "index", w / "runs")
    rerank(small, q, w / "runs", w / "index", w / "runs")
    build_pool(small, q, w / "runs", w / "corpus", w / "candidates")
    run_judge(small, q, w / "candidates", w / "index", w / "judgments")
    synthetic = synthesize(w / "synthetic", subquestions=400, judgments=8_000, test_share=0.25, shards=2, seed=1,
                           unparsed_share=0.004)
    release = w / "release"
    package_release([synthetic["judgments"]], list(synthetic["questions"].values()), release, "paper",
                    repo="org/researchy-subq-judgments", rows_per_file=3000)
    paper = load_profile("paper")
    distribution = paper.model_copy(update={"judge": paper.judge.model_copy(update={"mode": "distribution"})})
    judged = synthesize(w / "synthetic-distribution", subquestions=400, judgments=8_000, test_share=0.25, shards=2,
                        seed=1, unparsed_share=0.004, profile=distribution)
    package_release([judged["judgments"]], list(judged["questions"].values()), w / "distribution-release",
                    distribution, repo="org/researchy-subq-judgments", rows_per_file=3000)
    first = pq.read_table(sorted((release / "data" / "judgments").glob("*/train-*.parquet"))[0]).slice(0, 3)
    return {"questions": q, "index": w / "index", "corpus": w / "corpus", "runs": w / "runs",
            "candidates": w / "candidates", "judgments": w / "judgments", "release": release, "clueweb": CLUEWEB22,
            "distribution_release": w / "distribution-release",
            "small_profile": profiles["small"], "other_depth_profile": profiles["other-depth"],
            "synthetic": synthetic, "run_pairs": list(zip(first["qid"].to_pylist(), first["docid"].to_pylist()))}


def classify(expected: str, code: int, output: str, exception) -> str:
    flat = " ".join(output.split())
    if exception is not None and not isinstance(exception, SystemExit):
        return f"traceback ({type(exception).__name__})"
    if "Traceback" in output or "internal error" in flat:
        return "traceback"
    if "Aborted" in flat:
        return "bare Aborted"
    if expected == "rejects":
        return "clear" if code == 0 and ("rejected" in flat or "malformed" in flat) else f"exit {code}"
    if expected == "warning":  # accepted, saying what was assumed
        return "clear" if code == 0 and "warning:" in flat else f"exit {code}" if code else "accepted without a word"
    if code == 0:
        return "accepted"
    lines = [line for line in output.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    usage = "Usage:" in output and ("Invalid value" in output or "Error" in output)
    return "clear" if usage or "error:" in output else f"unclear: {last[:80]}"


def bad_inputs(w: Path, env: dict) -> list[tuple[str, str, str]]:
    from typer.testing import CliRunner

    from builder.cli.main import app

    runner, results = CliRunner(), []
    for label, expected, argv in cases(w / "bad", env):
        result = runner.invoke(app, [str(a) for a in argv])
        verdict = classify(expected, result.exit_code, result.output, result.exception)
        lines = [line for line in result.output.strip().splitlines() if line.strip()]
        results.append((label, verdict, " ".join((lines[-1] if lines else "").split())[:110]))
    return results


def parquet_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet"))


def leftovers(folder: Path) -> list[str]:
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if ".tmp" in p.name or p.parent.name == "_locks"
            or "anserini-input" in p.name or p.name.endswith(".building")]


def writing(folder: Path) -> bool:
    """A writer has started: a tmp file, a half-built index or Anserini's staging copy is there."""
    return folder.exists() and any(".tmp" in p.name or ".building" in p.name or "anserini-input" in p.name
                                   for p in folder.rglob(".*"))


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
        "judge": lambda out: [*CLI, "judge", "--profile", str(env["small_profile"]), "--subquestions",
                              str(env["questions"]), "--candidates", str(env["candidates"]), "--index",
                              str(env["index"]), "--out", str(out)],
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
            same = finished and (target / record).exists() and json.loads((target / record).read_text())["documents"] \
                == json.loads((reference / record).read_text())["documents"]
        else:
            same = finished and all(pq.read_table(target / p).equals(pq.read_table(reference / p))
                                    for p in parquet_files(reference))
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
                f.write(json.dumps({"id": f"doc-{part}-{i}", "contents": "words " * 40, "url": f"https://x/{part}/{i}"})
                        + "\n")
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
    procs = [subprocess.Popen([*CLI, "corpus", "--input", str(docs), "--out", str(out_dir), "--shard", str(i),
                               "--num-shards", "2"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for i in range(2)]
    outputs = [p.communicate()[0] for p in procs]
    url_map = out_dir / "url_hash_map.parquet"
    ok = all(p.returncode == 0 for p in procs) and url_map.exists() and \
        pq.read_metadata(url_map).num_rows == 120_000 and not leftovers(out_dir)
    results.append(("two corpus shards finishing together (url-hash map)", ok,
                    " ".join(outputs[-1].split())[-110:]))
    out_dir = root / "same-judge-shard"
    command = [*CLI, "judge", "--profile", str(env["small_profile"]), "--subquestions", str(env["questions"]),
               "--candidates", str(env["candidates"]), "--index", str(env["index"]), "--out", str(out_dir)]
    first = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while first.poll() is None and not (out_dir / "_locks").exists():
        time.sleep(0.02)
    second = subprocess.run(command, env=ENV, capture_output=True, text=True)
    first.wait()
    said = " ".join((second.stdout + second.stderr).split())
    rows = pq.read_table(out_dir / "judgments-00000-of-00001.parquet") if first.returncode == 0 else None
    pairs = rows.select(["subq_id", "docid"]).to_pylist() if rows is not None else []
    ok = second.returncode == 1 and f"pid {first.pid}" in said and rows is not None and \
        len(pairs) == len({(p["subq_id"], p["docid"]) for p in pairs}) and not leftovers(out_dir)
    results.append(("two workers, one judge shard", ok, said[-110:]))
    return results


def link_writes(w: Path, env: dict) -> list[tuple[str, str]]:
    """`build-release --out R` over a release whose card, plot, manifest or data folder is a link to a
    user's file or folder elsewhere: refused in one line, the user's file untouched, nothing written outside R."""
    from typer.testing import CliRunner

    from builder.cli.main import app

    synthetic, results = env["synthetic"], []
    build = ["build-release", "--profile", "paper", "--repo", "org/researchy-subq-judgments", "--rows-per-file", "3000",
             "--judgments", synthetic["judgments"]]
    for folder in synthetic["questions"].values():
        build += ["--questions", folder]
    for name in ("README.md", "level_distribution.png", "manifest.json", "data"):
        case = w / "links" / name.replace(".", "_")
        release = case / "release"
        shutil.copytree(env["release"], release, symlinks=True)
        users = case / f"users-{name}"
        shutil.move(release / name, users)
        (release / name).symlink_to(users)
        before = {str(p): p.read_bytes() for p in ([users] if users.is_file() else sorted(users.rglob("*"))) if p.is_file()}
        result = CliRunner().invoke(app, [str(a) for a in [*build, "--out", release]])
        after = {str(p): p.read_bytes() for p in ([users] if users.is_file() else sorted(users.rglob("*"))) if p.is_file()}
        refused = result.exit_code == 1 and "is a symbolic link" in result.output and "internal error" not in result.output
        verdict = "WRITTEN THROUGH" if after != before else "refused, untouched" if refused else \
            f"exit {result.exit_code}: {' '.join(result.output.split())[:80]}"
        results.append((f"build-release: {name} a link to a user's {'file' if users.is_file() else 'folder'}", verdict))
    return results


def issue28a_faults() -> dict:
    """Links that lead out of the release, which publish would upload as the release's own files."""
    def link_out(r: Path, name: str) -> None:
        outside = r.parent / f"{r.name}-outside-{name.replace('/', '_')}"
        shutil.move(r / name, outside)
        (r / name).symlink_to(outside)

    return {f"{name} a link out of the release": (lambda r, name=name: link_out(r, name))
            for name in ("README.md", "manifest.json", "data/questions")}


def corruptions(w: Path, env: dict) -> list[tuple[str, str]]:
    """The release corruptions: the first list edits files and leaves the seals broken (checksums, counts);
    hostile_release's are re-sealed, so only a semantic check can catch them."""
    from builder.release.validate import validate

    def judgment_file(r, level="level_2", split="train"):
        return data_file(r, f"judgments/{level}", split)

    def manifest_edit(r, change):
        data = json.loads((r / "manifest.json").read_text())
        change(data)
        (r / "manifest.json").write_text(json.dumps(data))

    def other_question(t):
        subq = t["subq_id"].to_pylist()
        foreign = next(s for s in subq if s.rsplit("-", 1)[0] != t["qid"][0].as_py())
        return set_first(t, "subq_id", foreign)

    faults = {
        "a judgment file deleted": lambda r: judgment_file(r).unlink(),
        "a judgment file truncated": lambda r: judgment_file(r).write_bytes(judgment_file(r).read_bytes()[:200]),
        "a judgment file replaced by a symlink": lambda r: (lambda p: (p.unlink(), p.symlink_to(judgment_file(
            r, "level_3"))))(judgment_file(r)),
        "level 7 in level_2": lambda r: rewrite(judgment_file(r), lambda t: set_first(t, "level", 7)),
        "level column retyped to int32": lambda r: rewrite(judgment_file(r), lambda t: t.set_column(
            t.schema.get_field_index("level"), "level", t["level"].cast(pa.int32()))),
        "a duplicated pair": lambda r: rewrite(judgment_file(r), lambda t: pa.concat_tables([t, t.slice(0, 1)])),
        "a sub-question id of no sub-question": lambda r: rewrite(judgment_file(r), lambda t: set_first(
            t, "subq_id", "999999-0")),
        "a judgment whose sub-question is another question's": lambda r: rewrite(judgment_file(r), other_question),
        "NaN in a float column": lambda r: rewrite(judgment_file(r), lambda t: set_first(t, "expected", float("nan"),
                                                                                           pa.float32())),
        "README.md deleted": lambda r: (r / "README.md").unlink(),
        "README YAML broken": lambda r: (r / "README.md").write_text(
            (r / "README.md").read_text().replace("configs:\n", "configs: [\n", 1)),
        "num_examples off by one": lambda r: (r / "README.md").write_text(
            (r / "README.md").read_text().replace("num_examples: ", "num_examples: 1", 1)),
        "manifest row count off": lambda r: manifest_edit(r, lambda m: m["stats"]["train"].__setitem__(
            "judgments", m["stats"]["train"]["judgments"] + 1)),
        "manifest model name changed": lambda r: manifest_edit(
            r, lambda m: m["models"].__setitem__("judge", "other/model")),
        "a root loading script": lambda r: (r / "researchy-subq-judgments.py").write_text("import datasets\n"),
        "a partition folder level_9": lambda r: shutil.copytree(r / "data" / "judgments" / "level_2",
                                                                r / "data" / "judgments" / "level_9"),
        "a question in both train and test": lambda r: shutil.copy(
            sorted((r / "data" / "questions").glob("train-*.parquet"))[0],
            r / "data" / "questions" / "test-99999-of-99999.parquet"),
    }
    faults.update(issue28a_faults())
    cases = [(name, fault, env["release"], None) for name, fault in faults.items()]
    cases += [(f"re-sealed: {name}", fault, env["release"], required) for name, (fault, _, required) in
              GENERATE_FAULTS.items()]
    cases += [(f"re-sealed: {name}", fault, env["distribution_release"], required) for name, (fault, _, required) in
              DISTRIBUTION_FAULTS.items()]
    results = []
    for name, fault, release, required in cases:
        copy = w / "corruptions" / "".join(c if c.isalnum() else "_" for c in name)
        shutil.copytree(release, copy, symlinks=True)
        try:
            fault(copy)
            report = validate(copy, load=False)
            caught = not report.ok and (required is None or required in failed_keys(report))
            verdict = "caught" if caught else "MISSED"
        except Exception as e:  # noqa: BLE001 - counted: validate must report, not raise
            verdict = f"traceback ({type(e).__name__})"
        results.append((name, verdict))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="workspace folder (default: a temporary one, removed after)")
    parser.add_argument("--kills", type=int, default=4, help="SIGKILLs per killed stage")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        out.print(f"setting up under {work} ...")
        env = setup(work)
        inputs = bad_inputs(work, env)
        killed = kills(work, env, args.kills)
        raced = races(work, env)
        linked = link_writes(work, env)
        corrupted = corruptions(work, env)
        served = served_judge(work, env)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    table = Table(title="bad inputs")
    for column in ("input", "answer", "last line"):
        table.add_column(column, overflow="fold")
    for label, verdict, line in inputs:
        table.add_row(label, verdict, line)
    out.print(table)
    for title, rows, columns in (("SIGKILLs", killed, ("stage", "kills", "survived")),
                                 ("races", [(n, "handled" if ok else "NOT handled", s) for n, ok, s in raced],
                                  ("race", "answer", "second worker said")),
                                 ("writes through links (build-release)", linked, ("link", "answer")),
                                 ("release corruptions (validate)", corrupted, ("corruption", "answer")),
                                 ("served judge faults", [(n, "handled" if ok else "NOT handled", s) for n, ok, s in
                                                          served], ("fault", "answer", "the kit said"))):
        table = Table(title=title)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*map(str, row))
        out.print(table)
    clear = sum(v == "clear" for _, v, _ in inputs)
    summary = {"inputs_tried": len(inputs), "clear_errors": clear,
               "kills": sum(k for _, k, _ in killed), "kills_survived": sum(s for _, _, s in killed),
               "races_tried": len(raced), "races_handled": sum(ok for _, ok, _ in raced),
               "link_writes_tried": len(linked), "link_writes_refused": sum(v == "refused, untouched" for _, v in linked),
               "corruptions_tried": len(corrupted), "corruptions_caught": sum(v == "caught" for _, v in corrupted),
               "server_faults_tried": len(served), "server_faults_handled": sum(ok for _, ok, _ in served)}
    out.print(f"inputs tried {summary['inputs_tried']} / clear errors {summary['clear_errors']}; "
              f"kills {summary['kills']} / survived {summary['kills_survived']}; races {summary['races_tried']} / "
              f"handled {summary['races_handled']}; writes through links tried {summary['link_writes_tried']} / "
              f"refused {summary['link_writes_refused']}; corruptions tried {summary['corruptions_tried']} / caught "
              f"{summary['corruptions_caught']}; served judge faults {summary['server_faults_tried']} / handled "
              f"{summary['server_faults_handled']}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "inputs": inputs, "kills": killed, "races": raced,
                                         "link_writes": linked, "corruptions": corrupted, "served_judge": served},
                                        indent=1))


if __name__ == "__main__":
    main()
