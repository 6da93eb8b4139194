"""Progress as a batch job's log shows it (stderr to a file: plain lines at a fixed interval, a stall included) and
as a terminal shows it (a bar whose count and rate say what is true), each in a process of its own with stderr
where it would be."""

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from generation.progress import INTERVAL_ENV, rate_text
from generation.sample import RESEARCHY

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(
    r"^judge \(train\): (\d+)/6 pairs \((\d+)%\), (- |[0-9.,]+ )pairs/s, (?:ETA \d:\d\d:\d\d, )?"
    r"\d:\d\d:\d\d elapsed$"
)

STAGES = """
import time
from generation.progress import counter
with counter("stalled", total=10, unit="pairs"):
    time.sleep(0.9)
with counter("judge (train)", total=6, unit="pairs") as advance:
    for _ in range(6):
        time.sleep(0.3)
        advance(1)
with counter("bm25", unit="queries") as advance:
    advance(17)
with counter("validate", unit="checks"):  # as the demo runs validate: nothing counted, no total
    time.sleep(0.7)
"""


def env(**extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def run_to_file(code, tmp_path, **extra) -> list[str]:
    log = tmp_path / "stderr.log"
    with open(log, "w") as stderr:
        subprocess.run([sys.executable, "-c", code], stderr=stderr, env=env(**extra), check=True, timeout=120)
    return log.read_text().splitlines()


@pytest.mark.subprocess
def test_a_log_gets_a_plain_line_every_interval_and_one_at_the_end(tmp_path):
    lines = run_to_file(STAGES, tmp_path, **{INTERVAL_ENV: "0.2"})
    assert not any("\x1b" in line or "━" in line for line in lines), "no terminal codes or bars in a log"
    stalled = [line for line in lines if line.startswith("stalled: ")]
    assert len(stalled) >= 3 and all(line.startswith("stalled: 0/10 pairs (0%), - pairs/s, ") for line in stalled[:-1])
    assert stalled[-1].startswith("stalled: done, 0 pairs in 0:00:0")

    judge = [line for line in lines if line.startswith("judge (train): ") and "done" not in line]
    matches = [LINE.match(line) for line in judge]
    assert len(judge) >= 3 and all(matches), judge
    done = [int(m[1]) for m in matches]
    assert done == sorted(done) and done[-1] > done[0], "the count moves from line to line"
    assert all(int(m[2]) == round(100 * int(m[1]) / 6) for m in matches)
    assert any("ETA 0:00:0" in line for line in judge)
    assert re.fullmatch(
        r"judge \(train\): done, 6 pairs in 0:00:0\d \([0-9.]+ pairs/s\)",
        next(line for line in lines if line.startswith("judge (train): done")),
    )

    assert re.fullmatch(
        r"bm25: done, 17 queries in 0:00:00 \([0-9,.]+ queries/s\)",
        next(line for line in lines if line.startswith("bm25: ")),
    )
    validate = [line for line in lines if line.startswith("validate: ")]
    assert validate[0] == "validate: running, 0:00:00 elapsed" and re.fullmatch(
        r"validate: done in 0:00:0\d", validate[-1]
    )
    assert not any("checks/s" in line or "/?" in line for line in lines)


@pytest.mark.subprocess
def test_a_cli_stage_logs_its_progress_and_a_bad_interval_is_named(tmp_path):
    log = tmp_path / "stderr.log"
    with open(log, "w") as stderr:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "builder.cli.main",
                "questions",
                "--input",
                str(RESEARCHY["train"]),
                "--out",
                str(tmp_path / "questions"),
            ],
            stderr=stderr,
            stdout=subprocess.DEVNULL,
            env=env(**{INTERVAL_ENV: "soon"}),
            check=True,
            timeout=300,
        )
    lines = log.read_text().splitlines()
    assert lines[0] == f"notice: {INTERVAL_ENV}='soon' is not a number of seconds > 0; progress lines every 30 s"
    assert any(
        re.fullmatch(r"reading train questions: done, 17 records in 0:00:0\d \([0-9.,]+ records/s\)", line)
        for line in lines
    ), lines


@pytest.mark.subprocess
def test_a_terminal_gets_a_bar_without_unknown_totals_or_rounded_rates():
    code = STAGES.replace('"stalled", total=10', '"stalled", total=None')
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", code], stderr=follower, stdout=follower, env=env(TERM="xterm"))
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    assert process.wait(timeout=120) == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output.decode()).replace("\r", "\n")
    assert "━" in text and "6/6" in text and "pairs/s" in text
    assert "/?" not in text and "checks/s" not in text
    assert re.search(r"bm25 ━+ 17 (-|[0-9,.]+) queries/s", text), "a count without a total is the count alone"
    assert not re.search(r"(?<![0-9.])0 pairs/s", text), "a rate under 1 is shown, not rounded to 0"


def test_rates_keep_two_significant_digits_below_ten():
    assert rate_text(17 / 49, "questions") == "0.35 questions/s"
    assert rate_text(2.0, "pairs") == "2 pairs/s" and rate_text(9.94, "pairs") == "9.9 pairs/s"
    assert rate_text(11_898.4, "questions") == "11,898 questions/s"
    assert rate_text(None, "docs") == rate_text(0.0, "docs") == "- docs/s"
