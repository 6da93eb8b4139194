"""The release faults of scripts/hostile.py: writes through links (`build-release --out` over a release whose
files are links to a user's), and release corruptions for `validate` to catch, both those that leave the seals
broken and builder/standins/release_faults.py's re-sealed ones."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from builder.standins.release_faults import (
    DISTRIBUTION_FAULTS,
    GENERATE_FAULTS,
    data_file,
    failed_keys,
    rewrite,
    set_first,
)


def link_writes(w: Path, env: dict) -> list[tuple[str, str]]:
    """`build-release --out R` over a release whose card, plot, manifest or data folder is a link to a
    user's file or folder elsewhere: refused in one line, the user's file untouched, nothing written outside R."""
    from typer.testing import CliRunner

    from builder.cli.main import app

    synthetic, results = env["synthetic"], []
    build = [
        "build-release",
        "--profile",
        "paper",
        "--repo",
        "org/researchy-subq-judgments",
        "--rows-per-file",
        "3000",
        "--judgments",
        synthetic["judgments"],
    ]
    for folder in synthetic["questions"].values():
        build += ["--questions", folder]
    for name in ("README.md", "level_distribution.png", "manifest.json", "data"):
        case = w / "links" / name.replace(".", "_")
        release = case / "release"
        shutil.copytree(env["release"], release, symlinks=True)
        users = case / f"users-{name}"
        shutil.move(release / name, users)
        (release / name).symlink_to(users)
        before = {
            str(p): p.read_bytes() for p in ([users] if users.is_file() else sorted(users.rglob("*"))) if p.is_file()
        }
        result = CliRunner().invoke(app, [str(a) for a in [*build, "--out", release]])
        after = {
            str(p): p.read_bytes() for p in ([users] if users.is_file() else sorted(users.rglob("*"))) if p.is_file()
        }
        refused = (
            result.exit_code == 1 and "is a symbolic link" in result.output and "internal error" not in result.output
        )
        verdict = (
            "WRITTEN THROUGH"
            if after != before
            else "refused, untouched"
            if refused
            else f"exit {result.exit_code}: {' '.join(result.output.split())[:80]}"
        )
        results.append((f"build-release: {name} a link to a user's {'file' if users.is_file() else 'folder'}", verdict))
    return results


def links_out_of_the_release() -> dict:
    """Links that lead out of the release, which publish would upload as the release's own files."""

    def link_out(r: Path, name: str) -> None:
        outside = r.parent / f"{r.name}-outside-{name.replace('/', '_')}"
        shutil.move(r / name, outside)
        (r / name).symlink_to(outside)

    return {
        f"{name} a link out of the release": (lambda r, name=name: link_out(r, name))
        for name in ("README.md", "manifest.json", "data/questions")
    }


def corruptions(w: Path, env: dict) -> list[tuple[str, str]]:
    """The release corruptions: the first list edits files and leaves the seals broken (checksums, counts);
    release_faults' are re-sealed, so only a semantic check can catch them."""
    from builder.release.validate.folder import validate

    def judgment_file(r, level="level_2", split="train"):
        return data_file(r, f"judgments/{level}", split)

    def manifest_edit(r, change):
        data = json.loads((r / "manifest.json").read_text())
        change(data)
        (r / "manifest.json").write_text(json.dumps(data))

    def other_question(t):
        subq = t["subq_id"].to_pylist()
        foreign = next(s for s in subq if s.rsplit("-", 1)[0] != t["qid"][0].as_py())
        return set_first(t, "subq_id", foreign)

    faults = {
        "a judgment file deleted": lambda r: judgment_file(r).unlink(),
        "a judgment file truncated": lambda r: judgment_file(r).write_bytes(judgment_file(r).read_bytes()[:200]),
        "a judgment file replaced by a symlink": lambda r: (
            lambda p: (p.unlink(), p.symlink_to(judgment_file(r, "level_3")))
        )(judgment_file(r)),
        "level 7 in level_2": lambda r: rewrite(judgment_file(r), lambda t: set_first(t, "level", 7)),
        "level column retyped to int32": lambda r: rewrite(
            judgment_file(r),
            lambda t: t.set_column(t.schema.get_field_index("level"), "level", t["level"].cast(pa.int32())),
        ),
        "a duplicated pair": lambda r: rewrite(judgment_file(r), lambda t: pa.concat_tables([t, t.slice(0, 1)])),
        "a sub-question id of no sub-question": lambda r: rewrite(
            judgment_file(r), lambda t: set_first(t, "subq_id", "999999-0")
        ),
        "a judgment whose sub-question is another question's": lambda r: rewrite(judgment_file(r), other_question),
        "NaN in a float column": lambda r: rewrite(
            judgment_file(r), lambda t: set_first(t, "expected", float("nan"), pa.float32())
        ),
        "README.md deleted": lambda r: (r / "README.md").unlink(),
        "README YAML broken": lambda r: (r / "README.md").write_text(
            (r / "README.md").read_text().replace("configs:\n", "configs: [\n", 1)
        ),
        "num_examples off by one": lambda r: (r / "README.md").write_text(
            (r / "README.md").read_text().replace("num_examples: ", "num_examples: 1", 1)
        ),
        "manifest row count off": lambda r: manifest_edit(
            r, lambda m: m["stats"]["train"].__setitem__("judgments", m["stats"]["train"]["judgments"] + 1)
        ),
        "manifest model name changed": lambda r: manifest_edit(
            r, lambda m: m["models"].__setitem__("judge", "other/model")
        ),
        "a root loading script": lambda r: (r / "researchy-subq-judgments.py").write_text("import datasets\n"),
        "a partition folder level_9": lambda r: shutil.copytree(
            r / "data" / "judgments" / "level_2", r / "data" / "judgments" / "level_9"
        ),
        "a question in both train and test": lambda r: shutil.copy(
            sorted((r / "data" / "questions").glob("train-*.parquet"))[0],
            r / "data" / "questions" / "test-99999-of-99999.parquet",
        ),
    }
    faults.update(links_out_of_the_release())
    # (name, the fault applied to a release copy, the release it corrupts, the check that must fail)
    cases: list[tuple[str, Callable[[Path], object], Path, str | None]] = [
        (name, fault, env["release"], None) for name, fault in faults.items()
    ]
    cases += [
        (f"re-sealed: {name}", fault, env["release"], required)
        for name, (fault, _, required) in GENERATE_FAULTS.items()
    ]
    cases += [
        (f"re-sealed: {name}", fault, env["distribution_release"], required)
        for name, (fault, _, required) in DISTRIBUTION_FAULTS.items()
    ]
    results = []
    for name, fault, release, required in cases:
        copy = w / "corruptions" / "".join(c if c.isalnum() else "_" for c in name)
        shutil.copytree(release, copy, symlinks=True)
        try:
            fault(copy)
            report = validate(copy, load=False)
            caught = not report.ok and (required is None or required in failed_keys(report))
            verdict = "caught" if caught else "MISSED"
        except Exception as e:  # noqa: BLE001 - counted: validate must report, not raise
            verdict = f"traceback ({type(e).__name__})"
        results.append((name, verdict))
    return results
