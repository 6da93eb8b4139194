"""Releases of imported labels: build-release, validate and load_dataset over `import-labels` output, what validate
checks of the import, importing twice, a killed import, the documented commands, publish. The import itself and its
malformed lines: tests/generation/stages/test_import_labels.py."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generation.profiles.profile import load_profile
from generation.stages.import_labels import ImportLabelsStage
from generation.storage.shards import ShardError, sha256_file
from tests.generation.stages.test_import_labels import LABELS, hub_questions
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
    return hub_questions(tmp_path_factory.mktemp("import-questions"))


def import_ratings(questions, out):
    """The authors' ratings imported through the CLI, as a user runs it."""
    return cli(
        "import-labels",
        LABELS / "ratings.jsonl",
        "--format",
        "crux-ratings",
        "--profile",
        "crux-code",
        "--judge",
        "Llama-3.3-70B-Instruct (the authors' ratings)",
        "--subquestions",
        questions,
        "--out",
        out,
    )


@pytest.fixture(scope="module")
def release(questions, tmp_path_factory):
    """import -> build-release through the CLI, as a user runs them."""
    root = tmp_path_factory.mktemp("import-release")
    code, output = import_ratings(questions, root / "judgments")
    assert code == 0 and "27 judgments" in output, output
    code, output = cli(
        "build-release",
        "--profile",
        "crux-code",
        "--judgments",
        root / "judgments",
        "--questions",
        questions,
        "--out",
        root / "release",
    )
    assert code == 0, output
    return root


# the fixture holds the authors' -1, -2 and 7 on purpose: 3 of 27 unparsed, above validate's default 1% bound
BOUNDS = "unparsed_max: 0.2\n"


def test_import_build_validate_load_gives_the_imported_grades(release, tmp_path):
    from datasets import load_dataset

    (tmp_path / "bounds.yaml").write_text(BOUNDS)
    code, output = cli("validate", release / "release", "--expect", tmp_path / "bounds.yaml")
    assert code == 0 and "checks passed" in output, output
    qrels = load_dataset(str(release / "release"), "qrels", split="train")
    got = sorted(zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]))
    expected = sorted(
        (f"{line['id']}-{k}", line["docid"], r)
        for line in map(json.loads, (LABELS / "ratings.jsonl").read_text().splitlines())
        for k, r in enumerate(line["rating"])
        if 0 <= r <= 5
    )
    assert got == expected and len(got) == 24
    manifest = json.loads((release / "release" / "manifest.json").read_text())
    assert manifest["imported"]["files"][0]["sha256"] == sha256_file(LABELS / "ratings.jsonl")
    assert manifest["prompt"] is None and manifest["models"]["reranker"] is None
    card = (release / "release" / "README.md").read_text()
    assert "**Imported labels.**" in card and sha256_file(LABELS / "ratings.jsonl") in card
    assert "no prompt text or prompt hash" in card and "The judge prompt (" not in card


def test_importing_twice_changes_nothing_and_other_files_are_refused(release, questions):
    before = {p.name: sha256_file(p) for p in (release / "judgments").rglob("*") if p.is_file()}
    code, output = import_ratings(questions, release / "judgments")
    assert code == 0 and "skipped" in output, output
    assert {p.name: sha256_file(p) for p in (release / "judgments").rglob("*") if p.is_file()} == before
    code, output = cli(
        "import-labels",
        LABELS / "judge-b.qrels",
        "--format",
        "qrels",
        "--profile",
        "crux-code",
        "--judge",
        "judge B",
        "--subquestions",
        questions,
        "--out",
        release / "judgments",
    )
    assert code == 1 and "holds labels imported from other files" in output, output


def test_judge_and_import_refuse_each_others_folders(release):
    from builder.release.assemble.lineage import release_profile
    from generation.stages.judge import JudgeStage

    with pytest.raises(ShardError, match="made under config imported-"):
        JudgeStage.completed_files(release / "judgments", load_profile("crux-code"))
    assert release_profile([release / "judgments"])[0].name == "crux-code"


