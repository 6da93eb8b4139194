"""Shared by the bench_* scripts: run a snippet in a fresh interpreter and read back its wall time, CPU time
(user + system) and peak memory (the process's own high-water RSS, VmHWM)."""

from __future__ import annotations

import os
import subprocess
import sys

STEP = """
import resource, sys, time
from pathlib import Path
start = time.perf_counter()
{body}
elapsed = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so a child of a large parent would report the parent's
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024
print(f"RESULT {{elapsed:.2f}} {{usage.ru_utime + usage.ru_stime:.2f}} {{peak:.0f}}")
"""


def timed(body: str, env: dict | None = None) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MB) of `body` run in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", STEP.format(body=body)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    line = next((out for out in result.stdout.splitlines() if out.startswith("RESULT")), None)
    if line is None:
        raise SystemExit(f"step failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    if result.returncode != 0:  # measured to the end, then failed while exiting: say so, keep the numbers
        print(
            f"note: exit status {result.returncode} after the step finished: {result.stderr.strip()[-300:]}",
            file=sys.stderr,
        )
    _, wall, cpu, megabytes = line.split()
    return float(wall), float(cpu), float(megabytes)


def load_line() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())
