"""The training surfaces' writers held to build-release's bar: `texts`, `training-files` and
`train` write no file through a link out of their folder (refused with one line naming the link, as
generation/storage/atomic_files.py `refuse_links` refuses it for build-release), and a `training-files` killed mid-run
leaves an earlier run's files as they were, and no temporary file behind once it runs again."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from builder.training.files import write_training_files
from builder.training.texts import write_texts
from generation.storage.atomic_files import LinkRefused
from tests.builder.training.test_texts import SYNTHETIC_RELEASE, copy  # noqa: F401 - test_texts's release (conftest.py builds it) and ClueWeb22 copy


@pytest.fixture(scope="module")
def texts(tmp_path_factory, release, copy):  # noqa: F811
    out = tmp_path_factory.mktemp("writers") / "texts"
    write_texts(release, copy["root"], out)
    return out


@pytest.fixture
def users_folder(tmp_path):
    """A folder of the user's outside every output, with a file the kit must never overwrite."""
    folder = tmp_path / "users"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("the user's own file\n")
    (folder / "train.parquet").write_text("the user's own file\n")
    (folder / "texts-00000-of-00001.parquet").write_text("the user's own file\n")
    return folder


def untouched(folder) -> bool:
    return {p.name: p.read_text() for p in folder.iterdir()} == {
        name: "the user's own file\n" for name in ("corpus.jsonl", "train.parquet", "texts-00000-of-00001.parquet")
    }


@pytest.mark.parametrize("subfolder", ["beir", "sentence-transformers"])
def test_training_files_refuses_a_subfolder_that_links_out(release, texts, tmp_path, users_folder, subfolder):  # noqa: F811
    out = tmp_path / "training"
    out.mkdir()
    (out / subfolder).symlink_to(users_folder)
    with pytest.raises(LinkRefused, match=f"{subfolder}: is a symbolic link"):
        write_training_files(release, texts, out)
    assert untouched(users_folder)


def test_texts_refuses_a_file_that_links_out(release, copy, tmp_path, users_folder):  # noqa: F811
    out = tmp_path / "texts"
    out.mkdir()
    (out / "texts-00000-of-00001.parquet").symlink_to(users_folder / "texts-00000-of-00001.parquet")
    with pytest.raises(LinkRefused, match="texts-00000-of-00001.parquet: is a symbolic link"):
        write_texts(release, copy["root"], out)
    assert untouched(users_folder)


