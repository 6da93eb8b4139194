"""`researchy-subq texts` speed and memory on a synthetic ClueWeb22 txt tree, with and without `.offset` files.

The tree has ClueWeb22's published shape (lemurproject/ClueWeb22, ClueWeb22Api.py): txt/en/en00/en0000/en0000-NN.json.gz,
one record per line, each record its own gzip member, and `en0000-NN.offset` with one '{:010d}\\n' offset per
record plus a closing one. Sizes (ASSUMED, stated in the output): DOCS_PER_FILE records a file, WORDS words a page;
the judged share is the paper's (~3.5M judged documents of ClueWeb22-B's ~86M English pages, about 4%), so most
records of a file are not wanted. Each mode runs `write_texts` in a fresh process (bench_common.timed).

Usage: python scripts/bench_texts.py [--files 4] [--docs-per-file 4000] [--words 900] [--share 0.04] [--out DIR]
       python scripts/bench_texts.py --training 2000 [--words 900]   # training-files on a synthetic release

The tree and the release stub are builder/standins/clueweb22_texts.py's (the tests use them too).
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
from pathlib import Path

from bench_common import load_line

from builder.standins.clueweb22_texts import write_release_stub, write_tree

TEXTS = """
import resource, time
from pathlib import Path
from builder.training.texts import write_texts
from generation.storage.shards import Shard
before = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()  # write_texts alone, not the imports
summary = write_texts(Path({release!r}), Path({copy!r}), Path({out!r}), Shard(), use_offsets={offsets})
assert summary.written == {wanted}, summary.as_dict()
wall = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024
print(f"RESULT {{wall:.3f}} {{cpu:.3f}} {{peak:.0f}}")
"""


LAST_STDOUT = [""]


def run_step(code: str, **fields) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MB) of a step alone (imports not counted), in a fresh interpreter (peak: its VmHWM)."""
    result = subprocess.run([sys.executable, "-c", code.format(**fields)], capture_output=True, text=True)
    line = next((out for out in result.stdout.splitlines() if out.startswith("RESULT")), None)
    if result.returncode != 0 or line is None:
        raise SystemExit(f"step failed:\n{result.stderr[-3000:]}")
    LAST_STDOUT[0] = result.stdout
    wall, cpu, peak = (float(x) for x in line.split()[1:])
    return wall, cpu, peak


TRAINING = """
import resource, time
from pathlib import Path
from builder.training.files import write_training_files
before = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
summary = write_training_files(Path({release!r}), Path({texts!r}), Path({out!r}))
wall = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024
print(f"ROWS {{sum(summary.rows.values())}}")
print(f"RESULT {{wall:.3f}} {{cpu:.3f}} {{peak:.0f}}")
"""


def training_bench(work: Path, subquestions: int, words: int) -> None:
    """`training-files` on a synthetic release (paper profile, Table 1's level mix) whose documents all have a text."""
    from builder.release.assemble.folder import ReleaseOptions, build_release
    from builder.standins.synthetic import synthesize
    from builder.training.texts import judged_docids, write_texts

    inputs = synthesize(
        work / "in", subquestions=subquestions, judgments=int(subquestions * 18.87), test_share=0.1, shards=1, seed=3
    )
    release = work / "researchy-subq-judgments"
    questions = list(inputs["questions"].values())
    build_release(ReleaseOptions(judgments=[inputs["judgments"]], questions=questions, out=release, profile="paper"))
    records: dict[str, int] = {}
    for docid in judged_docids(release)["docid"].to_pylist():
        key, record = docid[len("clueweb22-") :].rsplit("-", 1)
        records[key] = max(records.get(key, 0), int(record) + 1)
    write_tree(work / "copy", records, words)
    write_texts(release, work / "copy", work / "texts")
    wall, cpu, peak = run_step(TRAINING, release=str(release), texts=str(work / "texts"), out=str(work / "training"))
    rows = int(next(out for out in LAST_STDOUT[0].splitlines() if out.startswith("ROWS")).split()[1])
    print(
        f"training-files: {subquestions:,} sub-questions, {rows:,} rows (sub-question, positive, 3 negatives; "
        f"~{words}-word pages), all four formats: {wall:.2f} s wall, {cpu:.2f} s CPU, {rows / cpu:,.0f} rows/CPU-s, peak {peak:,.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--docs-per-file", type=int, default=4000)
    parser.add_argument("--words", type=int, default=900)
    parser.add_argument("--share", type=float, default=0.04, help="judged share of the copy's documents")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-texts"))
    parser.add_argument(
        "--training",
        type=int,
        default=0,
        metavar="SUBQUESTIONS",
        help="instead: time training-files on a synthetic release of this many sub-questions",
    )
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    if args.training:
        return training_bench(args.out, args.training, args.words)
    keys = {f"en0000-{n:02d}": args.docs_per_file for n in range(args.files)}
    write_tree(args.out / "copy", keys, args.words)
    rng = random.Random(1)
    everything = [f"clueweb22-{k}-{i:05d}" for k, n in keys.items() for i in range(n)]
    wanted = sorted(rng.sample(everything, max(1, int(len(everything) * args.share))))
    release = write_release_stub(args.out / "release", wanted)
    size = sum(p.stat().st_size for p in (args.out / "copy").rglob("*.json.gz")) / 2**20
    print(
        f"copy: {args.files} files x {args.docs_per_file:,} pages x ~{args.words} words ({size:.0f} MiB gzip, "
        f"ASSUMED sizes); judged: {len(wanted):,} ({args.share:.0%}); load {load_line()}"
    )
    for offsets in (True, False):
        out = args.out / f"texts-{'offsets' if offsets else 'streaming'}"
        wall, cpu, peak = run_step(
            TEXTS, release=str(release), copy=str(args.out / "copy"), out=str(out), offsets=offsets, wanted=len(wanted)
        )
        print(
            f"{'with .offset files' if offsets else 'without (streaming)':22} {len(wanted):>7,} docs  {wall:6.2f} s "
            f"wall  {cpu:6.2f} s CPU  {len(wanted) / wall:8,.0f} docs/s  {len(wanted) / cpu:8,.0f} docs/CPU-s  "
            f"peak {peak:,.0f} MB"
        )


if __name__ == "__main__":
    main()