def resealed(release: Path, tmp_path: Path, edit) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(release / "release", copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest, copy)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@pytest.mark.parametrize(
    "edit,finding",
    [
        (lambda m, _: m["imported"]["statuses"].update(imported=23), "statuses differ from what the import recorded"),
        (lambda m, _: m["imported"]["files"][0].update(rows=26), "the import recorded 27 rows (26 over its files)"),
        (lambda m, _: m.pop("imported"), "have status 'imported', but manifest.json records no import"),
        (
            lambda m, copy: (copy / "README.md").write_text(
                (copy / "README.md").read_text().replace(m["imported"]["files"][0]["sha256"], "0" * 64)
            ),
            "the card does not name the import's",
        ),
    ],
)
def test_validate_checks_what_the_import_recorded(release, tmp_path, edit, finding):
    from builder.release.validate.folder import validate
    from builder.release.validate.imported import CHECK

    report = validate(resealed(release, tmp_path, edit), load=False)
    check = next(c for c in report.checks if c.name == CHECK)
    assert not check.ok and any(finding in str(e) for e in check.examples), check.examples


def test_validate_refuses_imported_labels_parsed_with_two_prompts(release, tmp_path):
    """An import's answers parsed with the profile's prompt and another (two imports merged by hand): one config
    would hold two prompts' labels, and nothing in the card says so."""
    from builder.release.validate.folder import validate
    from builder.release.validate.pilot import ONE_PROMPT

    copy = resealed(release, tmp_path, lambda m, _: m["imported"].update(parsers=["crux-code", "umbrela"]))
    check = next(c for c in validate(copy, load=False).checks if c.name == ONE_PROMPT)
    assert any("parsed answers with the prompts ['crux-code', 'umbrela']" in e for e in check.examples), check.examples
    fresh = next(c for c in validate(release / "release", load=False).checks if c.name == ONE_PROMPT)
    assert fresh.ok


def documented_commands() -> list[list[str]]:
    """The first bash block of docs/importing-labels.md, one command a line."""
    section = (ROOT / "docs" / "importing-labels.md").read_text()
    block = section[section.index("```bash") + 7 : section.index("```", section.index("```bash") + 7)]
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_documented_import_commands_run(questions, tmp_path):
    from generation.sample import CLUEWEB22
    from generation.stages.corpus import CorpusStage, write_url_map

    CorpusStage(None, tmp_path / "corpus", [CLUEWEB22]).run()
    write_url_map(tmp_path / "corpus")
    (tmp_path / "bounds.yaml").write_text(BOUNDS)
    paths = {
        "ratings.train.jsonl": LABELS / "ratings.jsonl",
        "judge-b.qrels": LABELS / "judge-b.qrels",
        "results.jsonl": LABELS / "results.jsonl",
        "errors.jsonl": LABELS / "errors.jsonl",
        "work/questions/train": questions,
        "work/corpus": tmp_path / "corpus",
    }
    commands = documented_commands()
    assert [c[1] for c in commands] == ["import-labels"] * 3 + ["build-release", "validate"]
    for command in commands:
        args = [str(paths.get(a, tmp_path / a if re.match(r"^(work|imported-release)", a) else a)) for a in command[1:]]
        if args[0] == "validate":
            args += ["--expect", str(tmp_path / "bounds.yaml")]  # the fixture's unparsed share, see BOUNDS
        code, output = cli(*args)
        assert code == 0, f"{shlex.join(command)}\n{output}"
    assert (tmp_path / "imported-release" / "manifest.json").is_file()


