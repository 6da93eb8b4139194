"""The kit's `corpus` + `index` against Anserini's IndexCollection on the same documents: CPU s, wall s, peak MB and
disk per step, and the extrapolation to ClueWeb22-B's English part on a node of N cores.

    nice python scripts/bench_index.py --docs 20000 --threads 2 --cores 32

Input: a synthetic ClueWeb22 txt tree in the published format (builder/standins/synthetic.py
`write_clueweb22_txt`). The anchor: the Anserini bundled with Pyserini has no ClueWeb22Collection, so it indexes the
same documents as JsonCollection files ({"id", "contents", "url_hash", "url"}, gzip'd, one per txt file, written
before the clock starts), with the kit's flags (no -storeRaw, -fields url_hash, the same stemmer, threads and heap).
Each step runs as a child process; its CPU (user + system) and peak RSS come from wait4, so they include Java and
every other descendant (peak RSS: the largest single process). Disk is sampled every 0.2 s while a step runs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from builder.standins.synthetic import write_clueweb22_txt
from generation.stages.index import index_collection_command

ENGLISH_DOCS = 86_000_000  # ClueWeb22-B: ~200M pages, ~43% English
CLI = [sys.executable, "-c", "from builder.cli.main import main; main()"]


def disk_bytes(paths: list[Path]) -> int:
    total = 0
    for root in paths:
        for folder, _, names in os.walk(root):
            for name in names:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_blocks * 512
                except FileNotFoundError:
                    pass
    return total


def measure(command: list[str], watch: list[Path]) -> dict:
    """wall s, CPU s (the process and its descendants), peak RSS MB, peak disk MB of `watch` while it ran."""
    peak, done = [disk_bytes(watch)], threading.Event()

    def sample():
        while not done.wait(0.2):
            peak[0] = max(peak[0], disk_bytes(watch))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr, said = child.stderr, []  # what the child wrote on stderr, read as it runs
    assert stderr is not None  # stderr=PIPE
    stderr_reader = threading.Thread(target=lambda: said.append(stderr.read()), daemon=True)
    stderr_reader.start()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    stderr_reader.join()
    done.set()
    sampler.join()
    peak[0] = max(peak[0], disk_bytes(watch))
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{said[0].decode()[-3000:]}")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": usage.ru_maxrss / 1024,
        "disk": peak[0] / 2**20,
    }


def anchor_input(txt: list[Path], folder: Path) -> None:
    """The txt records as JsonCollection documents, one gzip'd file per txt file (not timed)."""
    folder.mkdir(parents=True)
    for n, path in enumerate(txt):
        with (
            gzip.open(path, "rt", encoding="utf-8") as f,
            gzip.open(folder / f"part-{n:05d}.jsonl.gz", "wt", encoding="utf-8", compresslevel=1) as out,
        ):
            for line in f:
                r = json.loads(line)
                out.write(
                    json.dumps(
                        {
                            "id": r["ClueWeb22-ID"],
                            "contents": r["Clean-Text"],
                            "url_hash": r["URL-hash"],
                            "url": r["URL"].strip(),
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--per-file", type=int, default=4_000, help="documents per txt file")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-mb", type=int, default=2048)
    parser.add_argument("--cores", type=int, default=32, help="the node the extrapolation is for")
    parser.add_argument("--work", type=Path, help="working folder (default: a temporary one, removed)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-index-"))
    try:
        return run(args, work)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


def run(args, work: Path) -> int:
    started = time.perf_counter()
    txt = write_clueweb22_txt(work / "cw22", args.docs, args.per_file)
    anchor_input(txt, work / "anchor-json")
    print(
        f"synthetic ClueWeb22 txt: {args.docs:,} documents in {len(txt)} files, {disk_bytes([work / 'cw22']) / 2**20:,.0f}"
        f" MB ({time.perf_counter() - started:.0f} s to write)",
        file=sys.stderr,
    )
    corpus, index, anchor = work / "corpus", work / "index", work / "anchor-index"
    rows = {}
    rows["kit: corpus (1 shard)"] = measure(
        CLI + ["corpus", "--input", str(work / "cw22" / "txt"), "--out", str(corpus)], [corpus]
    )
    rows[f"kit: index --threads {args.threads}"] = measure(
        CLI
        + [
            "index",
            "--corpus",
            str(corpus),
            "--index",
            str(index),
            "--threads",
            str(args.threads),
            "--memory-mb",
            str(args.memory_mb),
            "--profile",
            "paper",
        ],
        [work],
    )
    rows[f"Anserini IndexCollection, JsonCollection, {args.threads} threads"] = measure(
        index_collection_command(work / "anchor-json", anchor, args.threads, "porter", args.memory_mb),
        [anchor],
    )
    sizes = {
        "txt": disk_bytes([work / "cw22"]),
        "corpus": disk_bytes([corpus]),
        "index": disk_bytes([index]),
        "anchor": disk_bytes([anchor]),
    }
    # the index step watched the whole folder: keep the corpus, the staged parts and the index, not the inputs
    rows[f"kit: index --threads {args.threads}"]["disk"] -= (disk_bytes([work / "cw22", work / "anchor-json"])) / 2**20
    report(args, rows, sizes)
    return 0


def report(args, rows: dict, sizes: dict) -> None:
    mb = {k: v / 2**20 for k, v in sizes.items()}
    print(
        f"| step, {args.docs:,} documents | CPU s | wall s | peak MB | peak disk MB (kit: corpus and what the "
        "index adds, beside the txt) | on disk after |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    after = [
        f"Parquet {mb['corpus']:,.0f} MB",
        f"index {mb['index']:,.0f} MB (with its docid map)",
        f"index {mb['anchor']:,.0f} MB",
    ]
    for (name, r), left in zip(rows.items(), after):
        print(f"| {name} | {r['cpu']:.1f} | {r['wall']:.1f} | {r['rss']:,.0f} | {r['disk']:,.0f} | {left} |")
    kit = [r for name, r in rows.items() if name.startswith("kit")]
    anchor = rows[next(name for name in rows if name.startswith("Anserini"))]
    cpu, wall = sum(r["cpu"] for r in kit), sum(r["wall"] for r in kit)
    peak_kit = kit[1]["disk"]  # corpus + index while building
    print(
        f"\nkit corpus + index: {cpu:.1f} CPU s ({cpu / anchor['cpu']:.2f}x Anserini), {wall:.1f} s wall "
        f"({wall / anchor['wall']:.2f}x); the kit's peak disk (corpus + index while building; the JSON goes through "
        f"pipes): {peak_kit:,.0f} MB, against the txt + Anserini's index: {mb['txt'] + mb['anchor']:,.0f} MB "
        f"({peak_kit / (mb['txt'] + mb['anchor']):.2f}x); txt {mb['txt']:,.0f} MB"
    )
    scale = ENGLISH_DOCS / args.docs
    hours = lambda cpu_s: cpu_s * scale / args.cores / 3600  # noqa: E731
    print(
        f"\nextrapolated to {ENGLISH_DOCS:,} documents on {args.cores} cores: kit {hours(cpu):.1f} h, Anserini "
        f"{hours(anchor['cpu']):.1f} h; disk beside the txt: kit {peak_kit * scale / 2**20:.2f} TB at peak, "
        f"{(mb['corpus'] + mb['index']) * scale / 2**20:.2f} TB after (corpus + index), anchor "
        f"{mb['anchor'] * scale / 2**20:.2f} TB; txt {mb['txt'] * scale / 2**20:.2f} TB"
    )
    print(
        f"assumptions: CPU and bytes grow linearly with documents (these synthetic texts' lengths and vocabulary); "
        f"all {args.cores} cores busy (corpus run as >= {args.cores} shards, index with --threads {args.cores} over "
        f">= {args.cores} input files), so hours = CPU s / cores; the same per-core speed as here (load average "
        f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())} at the end); disk as TB = 2^40 bytes"
    )


if __name__ == "__main__":
    raise SystemExit(main())
