"""No release writer writes through a symbolic link or outside the release folder, `validate`
refuses links out of the release, and a release missing a data file or holding a manifest that is not JSON is one
line, never an internal error. Real symlinks, real releases, the real CLI."""

import shutil

import pytest
from typer.testing import CliRunner

from builder.cli.main import app
from builder.release.validate.folder import validate
from generation.storage.atomic_files import LinkRefused, refuse_links, replace_file

runner = CliRunner()


@pytest.fixture(scope="module")
def built(synthetic_release):
    options = dict(subquestions=80, judgments=900, test_share=0.2, shards=1, seed=3)
    release, inputs = synthetic_release("links", repo="org/rsj", rows_per_file=400, **options)
    return inputs, release


def build_args(inputs, out):
    args = [
        "build-release",
        "--profile",
        "paper",
        "--repo",
        "org/rsj",
        "--out",
        str(out),
        "--judgments",
        str(inputs["judgments"]),
    ]
    for folder in inputs["questions"].values():
        args += ["--questions", str(folder)]
    return args


def copy_of(release, tmp_path):
    return shutil.copytree(release, tmp_path / "release", symlinks=True)


@pytest.mark.parametrize("name", ["README.md", "level_distribution.png", "manifest.json"])
def test_build_release_refuses_a_root_file_that_is_a_link(built, tmp_path, name):
    inputs, release = built
    out = copy_of(release, tmp_path)
    users_file = tmp_path / "users-notes.txt"
    users_file.write_text("my own notes\n")
    (out / name).unlink()
    (out / name).symlink_to(users_file)
    result = runner.invoke(app, build_args(inputs, out))
    assert result.exit_code == 1, result.output
    assert users_file.read_text() == "my own notes\n"  # before the fix: the card or plot was written into it
    assert (out / name).is_symlink()
    assert f"{out / name}: is a symbolic link" in result.output
    assert "internal error" not in result.output


def test_build_release_refuses_a_data_folder_that_is_a_link(built, tmp_path):
    inputs, release = built
    out = copy_of(release, tmp_path)
    elsewhere = shutil.move(out / "data", tmp_path / "elsewhere")
    (out / "data").symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.rglob("*"))
    result = runner.invoke(app, build_args(inputs, out))
    assert result.exit_code == 1, result.output
    assert "is a symbolic link" in result.output and "internal error" not in result.output
    assert sorted(p.name for p in elsewhere.rglob("*")) == before


def test_a_rebuild_over_its_own_folder_still_works_and_leaves_no_temporary_file(built, tmp_path):
    inputs, release = built
    out = copy_of(release, tmp_path)
    result = runner.invoke(app, build_args(inputs, out))
    assert result.exit_code == 0, result.output
    assert not [p for p in out.iterdir() if ".tmp" in p.name]
    assert validate(out, load=False).ok


def test_replace_file_never_writes_through_a_link_nor_out_of_the_folder(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    target = tmp_path / "target"
    target.write_text("kept")
    (folder / "card.md").symlink_to(target)
    with pytest.raises(LinkRefused, match="card.md: is a symbolic link"):
        replace_file(folder, "card.md", lambda tmp: tmp.write_text("new"))
    with pytest.raises(LinkRefused, match="leads out of"):
        refuse_links(folder, "../target")
    assert target.read_text() == "kept" and not [p for p in folder.iterdir() if ".tmp" in p.name]
    replace_file(folder, "other.md", lambda tmp: tmp.write_text("new"))
    assert (folder / "other.md").read_text() == "new"


@pytest.mark.parametrize("name", ["README.md", "manifest.json"])
def test_validate_refuses_a_link_out_of_the_release(built, tmp_path, name):
    _, release = built
    copy = copy_of(release, tmp_path)
    outside = shutil.move(copy / name, tmp_path / f"outside-{name}")
    (copy / name).symlink_to(outside)  # same content: every other check passes
    report = validate(copy, load=False)
    failed = [c for c in report.checks if not c.ok]
    assert [c.name for c in failed] == ["no file or folder of the release is a link that leads out of it"]
    assert failed[0].examples == [f"{name}: a link to {outside}, outside the release"]


@pytest.mark.slow
def test_validate_and_publish_on_a_release_missing_a_data_file_say_so_in_one_line(built, tmp_path):
    _, release = built
    copy = copy_of(release, tmp_path)
    missing = sorted((copy / "data" / "judgments").rglob("train-*.parquet"))[0]
    missing.unlink()
    for args in (["validate", str(copy)], ["publish", str(copy), "--repo", "org/rsj"]):
        result = runner.invoke(app, args)  # validate loads every config (the default): datasets raised IndexError-bait
        assert result.exit_code == 1, result.output
        assert "internal error" not in result.output, result.output
        assert "error:" in result.output
    report = validate(copy, load=True)
    manifest_check = next(c for c in report.checks if c.name.startswith("manifest.json lists"))
    assert f"{missing.relative_to(copy)}: listed but missing" in manifest_check.examples


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_publish_on_a_manifest_that_is_not_json_is_one_line(built, tmp_path, text):
    _, release = built
    copy = copy_of(release, tmp_path)
    (copy / "manifest.json").write_text(text)
    result = runner.invoke(app, ["publish", str(copy), "--repo", "org/rsj", "--yes"])
    assert result.exit_code == 1
    assert "internal error" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {copy / 'manifest.json'}: not ")


def test_simulate_out_refuses_a_result_file_that_is_a_link(built, tmp_path):
    _, release = built
    out = tmp_path / "simulation"
    out.mkdir()
    users_file = tmp_path / "users.json"
    users_file.write_text("{}")
    (out / "simulation.json").symlink_to(users_file)
    result = runner.invoke(
        app, ["simulate", str(release), "--out", str(out), "--policies", "random", "--budgets", "0.5", "--repeats", "1"]
    )
    assert result.exit_code == 1 and "simulation.json: is a symbolic link" in result.output, result.output
    assert users_file.read_text() == "{}"
