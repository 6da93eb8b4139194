"""The kit as a library: build the wheel from a copy of the source tree, install it (no editable install, no
source tree on the path) into a fresh venv, and build and validate a release there. The venv reaches the
dependencies through a path entry to this interpreter's site-packages, added after the wheel is installed;
entries of a path added that way are not processed, so this project's editable install stays out of sight."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

# pip builds the wheel and a fresh venv runs it
pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(
    ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", "demo-output", ".pytest_cache"
)


def run(args, cwd, env=None):
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{args}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=SKIP)
    # An isolated build, as `python -m build` and CI do: the build requirements come from pyproject, not this venv.
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", tmp / "dist", source], cwd=tmp)
    wheel = next((tmp / "dist").glob("researchy_subq_judgments-*.whl"))
    venv = tmp / "venv"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no source tree, no egg-info, on the path
    env.update(HF_HOME=str(tmp / "hf"), HF_HUB_OFFLINE="1")
    run([sys.executable, "-m", "venv", venv], cwd=tmp, env=env)
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel], cwd=tmp, env=env)
    purelib = Path(
        run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp, env=env).split()[0]
    )
    assert (purelib / "builder" / "release" / "assemble" / "cards" / "dataset_card.md").is_file(), (
        "the wheel was not installed into the venv"
    )
    (purelib / "shared-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return {"wheel": wheel, "venv": venv, "python": python, "purelib": purelib, "env": env, "work": tmp / "work"}


def test_wheel_carries_the_card_template(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert "builder/release/assemble/cards/dataset_card.md" in names
    assert not any(n.startswith(("tests/", "scripts/", "expectations/")) for n in names)


def test_installed_wheel_builds_and_validates_a_release(installed):
    work, python, env = installed["work"], installed["python"], installed["env"]
    work.mkdir()
    where = run(
        [python, "-c", "import builder, generation; print(builder.__file__); print(generation.__file__)"],
        cwd=work,
        env=env,
    )
    assert all(line.startswith(str(installed["purelib"])) for line in where.split()), where
    run(
        [
            python,
            "-c",
            "from pathlib import Path; from builder.standins.synthetic import synthesize; "
            "synthesize(Path('inputs'), subquestions=200, judgments=3000, test_share=0.25, shards=1, seed=2)",
        ],
        cwd=work,
        env=env,
    )
    cli = installed["venv"] / "bin" / "researchy-subq"
    run(
        [
            cli,
            "build-release",
            "--profile",
            "paper",
            "--judgments",
            "inputs/judgments",
            "--questions",
            "inputs/questions/train",
            "--questions",
            "inputs/questions/test",
        ],
        cwd=work,
        env=env,
    )
    release = work / "researchy-subq-judgments"  # the default output folder
    assert "## Relevance scale" in (release / "README.md").read_text()
    out = run([cli, "validate", release], cwd=work, env=env)
    assert "checks passed" in out
    # As docs/dataset.md says: by the folder's name, from its parent.
    out = run(
        [python, "-c", 'from datasets import load_dataset; print(load_dataset("researchy-subq-judgments", "qrels"))'],
        cwd=work,
        env=env,
    )
    assert "num_rows" in out and "query-id" in out
