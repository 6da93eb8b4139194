"""Tries the kit as a hostile user would and prints the figures of docs/benchmarks.md:
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
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from hostile_corruptions import corruptions, link_writes
from hostile_inputs import cases
from hostile_processes import kills, races
from hostile_server import served_judge
from rich.console import Console
from rich.table import Table

out = Console()


def setup(w: Path) -> dict:
    """Good inputs every case starts from: the bundled sample through pool for two questions, a judged
    release of synthetic judgments, and profiles differing in one section."""
    import pyarrow.compute as pc

    from builder.release.assemble.folder import ReleaseOptions, build_release
    from builder.standins.synthetic import synthesize
    from generation.profiles.profile import load_profile
    from generation.sample import CLUEWEB22, RESEARCHY
    from generation.stages.corpus import CorpusStage, write_url_map
    from generation.stages.index import IndexStage
    from generation.stages.judge import JudgeStage
    from generation.stages.pool import PoolStage
    from generation.stages.questions import QuestionsStage
    from generation.stages.rerank import RerankStage
    from generation.stages.retrieve import RetrieveStage

    QuestionsStage(None, w / "all-questions", [RESEARCHY["test"]], split="test").run()
    q = w / "questions"
    q.mkdir()
    for name in ("questions", "subquestions"):
        table = pq.read_table(w / "all-questions" / f"{name}.parquet")
        keep = pq.read_table(w / "all-questions" / "questions.parquet")["qid"].to_pylist()[:2]
        pq.write_table(table.filter(pc.is_in(table["qid"], pa.array(keep))), q / f"{name}.parquet")
    CorpusStage(None, w / "corpus", [CLUEWEB22]).run()
    write_url_map(w / "corpus")
    IndexStage(None, w / "index", w / "corpus", threads=2).run()
    demo = load_profile("demo")
    small = demo.model_copy(
        update={
            "bm25": demo.bm25.model_copy(update={"depth": 30}),
            "rerank": demo.rerank.model_copy(update={"depth": 30}),
            "pool": demo.pool.model_copy(update={"bm25_top": 6, "rerank_top": 6}),
            "judge": demo.judge.model_copy(update={"chunk_size": 16}),
        }
    )
    other = small.model_copy(update={"rerank": small.rerank.model_copy(update={"depth": 20})})
    profiles = {}
    for name, profile in (("small", small), ("other-depth", other)):
        profiles[name] = w / f"{name}.yaml"
        profiles[name].write_text(yaml.safe_dump(profile.model_dump(), sort_keys=False))
    RetrieveStage(small, w / "runs", q, w / "index").run()
    RerankStage(small, w / "runs", q, w / "runs", w / "index").run()
    PoolStage(small, w / "candidates", q, w / "runs", w / "corpus").run()
    JudgeStage(small, w / "judgments", q, w / "candidates", w / "index").run()
    synthetic = synthesize(
        w / "synthetic", subquestions=400, judgments=8_000, test_share=0.25, shards=2, seed=1, unparsed_share=0.004
    )
    release = w / "release"
    build_release(
        ReleaseOptions(
            judgments=[synthetic["judgments"]],
            questions=list(synthetic["questions"].values()),
            out=release,
            profile="paper",
            repo="org/researchy-subq-judgments",
            rows_per_file=3000,
        )
    )
    paper = load_profile("paper")
    distribution = paper.model_copy(update={"judge": paper.judge.model_copy(update={"mode": "distribution"})})
    judged = synthesize(
        w / "synthetic-distribution",
        subquestions=400,
        judgments=8_000,
        test_share=0.25,
        shards=2,
        seed=1,
        unparsed_share=0.004,
        profile=distribution,
    )
    build_release(
        ReleaseOptions(
            judgments=[judged["judgments"]],
            questions=list(judged["questions"].values()),
            out=w / "distribution-release",
            profile=distribution,
            repo="org/researchy-subq-judgments",
            rows_per_file=3000,
        )
    )
    first = pq.read_table(sorted((release / "data" / "judgments").glob("*/train-*.parquet"))[0]).slice(0, 3)
    return {
        "questions": q,
        "index": w / "index",
        "corpus": w / "corpus",
        "runs": w / "runs",
        "candidates": w / "candidates",
        "judgments": w / "judgments",
        "release": release,
        "clueweb": CLUEWEB22,
        "distribution_release": w / "distribution-release",
        "small_profile": profiles["small"],
        "other_depth_profile": profiles["other-depth"],
        "synthetic": synthetic,
        "run_pairs": list(zip(first["qid"].to_pylist(), first["docid"].to_pylist())),
    }


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
    for title, rows, columns in (
        ("SIGKILLs", killed, ("stage", "kills", "survived")),
        (
            "races",
            [(n, "handled" if ok else "NOT handled", s) for n, ok, s in raced],
            ("race", "answer", "second worker said"),
        ),
        ("writes through links (build-release)", linked, ("link", "answer")),
        ("release corruptions (validate)", corrupted, ("corruption", "answer")),
        (
            "served judge faults",
            [(n, "handled" if ok else "NOT handled", s) for n, ok, s in served],
            ("fault", "answer", "the kit said"),
        ),
    ):
        table = Table(title=title)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*map(str, row))
        out.print(table)
    clear = sum(v == "clear" for _, v, _ in inputs)
    summary = {
        "inputs_tried": len(inputs),
        "clear_errors": clear,
        "kills": sum(k for _, k, _ in killed),
        "kills_survived": sum(s for _, _, s in killed),
        "races_tried": len(raced),
        "races_handled": sum(ok for _, ok, _ in raced),
        "link_writes_tried": len(linked),
        "link_writes_refused": sum(v == "refused, untouched" for _, v in linked),
        "corruptions_tried": len(corrupted),
        "corruptions_caught": sum(v == "caught" for _, v in corrupted),
        "server_faults_tried": len(served),
        "server_faults_handled": sum(ok for _, ok, _ in served),
    }
    out.print(
        f"inputs tried {summary['inputs_tried']} / clear errors {summary['clear_errors']}; "
        f"kills {summary['kills']} / survived {summary['kills_survived']}; races {summary['races_tried']} / "
        f"handled {summary['races_handled']}; writes through links tried {summary['link_writes_tried']} / "
        f"refused {summary['link_writes_refused']}; corruptions tried {summary['corruptions_tried']} / caught "
        f"{summary['corruptions_caught']}; served judge faults {summary['server_faults_tried']} / handled "
        f"{summary['server_faults_handled']}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "summary": summary,
                    "inputs": inputs,
                    "kills": killed,
                    "races": raced,
                    "link_writes": linked,
                    "corruptions": corrupted,
                    "served_judge": served,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