def test_train_refuses_a_model_folder_holding_a_link_before_training(release, texts, tmp_path, users_folder):  # noqa: F811
    from builder.cli.main import app

    out = tmp_path / "model"
    out.mkdir()
    (out / "1_Pooling").symlink_to(users_folder)
    result = CliRunner().invoke(app, ["train", str(release), "--texts", str(texts), "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "1_Pooling: is a symbolic link" in result.output and "internal error" not in result.output
    assert untouched(users_folder) and sorted(p.name for p in out.iterdir()) == ["1_Pooling"]


KILL_DURING = {
    # the texts lookup, killed after its first batch went into the temporary SQLite file (its -journal open)
    "lookup": """
        original = files.sqlite_lookup
        def sqlite_lookup(path, create, rows, earlier=None):
            def killed_after_one(rows):
                for batch in rows:
                    yield batch
                    os.kill(os.getpid(), signal.SIGKILL)
            return original(path, create, killed_after_one(rows), earlier)
        files.sqlite_lookup = sqlite_lookup
        progress = None
    """,
    # the rows, killed once the first batch went into the temporary Parquet and JSON-lines files
    "rows": """
        def progress(n):
            os.kill(os.getpid(), signal.SIGKILL)
    """,
}


@pytest.mark.parametrize("when", list(KILL_DURING))
def test_a_killed_training_files_leaves_an_earlier_run_as_it_was_and_no_temporary_file_once_rerun(
    release, texts, tmp_path, when
):  # noqa: F811
    out = tmp_path / "training"
    write_training_files(release, texts, out, negatives=2, formats=("sentence-transformers",))
    earlier = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    script = (
        textwrap.dedent(
            """
        import os, signal, sys
        from pathlib import Path
        import builder.training.files as files
        """
        )
        + textwrap.dedent(KILL_DURING[when])
        + textwrap.dedent(
            f"""
        files.write_training_files(Path({str(release)!r}), Path({str(texts)!r}), Path({str(out)!r}), progress=progress)
        """
        )
    )
    if when == "lookup":
        for lookup in out.glob("_lookup-*.sqlite"):
            lookup.unlink()  # else the earlier run's are carried over, and nothing is built to be killed in
            del earlier[lookup.name]
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == earlier
    left = [p for p in tmp_path.rglob("*") if ".tmp" in p.name]
    assert left, "the kill left nothing to clean: the test would prove nothing"
    if when == "lookup":
        assert any(p.name.endswith("-journal") for p in left)
    write_training_files(release, texts, out)
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name or p.name.endswith("-journal")]
    clean = tmp_path / "clean"
    write_training_files(release, texts, clean)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == sorted(
        str(p.relative_to(clean)) for p in clean.rglob("*")
    )
    assert os.path.getsize(out / "sentence-transformers" / "train.parquet") == os.path.getsize(
        clean / "sentence-transformers" / "train.parquet"
    )


def test_train_keeps_its_work_folder_out_of_the_model_folder(release, texts, tmp_path):  # noqa: F811
    from builder.cli.main import app

    out = tmp_path / "model"
    result = CliRunner().invoke(
        app, ["train", str(release), "--texts", str(texts), "--out", str(out), "--work", str(out / "work")]
    )
    assert result.exit_code == 1 and "is inside the model folder" in result.output, result.output
    assert not out.exists()


def test_a_failed_texts_run_leaves_no_temporary_missing_list(release, copy, tmp_path):  # noqa: F811
    """A copy whose judged documents' file is damaged half-way: texts fails naming it, and leaves neither its
    temporary texts shard nor its temporary missing list (it used to leave `.missing-*.tsv.tmp-*` each time)."""
    import shutil

    from generation.errors import InputError

    damaged = tmp_path / "copy"
    shutil.copytree(copy["root"], damaged)
    data = damaged / "txt/en/en00/en0000/en0000-00.json.gz"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    for offsets in damaged.rglob("*.offset"):
        offsets.unlink()  # streamed: the damage is found after some documents were read
    out = tmp_path / "texts"
    with pytest.raises(InputError, match="en0000-00.json.gz"):
        write_texts(release, damaged, out)
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name]


def test_every_stage_refuses_a_link_in_its_output_folder_before_writing(tmp_path, small_pipeline, users_folder):
    """The stage template's shards (here the pool's) share the writers' guard: `_locks/` a link to a user's folder
    is refused before the lock is written through it."""
    from generation.stages.pool import PoolStage

    out = tmp_path / "candidates"
    out.mkdir()
    (out / "_locks").symlink_to(users_folder)
    runs = small_pipeline["candidates"].parent / "runs"
    with pytest.raises(LinkRefused, match="_locks: is a symbolic link"):
        PoolStage(small_pipeline["profile"], out, small_pipeline["questions"], runs, small_pipeline["index"].parent /
                   "corpus").run()  # fmt: skip
    assert untouched(users_folder)


def test_the_swap_of_a_staged_folder_is_one_atomic_exchange(tmp_path, monkeypatch):
    """On Linux the new run and the earlier one trade places in one `renameat2(RENAME_EXCHANGE)`: no moment without
    OUT. Were the exchange missing, the two renames still give the same result."""
    from generation.storage import atomic_files as storage

    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("earlier run")
    renames = []
    monkeypatch.setattr(storage.os, "rename", lambda a, b: renames.append((a, b)) or os.replace(a, b))
    with storage.staged_folder(out) as stage:
        (stage / "new.txt").write_text("new run")
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert renames == [], "the swap was an exchange, not two renames"
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "the earlier run removed"

    monkeypatch.setattr(storage, "exchange", lambda first, second: False)
    with storage.staged_folder(out) as stage:
        (stage / "third.txt").write_text("third run")
    assert sorted(p.name for p in out.iterdir()) == ["third.txt"]
    assert len(renames) == 2, "without the exchange: OUT aside, the new folder in"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
