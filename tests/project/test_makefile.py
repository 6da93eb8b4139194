"""First setup shows signs of life: each step of `make install` (and of the vLLM venv) says what it installs, and
pip runs at its normal verbosity (a line per package, a download bar on a terminal), never --quiet. Read from
`make -n`, the commands make would run for a venv that does not exist yet."""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("variable, steps", [("VENV", 4), ("VLLM_VENV", 5)])
def test_each_setup_step_says_what_it_installs_and_pip_is_not_quiet(tmp_path, variable, steps):
    venv = tmp_path / "venv"
    # under `make test` (CI) the outer make's -w would add "Entering/Leaving directory" lines
    lines = subprocess.run(
        ["make", "-n", "--no-print-directory", f"{venv}/.installed", f"{variable}={venv}"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    announced = [re.match(r'echo "==> \[(\d)/(\d)\] ' + re.escape(str(venv)) + r": \S", line) for line in lines]
    assert [(int(m[1]), int(m[2])) for m in announced if m] == [(i, steps) for i in range(1, steps + 1)]
    pip = [i for i, line in enumerate(lines) if " -m pip " in line]
    assert len(pip) == steps - 1
    for i in pip:
        assert announced[i - 1], f"{lines[i]!r} runs unannounced"
        assert not re.search(r"\s(--quiet|-q+)(\s|$)", lines[i]), lines[i]
    if variable == "VENV":  # and how to run what it installed
        assert (
            lines[-1] == f'echo "==> {venv} is ready: run its commands as {venv}/bin/researchy-subq, or activate it '
            f'(. {venv}/bin/activate)"'
        )
