"""The release and CI workflows keep the properties the release process relies on (their syntax and security
are checked by zizmor and check-jsonschema in `make check-workflows`)."""
from pathlib import Path

import yaml

GITHUB = Path(__file__).resolve().parents[1] / ".github"


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
    assert '--revision "$sha"' in steps(build) and '--shards-revision "$SHARDS_REVISION"' in steps(build)
    assert not any("cache" in str(s.get("uses", "")) or "cache" in s.get("with", {}) for job in release["jobs"].values()
                   for s in job["steps"]), "no caches in a release workflow (cache poisoning)"


def test_ci_caches_pip_and_dependabot_watches_the_actions():
    setup = next(s for s in load("workflows/ci.yml")["jobs"]["test"]["steps"] if "setup-python" in s.get("uses", ""))
    assert setup["with"]["cache"] == "pip" and setup["with"]["cache-dependency-path"] == "pyproject.toml"
    updates = load("dependabot.yml")["updates"]
    assert [(u["package-ecosystem"], u["directory"]) for u in updates] == [("github-actions", "/")]
    for workflow in (GITHUB / "workflows").glob("*.yml"):
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:
                    assert len(step["uses"].split("@")[1]) == 40, f"{workflow.name}: {step['uses']} is not SHA-pinned"
