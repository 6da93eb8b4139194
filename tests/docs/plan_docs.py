"""The figures the docs show from `plan`, taken from the commands that make them: docs/benchmarks-planning.md's section
"GPU-hours for the paper's pairs" is pairs of blocks, a bash block running `researchy-subq plan` on the demo's output
and a text block of lines it prints; prose elsewhere that restates one of those figures is listed in PROSE.
tests/docs/test_plan_docs.py checks the blocks' shape and the prose against them; tests/end_to_end/test_demo_paste.py runs each
command after the demo and checks every shown line against what it prints."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "docs" / "benchmarks-planning.md"
SECTION = "## GPU-hours for the paper's pairs"
# (file, the sentence's figures): prose that restates what a block shows
PROSE = [
    ("docs/benchmarks.md", "5,132.4-17,727.5 H100-hours; 695.1-696.2 document-first on vLLM"),
    ("docs/judging.md", "pairs at 5,785.4 H100-hours in bf16"),
    ("docs/served-judge.md", "It is 5,785.4 H100-hours in bf16 and 5,132.4 in fp8 for the paper's pairs"),
    ("docs/pilot.md", "the paper's judge costs 5,785.4 GPU-hours for 24,316,320 pairs in bf16"),
    ("docs/judging.md", "an expected prefix-cache hit rate of 92.6%"),
    ("docs/performance.md", "`plan` shows the difference: 5,204.5 against 17,727.5 expected GPU-hours"),
]


def documented_runs(markdown: str | None = None) -> list[tuple[str, list[str]]]:
    """(the bash block, the lines of the text block after it) for each command of the section."""
    text = markdown if markdown is not None else BENCHMARKS.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    blocks = re.findall(r"```(bash|text)\n(.*?)```", section, re.S)
    runs = []
    for (kind, body), (next_kind, shown) in zip(blocks, blocks[1:]):
        if kind == "bash" and next_kind == "text":
            runs.append((body, shown.rstrip("\n").split("\n")))
    return runs


def figures(sentence: str) -> list[str]:
    return re.findall(r"\d[\d,]*\.\d+%?|\d{1,3}(?:,\d{3})+", sentence)


def check_prose(prose: list[tuple[str, str]] = PROSE, root: Path = ROOT) -> None:
    """Each prose sentence is in its file, and each of its figures is printed in a documented block."""
    shown = "\n".join(line for _, lines in documented_runs() for line in lines)
    for path, sentence in prose:
        assert sentence in " ".join((root / path).read_text().split()), f"{path}: no longer says {sentence!r}"
        for figure in figures(sentence):
            assert figure in shown, f"{path}: {figure} (in {sentence!r}) is in no block `plan` printed"


def check_against_plan(folder: Path, kit_bin: Path, env: dict | None = None) -> None:
    """Runs each documented command in `folder` (which holds the demo's `demo-output`), with the kit's executables
    first on PATH, and checks every line its block shows is a line it printed."""
    environment = dict(env if env is not None else os.environ)
    environment["PATH"] = f"{kit_bin}:{environment.get('PATH', '/usr/bin:/bin')}"
    runs = documented_runs()
    assert len(runs) >= 4, "the section's commands"
    for command, lines in runs:
        done = subprocess.run(["bash", "-c", command], cwd=folder, env=environment, capture_output=True, text=True)
        assert done.returncode == 0, f"$ {command}\n{done.stderr[-2000:]}"
        printed = set(done.stdout.splitlines())
        missing = [line for line in lines if line not in printed]
        assert not missing, f"$ {command}\nshown in docs/benchmarks-planning.md, not printed:\n" + "\n".join(missing)