@pytest.mark.subprocess
def test_a_killed_import_leaves_no_partial_shard_and_a_rerun_gives_the_same_shard(questions, tmp_path):
    lines = [
        json.dumps({"id": 1051893, "docid": f"doc-{i}", "rating": [i % 6, 0, 1, 2, 3, 4, 5]}) for i in range(60_000)
    ]  # two blocks of BLOCK_LINES
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    command = [
        sys.executable,
        "-m",
        "builder.cli.main",
        "import-labels",
        str(path),
        "--format",
        "crux-ratings",
        "--subquestions",
        str(questions),
        "--judge",
        "j",
    ]
    reference = subprocess.run(command + ["--out", str(tmp_path / "reference")], capture_output=True, text=True)
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        command + ["--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not list(out.glob(".judgments-*.tmp-*")):
        time.sleep(0.02)
    time.sleep(0.5)  # into the shard's lines: the sink is open, the shard file not yet there
    assert proc.poll() is None, "the import ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "judgments-00000-of-00001.parquet").exists() and not (out / "_done").exists()
    rerun = subprocess.run(command + ["--out", str(out)], capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert sha256_file(out / "judgments-00000-of-00001.parquet") == sha256_file(
        tmp_path / "reference" / "judgments-00000-of-00001.parquet"
    )
    assert not list(out.glob(".judgments-*.tmp-*")) and not list((out / "_locks").glob("*.lock"))


def test_publish_takes_a_release_of_imported_labels(questions, tmp_path, monkeypatch):
    from builder.release.assemble.folder import ReleaseOptions, build_release
    from builder.release.publish.to_hub import publish
    from tests.builder.release.publish.test_to_hub import RecordingHub

    ImportLabelsStage(
        load_profile("paper"), tmp_path / "j", questions, [LABELS / "judge-b.qrels"], "qrels", "judge B"
    ).run()
    release = tmp_path / "release"
    build_release(
        ReleaseOptions(
            judgments=[tmp_path / "j"], questions=[questions], out=release, profile=None, repo="org/imported"
        )
    )
    monkeypatch.setenv("HF_TOKEN", "hf_token")
    hub = RecordingHub(remote_files=None)
    publish(tmp_path / "release", "org/imported", yes=True, api=hub, say=lambda line: None)
    description = next(c for c in hub.calls if c[0] == "create_commit")[3]["commit_description"]
    assert "Labels imported (qrels; no prompt, no pool provenance) from judge-b.qrels (sha256 " in description
    assert "judge: judge B" in description


def test_the_import_record_is_typed_by_the_contract(release, tmp_path):
    """manifest.imported is read through the contract's ImportRecord (builder/release/contract.py): the published
    schema accepts it, and a key it does not name or a count that is not a number is refused, naming its path."""
    import jsonschema

    from builder.release.contract import MANIFEST_SCHEMA, ImportRecord, ManifestError, read_manifest
    from builder.release.validate.folder import validate

    folder = release / "release"
    manifest = json.loads((folder / "manifest.json").read_text())
    jsonschema.validate(manifest, json.loads((folder / MANIFEST_SCHEMA).read_text()))
    imported = read_manifest(folder).imported
    assert isinstance(imported, ImportRecord) and imported.rows == 27 and imported.files[0].rows == 27
    assert imported.judges == ["Llama-3.3-70B-Instruct (the authors' ratings)"] and imported.left_out is None
    assert "left_out" not in manifest["imported"]  # absent, not null, without --leave-out-other-text
    for edit, where in [
        (lambda m, _: m["imported"]["files"][0].update(pages=3), "imported.files.0.pages: Extra inputs"),
        (lambda m, _: m["imported"].update(rows="27 rows"), "imported.rows: Input should be a valid integer"),
    ]:
        copy = resealed(release, tmp_path / where.split(":")[0], edit)
        with pytest.raises(ManifestError, match=where):
            read_manifest(copy)
        assert any(where in e for c in validate(copy, load=False).checks if not c.ok for e in c.examples)


def test_a_model_card_says_the_levels_were_imported(release, tmp_path):
    """builder/training/model_card.py reads the typed import record: the card names the import's judge and format
    instead of a prompt."""
    from builder.release.contract import read_manifest
    from builder.training.model_card import provenance

    manifest = read_manifest(release / "release")
    section = provenance(manifest, manifest.profile, "minilm", tmp_path, "checkpoint-1", 10, {"judged": 30})
    assert (
        "levels were imported from Llama-3.3-70B-Instruct (the authors' ratings) (crux-ratings), not judged" in section
    )
    assert "prompt `" not in section


@pytest.mark.parametrize(
    "edit,where",
    [
        (lambda imported: imported["files"][0].update(rows="27"), 'imported.files.0.rows: Input should be a valid integer, not "27"'),
        (lambda imported: imported.update(clicked_unknown=True), "imported.clicked_unknown: Input should be a valid integer, not true"),
    ],
)  # fmt: skip
def test_build_release_reads_each_shards_import_record_strictly(release, questions, tmp_path, edit, where):
    """The import record a judgment shard's completion record holds is read strictly (generation/labels/account.py
    `ImportAccount`, the model import-labels writes it with): a count written as a string, or true where a count
    belongs, is refused naming the record, not summed as 27 or 1."""
    from builder.release.assemble.folder import ReleaseOptions, build_release
    from generation.errors import InputError

    judgments = tmp_path / "judgments"
    shutil.copytree(release / "judgments", judgments)
    record = next((judgments / "_done").glob("judgments-*.json"))
    completion = json.loads(record.read_text())
    edit(completion["extra"]["imported"])
    record.write_text(json.dumps(completion))
    with pytest.raises(InputError, match=f"{re.escape(record.name)}.*{re.escape(where)}"):
        build_release(
            ReleaseOptions(judgments=[judgments], questions=[questions], out=tmp_path / "release", profile="crux-code")
        )
