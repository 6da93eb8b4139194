import dataclasses

import pyarrow.parquet as pq
from typer.testing import CliRunner

from builder.cli.stages import app
from tests.helpers import hub_record

runner = CliRunner()


def test_questions_command(tmp_path, write_jsonl):
    path = write_jsonl([hub_record("1"), hub_record("2")])
    result = runner.invoke(app, ["questions", "--input", str(path), "--out", str(tmp_path / "out"), "--split", "test"])
    assert result.exit_code == 0, result.output
    assert "2 questions, 14 sub-questions" in result.output
    assert pq.read_table(tmp_path / "out" / "questions.parquet").column("split").to_pylist() == ["test", "test"]


def test_questions_command_stops_on_malformed_record(tmp_path, write_jsonl):
    bad = hub_record("2")
    del bad["question"]
    path = write_jsonl([hub_record("1"), bad])
    result = runner.invoke(app, ["questions", "--input", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"{path}:2 (id 2): field 'question': missing" in " ".join(result.output.split())
    result = runner.invoke(
        app,
        [
            "questions",
            "--input",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--rejects",
            str(tmp_path / "rejects.jsonl"),
        ],
    )
    assert result.exit_code == 0 and "1 malformed records" in result.output


def test_profiles_command_reports_bad_profile(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("name: p\n")
    result = runner.invoke(app, ["profiles", str(bad)])
    assert result.exit_code == 1 and "key description" in result.output


def test_stage_commands_on_the_sample(tmp_path, sample_index, sample_questions):
    runs = tmp_path / "runs"
    retrieve = ["retrieve", "--profile", "demo", "--questions", str(sample_questions), "--index"]
    retrieve += [str(sample_index / "index"), "--out", str(runs), "--shard", "1", "--num-shards", "2"]
    result = runner.invoke(app, retrieve)
    assert result.exit_code == 0, result.output
    assert "bm25:" in result.output and (runs / "bm25-00001-of-00002.trec").exists()
    again = runner.invoke(app, retrieve)
    assert "skipped" in again.output
    bad = runner.invoke(
        app,
        [
            "retrieve",
            "--profile",
            "demo",
            "--questions",
            str(sample_questions),
            "--index",
            str(sample_index / "index"),
            "--out",
            str(runs),
            "--shard",
            "2",
            "--num-shards",
            "2",
        ],
    )
    assert bad.exit_code == 1 and "need 0 <= shard < num-shards" in bad.output
    missing = runner.invoke(
        app,
        [
            "pool",
            "--profile",
            "demo",
            "--questions",
            str(sample_questions),
            "--runs",
            str(runs),
            "--corpus",
            str(sample_index / "corpus"),
            "--out",
            str(tmp_path / "pool"),
        ],
    )
    assert missing.exit_code == 1 and "1 of 2 bm25 shards are not complete" in " ".join(missing.output.split())


def test_one_entry_with_help_on_every_option_and_a_version():
    import typer.main

    from builder.cli.main import app as entry
    from generation import __version__

    top = typer.main.get_command(entry)
    assert {
        "questions",
        "judge",
        "build-release",
        "validate",
        "publish",
        "simulate",
        "evaluate",
        "agreement",
        "demo",
    } <= set(top.commands)
    for name, command in top.commands.items():
        for param in command.params:
            if param.name != "help":
                assert getattr(param, "help", None), f"{name} {param.name} has no help text"
    release_args = {
        name: [p.name for p in top.commands[name].params if p.param_type_name == "argument"]
        for name in ("validate", "publish", "simulate", "evaluate")
    }
    assert release_args == {name: ["release"] for name in release_args}, "one way to name a release folder"
    runner_ = CliRunner()
    assert __version__ in runner_.invoke(entry, ["--version"]).output
    assert runner_.invoke(entry, ["validate", "-h"]).exit_code == 0
    assert "[low, high]" in runner_.invoke(entry, ["validate", "-h"]).output, "no markup eats the brackets"
    assert "topk-bernoulli|" in runner_.invoke(entry, ["judge", "-h"]).output.replace("\n", "").replace(" ", "")


def test_the_cli_sits_on_top_of_the_import_graph():
    """No library module imports a CLI module, and generation never imports builder."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    cli_modules = {
        "builder.cli.stages",
        "builder.cli.support",
        "builder.cli.release",
        "builder.cli.analysis",
        "builder.cli.main",
        "builder.cli.import_labels",
        "builder.cli.pilot",
        "builder.cli.judge",
        "builder.cli.retriever",
        "builder.cli.reference",
        "builder.cli.planning",
        "builder.cli.shared_options",
        "builder.cli.script",  # the commands' error lines for the examples: a CLI module too
    }
    for path in [*root.glob("generation/**/*.py"), *root.glob("builder/**/*.py")]:
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        if module not in cli_modules:
            assert not imported & cli_modules, f"{module} imports a CLI module"
        if module.startswith("generation"):
            assert not any(m == "builder" or m.startswith("builder.") for m in imported), f"{module} imports builder"


def test_judge_options_choose_one_variant_from_the_table_and_refuse_batch_mixed_with_another(tmp_path):
    from builder.cli.judge import JUDGE_VARIANTS, JudgeOptions
    from builder.command_options import command_options
    from generation.profiles.profile import load_profile
    from generation.storage.shards import Shard

    given = dict(zip(("subquestions", "candidates", "index"), (tmp_path / "s", tmp_path / "c", tmp_path / "i")))
    base = JudgeOptions(profile=load_profile("paper"), out=tmp_path / "j", shard=Shard(0, 1), **given)
    names = [o.name for o in command_options(JudgeOptions)]
    assert names[:2] == ["budget", "policy"] and names[-1] == "batch_manifest"

    def chosen(**changed):
        return next(v.name for v in JUDGE_VARIANTS if v.chosen(dataclasses.replace(base, **changed)))

    assert chosen() == "full judge" and chosen(budget=0.5) == "budgeted" and chosen(limit=3) == "smoke test"
    assert chosen(limit=3, budget=0.5) == "smoke test"
    assert chosen(import_batch=[tmp_path / "r.jsonl"]) == "batch import" and chosen(import_batch=[]) == "full judge"
    assert chosen(export_batch=tmp_path / "b", import_batch=[tmp_path / "r.jsonl"]) == "batch export"
    args = ["judge", "--profile", "paper", "--out", str(tmp_path / "j")]
    args += [f"--{name}={path}" for name, path in given.items()]
    mixed = runner.invoke(app, [*args, "--export-batch", str(tmp_path / "b"), "--limit", "3"])
    assert mixed.exit_code == 1 and "leave out --budget, --limit and the other batch option" in mixed.output
    assert not (tmp_path / "b").exists()
