"""`import-labels` speed and memory: synthetic ratings files in the authors' shape (13 sub-questions a question, as
the paper's 1,288,976 sub-questions over ~96k questions; 19 documents a question), imported in a fresh process
each, at growing sizes. Prints lines, judgments, wall and CPU seconds, judgments per CPU second and peak memory
(VmHWM), and the memory each further ratings line costs (a least-squares line through the sizes).

Usage: python scripts/bench_import.py [--lines 20000,80000,160000] [--out /tmp/bench-import]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

import numpy as np
from bench_common import load_line, timed
from rich.console import Console
from rich.table import Table

SUBQUESTIONS, DOCUMENTS = 13, 19

IMPORT = """
from generation.profiles.profile import load_profile
from generation.stages.import_labels import ImportLabelsStage
summary = ImportLabelsStage(load_profile("crux-code"), Path({out!r}), Path({questions!r}), [Path({ratings!r})],
                            "crux-ratings", "bench").run()
assert summary.rows == {rows}, summary.rows
"""


def researchy_record(qid: int) -> dict:
    return {
        "id": qid,
        "question": f"question {qid}",
        "DocStream": [],
        "gpt4_decomposition": {
            "subquestions": [f"- sub-question {k} of {qid}" for k in range(SUBQUESTIONS)],
            "headers": [],
        },
    }


def make_inputs(root: Path, lines: int) -> tuple[Path, Path, int]:
    """A questions folder and a ratings file of `lines` (question, document) lines; its judgment count."""
    from generation.stages.questions import QuestionsStage

    questions = -(-lines // DOCUMENTS)
    records = root / "researchy.jsonl"
    records.write_text("".join(json.dumps(researchy_record(q)) + "\n" for q in range(questions)))
    QuestionsStage(None, root / "questions", [records]).run()
    rng = random.Random(0)
    ratings = root / "ratings.jsonl"
    with open(ratings, "w") as f:
        for n in range(lines):
            rating = [rng.choice((0, 0, 1, 2, 2, 3, 4, 4, 5)) for _ in range(SUBQUESTIONS)]
            f.write(
                json.dumps({"id": n // DOCUMENTS, "docid": f"{rng.getrandbits(128):032X}", "rating": rating}) + "\n"
            )
    return root / "questions", ratings, lines * SUBQUESTIONS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="20000,80000,160000")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-import"))
    args = parser.parse_args()
    before = load_line()
    table = Table(title=f"import-labels --format crux-ratings, one shard (load before {before})")
    for column in ("lines", "judgments", "wall s", "CPU s", "judgments / CPU s", "peak MB"):
        table.add_column(column, justify="right")
    sizes, peaks = [], []
    for lines in (int(x) for x in args.lines.split(",")):
        root = args.out / str(lines)
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        questions, ratings, rows = make_inputs(root, lines)
        wall, cpu, peak = timed(
            IMPORT.format(questions=str(questions), ratings=str(ratings), out=str(root / "j"), rows=rows)
        )
        sizes.append(lines)
        peaks.append(peak)
        table.add_row(f"{lines:,}", f"{rows:,}", f"{wall:.1f}", f"{cpu:.1f}", f"{rows / cpu:,.0f}", f"{peak:,.0f}")
    console = Console()
    console.print(table)
    if len(sizes) > 1:
        slope, intercept = np.polyfit(sizes, peaks, 1)
        console.print(
            f"peak MB = {intercept:,.0f} + {slope * 1e6:,.0f} per million ratings lines (load after {load_line()})"
        )


if __name__ == "__main__":
    main()
