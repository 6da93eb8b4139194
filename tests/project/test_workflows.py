"""The release and CI workflows keep the properties the release process relies on (their syntax and security
are checked by zizmor and check-jsonschema in `make check-workflows`)."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / ".github"


def load(name: str) -> dict:
    return yaml.safe_load((GITHUB / name).read_text())


def steps(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) + str(s.get("uses", "")) for s in job["steps"])


def test_release_is_serialised_installs_once_and_records_the_shards_revision():
    release = load("workflows/release.yml")
    assert release["concurrency"]["cancel-in-progress"] is False and "group" in release["concurrency"]
    build, publish = release["jobs"]["build"], release["jobs"]["publish"]
    assert publish["needs"] == "build"
    assert steps(build).count("make install") == 1 and "make install" not in steps(publish)
    assert "pip install --quiet --no-deps dist/*.whl" in steps(publish) and "-c dist/constraints.txt" in steps(publish)
    assert "torch" not in steps(publish) and "pyserini" not in steps(publish).lower()
    # the publish job installs only dependencies of the kit itself (pyproject's), nothing it no longer uses
    install = next(s["run"] for s in publish["steps"] if "-c dist/constraints.txt" in str(s.get("run", "")))
    named = install.split("-c dist/constraints.txt", 1)[1].replace("\\", " ").split()
    with open(ROOT / "pyproject.toml", "rb") as f:
        required = {re.split(r"[<>=!~\[ ]", d)[0].lower() for d in tomllib.load(f)["project"]["dependencies"]}
    assert named and {n.lower() for n in named} <= required, set(named) - required
    assert '--revision "$sha"' in steps(build) and '--shards-revision "$SHARDS_REVISION"' in steps(build)
    assert not any(
        "cache" in str(s.get("uses", "")) or "cache" in s.get("with", {})
        for job in release["jobs"].values()
        for s in job["steps"]
    ), "no caches in a release workflow (cache poisoning)"


def test_ci_caches_only_what_pip_writes_and_dependabot_watches_the_actions():
    setup = next(s for s in load("workflows/ci.yml")["jobs"]["test"]["steps"] if "setup-python" in s.get("uses", ""))
    pip = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("PIP :="))
    pip_keeps_a_cache = "--no-cache-dir" not in pip
    # setup-python's pip cache is pip's download folder: only worth saving (and only present, else its post step
    # fails) when pip writes one, and then keyed on the pinned lists the Makefile installs from.
    assert ("cache" in setup.get("with", {})) == pip_keeps_a_cache
    if pip_keeps_a_cache:
        assert setup["with"]["cache"] == "pip" and "constraints" in setup["with"]["cache-dependency-path"]
    updates = load("dependabot.yml")["updates"]
    assert [(u["package-ecosystem"], u["directory"]) for u in updates] == [("github-actions", "/")]
    for workflow in (GITHUB / "workflows").glob("*.yml"):
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:
                    assert len(step["uses"].split("@")[1]) == 40, f"{workflow.name}: {step['uses']} is not SHA-pinned"


def test_the_fast_lane_leaves_out_every_marker_but_vllm():
    """`make test-fast` leaves out each kind of test pyproject.toml marks as slow to start or run (a new marker not
    added to the Makefile's FAST_TESTS would slip its tests into the lane); the vLLM tests skip themselves outside
    .venv-vllm."""
    expression = next(
        line.split(":=", 1)[1] for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("FAST_TESTS")
    )
    left_out = set(re.findall(r"\w+", expression)) - {"not", "or"}
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert {marker.split(":", 1)[0] for marker in markers} - left_out == {"vllm"}
    assert expression.strip().startswith("not (") and " and " not in expression
