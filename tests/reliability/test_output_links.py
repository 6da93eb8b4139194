"""One link guard (generation/storage/atomic_files.py `refuse_links`) for every writer and every output option: the test
walks every command of the real CLI, so a path option that is neither a declared input nor made by `output_option` fails
here; a link at each output option is refused, naming the option and the path, before anything is written; and the
library's writers (the questions stage's Parquet and rejects) refuse it when called from Python."""

import json

import pytest
import typer.main

from builder.cli.main import app
from builder.cli.support import OUTPUT_GUARDS
from generation.stages.questions import QuestionsStage
from generation.storage.atomic_files import LinkRefused
from tests.helpers import assert_one_line_error, cli_one_line, hub_record

# every path a command only reads, by command: any other path option must be an `output_option`
INPUTS = {
    "questions": {"--input"},
    "corpus": {"--input"},
    "index": {"--corpus"},
    "retrieve": {"--questions", "--index"},
    "rerank": {"--questions", "--runs", "--index"},
    "pool": {"--questions", "--runs", "--corpus"},
    "judge": {"--subquestions", "--candidates", "--index", "--import-batch", "--batch-manifest"},
    "import-labels": {"files", "--subquestions", "--corpus"},
    "plan": {"--subquestions", "--candidates", "--index", "--calibration"},
    "slurm": {"--from-plan", "--venv"},
    "build-release": {"--judgments", "--questions", "--runs", "--agreement", "--pilot"},
    "validate": {"release", "--expect", "--against"},
    "publish": {"release"},
    "agreement": {"--judgments", "--against", "--runs"},
    "simulate": {"release", "--index"},
    "evaluate": {"release", "--run"},
    "pilot": {"--subquestions", "--candidates", "--index"},
    "texts": {"release", "--from"},
    "training-files": {"release", "--texts"},
    "train": {"release", "--texts"},
}


def path_options():
    """(command, option name, guard kind or None) for every option or argument of every command that takes a path."""
    for name, command in typer.main.get_command(app).commands.items():
        for param in command.params:
            if "Path" not in str(param.type_descriptor.annotation):
                continue
            guard = getattr(param.callback, "__wrapped__", None)
            kind = next((k for k, g in OUTPUT_GUARDS.items() if g is guard), None)
            yield name, (param.opts or [param.name])[0], kind


OUTPUTS = [(command, option, kind) for command, option, kind in path_options() if kind is not None]


def test_every_path_option_is_a_declared_input_or_a_guarded_output():
    undeclared = [
        f"{command} {option}"
        for command, option, kind in path_options()
        if kind is None and option not in INPUTS.get(command, ())
    ]
    assert not undeclared, f"make these with builder/cli/support.py output_option, or add them to INPUTS: {undeclared}"
    guarded_inputs = [f"{c} {o}" for c, o, kind in path_options() if kind is not None and o in INPUTS.get(c, ())]
    assert not guarded_inputs
    assert len(OUTPUTS) >= 26 and {c for c, _, _ in OUTPUTS} >= {"questions", "demo", "plan", "train", "pilot"}


def everything_under(folder):
    """Every path under `folder`, links not followed, with a file's bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() and not p.is_symlink() else None
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("command, option, kind", OUTPUTS, ids=[f"{c} {o}" for c, o, _ in OUTPUTS])
def test_a_link_at_every_output_option_is_refused_naming_it_before_anything_is_written(tmp_path, command, option, kind):
    users = tmp_path / "users"
    users.mkdir()
    (users / "notes.txt").write_text("the user's own text\n")
    if kind == "file":
        given = tmp_path / "out.json"
        given.symlink_to(users / "notes.txt")
        expected = f"{option} {given}: is a symbolic link (to {users / 'notes.txt'}); researchy-subq writes no file "
        expected += "through a link: remove the link, or choose another file"
    else:
        given = tmp_path / "out"
        given.mkdir()
        (given / "inside").symlink_to(users)
        expected = f"{option} {given}: {given / 'inside'}: is a symbolic link (to {users}); researchy-subq writes "
        expected += "no file through a link: remove the link, or choose another folder"
    before = everything_under(tmp_path)
    code, output = cli_one_line(command, option, given)
    assert_one_line_error(code, output, expected)
    assert code == 1 and output.startswith("error: ")
    assert everything_under(tmp_path) == before


def test_questions_refuses_a_rejects_link_to_a_users_file_and_writes_nothing(tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(hub_record()) + "\n{not json\n")
    users = tmp_path / "users-notes.txt"
    users.write_text("the user's own text\n")
    rejects = tmp_path / "rej.jsonl"
    rejects.symlink_to(users)
    out = tmp_path / "q"
    code, output = cli_one_line("questions", "--input", records, "--out", out, "--rejects", rejects)
    assert_one_line_error(code, output, f"--rejects {rejects}: is a symbolic link")
    assert users.read_text() == "the user's own text\n"  # before: the malformed record was written over it
    assert not out.exists()
    with pytest.raises(LinkRefused, match="rej.jsonl: is a symbolic link"):  # the library, called from Python
        QuestionsStage(None, out, [records], rejects=rejects).run()
    assert users.read_text() == "the user's own text\n" and not out.exists()
    rejects.unlink()
    code, output = cli_one_line("questions", "--input", records, "--out", out, "--rejects", rejects)
    assert code == 0 and "1 malformed records" in output, output
    assert json.loads(rejects.read_text())["line"] == 2


def test_questions_refuses_a_table_that_links_to_a_users_file(tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(hub_record()) + "\n")
    users = tmp_path / "users.parquet"
    users.write_text("the user's own file\n")
    out = tmp_path / "q"
    out.mkdir()
    (out / "questions.parquet").symlink_to(users)
    code, output = cli_one_line("questions", "--input", records, "--out", out)
    assert_one_line_error(code, output, f"--out {out}: {out / 'questions.parquet'}: is a symbolic link")
    with pytest.raises(LinkRefused, match="questions.parquet: is a symbolic link"):
        QuestionsStage(None, out, [records]).run()
    assert users.read_text() == "the user's own file\n" and sorted(p.name for p in out.iterdir()) == [
        "questions.parquet"
    ]
