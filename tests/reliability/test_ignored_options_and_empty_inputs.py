"""An option that would be ignored is refused, and an input with nothing in it is an error naming
the file, never a shard recorded done with 0 rows. Real files (empty, blank-only, an empty .gz), the real CLI."""

import gzip
import json

import pytest
from typer.testing import CliRunner

from builder.cli.main import app
from generation.errors import InputError
from generation.profiles.profile import judge_overrides, judge_run_profile, load_profile
from generation.stages.corpus import CorpusStage
from generation.stages.import_labels import ImportLabelsStage
from generation.stages.questions import QuestionsStage
from tests.helpers import hub_record

runner = CliRunner()


@pytest.mark.parametrize("option", [["--endpoint", "http://127.0.0.1:9/v1"], ["--concurrency", "4"]])
def test_server_options_on_a_judge_that_is_not_openai_are_refused(tmp_path, option):
    folder = tmp_path / "in"
    folder.mkdir()
    result = runner.invoke(
        app,
        [
            "judge",
            "--profile",
            "demo",
            "--subquestions",
            str(folder),
            "--candidates",
            str(folder),
            "--index",
            str(folder),
            "--out",
            str(tmp_path / "out"),
            *option,
        ],
    )
    assert result.exit_code == 1  # before: exit 0 with the stand-in's labels under a new config hash
    assert (
        f"{option[0]} set the server of the `openai` judge backend, but profile 'demo' judges with the "
        "'bi-encoder' backend" in " ".join(result.output.split())
    )
    assert not (tmp_path / "out").exists()


def test_an_endpoint_with_the_openai_backend_is_taken():
    profile = judge_overrides(load_profile("demo"), backend="openai", endpoint="http://127.0.0.1:9/v1")
    assert profile.judge.backend == "openai" and profile.judge.openai.endpoint == "http://127.0.0.1:9/v1"
    with pytest.raises(ValueError, match="--endpoint and --concurrency set the server"):
        judge_overrides(load_profile("demo"), endpoint="http://127.0.0.1:9/v1", concurrency=2)


def test_a_judge_run_profile_is_named_for_its_backend_only_when_its_judge_section_changes():
    served, own = judge_run_profile(load_profile("paper"), backend="openai", endpoint="http://127.0.0.1:9/v1")
    assert own and served.name == "paper-openai" and served.judge.openai.endpoint == "http://127.0.0.1:9/v1"
    busier, own = judge_run_profile(served, concurrency=64)  # the server's concurrency is not in the config hash
    assert not own and busier.name == "paper-openai" and busier.judge.openai.concurrency == 64


EMPTY = {"empty": b"", "blank lines only": b"\n  \n\t\n"}


@pytest.mark.parametrize("name", ["documents.jsonl.gz", "documents.jsonl"])
@pytest.mark.parametrize("content", EMPTY.values(), ids=EMPTY.keys())
def test_a_corpus_file_with_no_line_is_an_error_naming_it(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    with pytest.raises(InputError, match="holds no lines") as error:
        CorpusStage(None, tmp_path / "corpus", [path]).run()
    assert str(path) in str(error.value)
    assert not list((tmp_path / "corpus").glob("_done/*.json"))  # before: a completed shard of 0 documents


def test_a_zero_byte_gz_corpus_file_too(tmp_path):
    path = tmp_path / "documents.json.gz"
    path.write_bytes(b"")
    result = runner.invoke(app, ["corpus", "--input", str(path), "--out", str(tmp_path / "corpus")])
    assert result.exit_code == 1, result.output
    assert "holds no lines" in result.output and "internal error" not in result.output


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
    root = tmp_path_factory.mktemp("questions")
    records = root / "researchy.jsonl"
    records.write_text(json.dumps(hub_record()) + "\n")
    QuestionsStage(None, root / "questions", [records]).run()
    return root / "questions"


@pytest.mark.parametrize("kind", ["crux-ratings", "qrels", "openai-batch"])
@pytest.mark.parametrize("content", EMPTY.values(), ids=EMPTY.keys())
@pytest.mark.parametrize("name", ["labels.jsonl", "labels.jsonl.gz"])
def test_a_label_file_with_no_line_is_an_error_naming_it(tmp_path, questions, kind, content, name):
    path = tmp_path / name
    path.write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    out = tmp_path / "imported"
    with pytest.raises(InputError, match="holds no label lines") as error:
        ImportLabelsStage(load_profile("paper"), out, questions, [path], kind, "someone").run()
    assert str(path) in str(error.value)
    assert not list(out.glob("_done/*.json")) and not list(out.glob("judgments-*.parquet"))
