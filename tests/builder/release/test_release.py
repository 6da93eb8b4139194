import json
import os
import shutil
import subprocess
import sys

import datasets
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from builder.release.assemble.hf_builder import ResearchySubqJudgments
from builder.release.layout import CONFIGS, file_rows, trec_qrels_path
from builder.release.validate.folder import CHECKS, validate
from generation.storage.schema import features

SYNTHETIC_RELEASE = dict(
    rows_per_file=4000, subquestions=1500, judgments=28_000, test_share=0.25, shards=3, seed=3, unparsed_share=0.004
)


def input_rows(release_inputs):
    return pq.read_table(sorted(release_inputs["judgments"].glob("judgments-*.parquet"))).to_pylist()


def test_level_partitions_hold_each_row_once(release, release_inputs):
    counts = {
        lv: pq.read_table(sorted((release / "data" / "judgments" / part).glob("*.parquet"))).num_rows
        for lv, part in [(n, f"level_{n}") for n in range(6)] + [(None, "unparsed")]
    }
    assert counts == release_inputs["levels"]
    assert sum(counts.values()) == release_inputs["judgments_total"] == 28_000
    assert len(list((release / "data" / "judgments" / "level_2").glob("train-*-of-*.parquet"))) > 1, "rolled files"


@pytest.mark.parametrize("config", [c.name for c in CONFIGS])
def test_load_dataset_returns_what_the_builder_class_builds(release, release_inputs, tmp_path, config):
    loaded = datasets.load_dataset(str(release), config, cache_dir=str(tmp_path / "load-cache"))
    table = next(c for c in CONFIGS if c.name == config).table
    builder = ResearchySubqJudgments(
        config_name=config,
        judgments=[release_inputs["judgments"]],
        questions=list(release_inputs["questions"].values()),
        cache_dir=str(tmp_path / "cache"),
    )
    builder.download_and_prepare()
    built = builder.as_dataset()
    assert set(loaded) == set(built) == {"train", "dev", "test"}  # dev: the paper profile's 5% of train
    for split in loaded:
        assert loaded[split].features == features(table) == built[split].features
        assert loaded[split].to_list() == built[split].to_list()


def test_judgments_config_is_every_input_row_routed_to_its_split(release, release_inputs):
    rows = input_rows(release_inputs)
    test_qids = set(pq.read_table(release_inputs["questions"]["test"] / "questions.parquet")["qid"].to_pylist())
    loaded = datasets.load_dataset(str(release), "judgments")
    key = lambda r: (r["subq_id"], r["docid"])  # noqa: E731
    assert sorted(map(key, loaded["test"])) == sorted(key(r) for r in rows if r["qid"] in test_qids)
    dev_qids = set(datasets.load_dataset(str(release), "questions", split="dev")["qid"])  # carved from train
    assert sorted(map(key, loaded["dev"])) == sorted(key(r) for r in rows if r["qid"] in dev_qids)
    assert sorted(map(key, loaded["train"])) == sorted(key(r) for r in rows if r["qid"] not in test_qids | dev_qids)
    level5 = datasets.load_dataset(str(release), "level-5", split="train")
    assert set(level5["level"]) == {5}
    qrels = datasets.load_dataset(str(release), "qrels", split="test")
    assert qrels.column_names == ["query-id", "corpus-id", "score"]
    assert len(qrels) == sum(1 for r in rows if r["qid"] in test_qids and r["level"] is not None)


def test_card_numbers_and_manifest(release, release_inputs):
    manifest = json.loads((release / "manifest.json").read_text())
    total = sum(manifest["rows"]["judgments"].values())
    assert total == release_inputs["judgments_total"]
    unparsed = sum(s["table1"][-1]["count"] for s in manifest["stats"].values())
    assert unparsed == release_inputs["levels"][None]
    text = (release / "README.md").read_text()
    train = manifest["stats"]["train"]
    assert f"| 5 | {train['table1'][0]['count']:,} | {train['table1'][0]['per_subquestion']} |" in text
    assert "![Level distribution](level_distribution.png)" in text and (release / "level_distribution.png").exists()
    assert "Instruction: Determine whether the question can be answered" in text
    assert manifest["prompt"]["id"] == "crux-paper" and len(manifest["prompt"]["sha256"]) == 64
    assert all(len(f["sha256"]) == 64 for f in manifest["files"].values())


def test_fresh_release_validates(release):
    report = validate(release)
    assert report.ok, [(c.name, c.examples) for c in report.checks if not c.ok]
    assert len(report.checks) >= 12


def rewrite(path, change):
    table = change(pq.read_table(path))
    pq.write_table(table, path)


def first_file(release, folder, split="train"):
    return sorted((release / "data" / folder).glob(f"{split}-*.parquet"))[0]


def set_column(table, name, values):
    return table.set_column(table.schema.get_field_index(name), name, values)


def replace_first(folder, column, value, kind=None, split="train"):
    """A fault: the first value of `column` in `folder`'s first file replaced by `value` (or `value(release, table)`)."""

    def change(r, t):
        first = value(r, t) if callable(value) else value
        return set_column(t, column, pa.concat_arrays([pa.array([first], kind), t[column].combine_chunks().slice(1)]))

    return lambda r: rewrite(first_file(r, folder, split), lambda t: change(r, t))


def card_replace(old, new, count=-1):
    """A fault: `old` replaced by `new` in the card (`old` and `new` may be f(release))."""

    def edit(r):
        text = (r / "README.md").read_text()
        (r / "README.md").write_text(text.replace(*(s(r) if callable(s) else s for s in (old, new)), count))

    return edit


def table1_count(shift):
    """The card's Table 1 row for level 5, its count shifted by `shift`."""
    return lambda r: (
        f"| 5 | {json.loads((r / 'manifest.json').read_text())['stats']['train']['table1'][0]['count'] + shift:,} |"
    )


def next_score(r, t):
    return (t["score"][0].as_py() + 1) % 6


FAULTS = {
    "wrong dtype": (
        lambda r: rewrite(
            first_file(r, "judgments/level_3"), lambda t: set_column(t, "level", pc.cast(t["level"], pa.int32()))
        ),
        "Arrow schema",
    ),
    "duplicate pair": (
        lambda r: rewrite(first_file(r, "judgments/level_2"), lambda t: pa.concat_tables([t, t.slice(0, 1)])),
        "pairs are unique",
    ),
    "orphan subq_id": (replace_first("judgments/level_1", "subq_id", "999-0"), "exist in subquestions"),
    "level 7": (replace_first("judgments/level_5", "level", 7, pa.int8()), "on the scale"),
    "card count off by one": (card_replace(table1_count(0), table1_count(1)), "statistics equals the data"),
    "missing shard": (lambda r: first_file(r, "judgments/level_2").unlink(), "listed but missing"),
    "root loading script": (
        lambda r: (r / "researchy-subq-judgments.py").write_text("import datasets\n"),
        "no loading script",
    ),
    "broken YAML": (card_replace("configs:\n", "configs: [\n", 1), "YAML parses"),
    "num_examples mismatch": (card_replace("num_examples: ", "num_examples: 1", 1), "num_examples"),
    # wrong releases that validate used to pass, and files that used to end in a traceback (CHANGELOG.md, 2026-11-22)
    "qrels score disagrees with the judgments": (
        replace_first("qrels", "score", next_score, pa.int32()),
        "qrels are exactly",
    ),
    "qrels query-id of no sub-question": (replace_first("qrels", "query-id", "404-0"), "is no sub-question"),
    "question in train and test": (
        lambda r: rewrite(
            first_file(r, "questions", "test"),
            lambda t: pa.concat_tables([t, pq.read_table(first_file(r, "questions")).slice(0, 1).cast(t.schema)]),
        ),
        "exactly one split",
    ),
    "partition outside the scale": (
        lambda r: relist(
            r, copy_to(first_file(r, "judgments/level_5"), r / "data/judgments/level_7/train-00000-of-00001.parquet")
        ),
        "layout",
    ),
    "YAML config points at another level": (
        card_replace("path: data/judgments/level_5/train-*.parquet", "path: data/judgments/level_4/train-*.parquet"),
        "its files are",
    ),
    "manifest row count": (
        lambda r: edit_manifest(r, lambda m: m["rows"]["judgments"].update(train=m["rows"]["judgments"]["train"] + 1)),
        "in the manifest",
    ),
    "manifest model name": (lambda r: edit_manifest(r, lambda m: m["models"].update(judge="gpt-4")), "models"),
    "sub-question of another question": (
        replace_first("judgments/level_2", "subq_id", lambda r, t: other_question_subq(r, t["qid"][0].as_py())),
        "belongs to another question",
    ),
    "NaN in a float column": (
        replace_first("judgments/level_0", "expected", float("nan"), pa.float32()),
        "NaN in expected",
    ),
    "NaN completeness": (replace_first("questions", "completeness", float("nan"), pa.float32()), "NaN in completeness"),
    "truncated file": (lambda r: truncate(first_file(r, "judgments/level_2")), "not readable as Parquet"),
    "symlinked file": (lambda r: symlink_out(first_file(r, "judgments/level_3")), "symlink"),
    "missing README": (lambda r: (r / "README.md").unlink(), "README.md: cannot read"),
    "complexity column edited": (
        lambda r: rewrite(
            first_file(r, "questions"), lambda t: set_column(t, "answerable", pc.invert(t["answerable"]))
        ),
        "complexity columns",
    ),
    # the TREC qrels files, each edit relisted in the manifest so only the TREC check can object
    "TREC qrels line dropped": (lambda r: edit_trec(r, lambda lines: lines[:-1]), "lines that are not the"),
    "TREC qrels level changed": (
        lambda r: edit_trec(r, lambda lines: [regrade(lines[0])] + lines[1:]),
        "(same count, other rows)",
    ),
    "TREC qrels extra field": (lambda r: edit_trec(r, lambda lines: [lines[0] + " 1"] + lines[1:]), "5 fields, not 4"),
    "TREC qrels iteration": (
        lambda r: edit_trec(r, lambda lines: [lines[0].replace(" 0 ", " Q0 ", 1)] + lines[1:]),
        "want 0 and an integer",
    ),
    "TREC qrels missing": (
        lambda r: (
            trec_qrels_path(r, "train").unlink(),
            edit_manifest(r, lambda m: m["files"].pop("data/qrels/train.qrels.txt")),
        ),
        "train.qrels.txt: missing (the qrels config has",
    ),
    "TREC qrels of no split": (
        lambda r: relist(r, copy_to(trec_qrels_path(r, "train"), trec_qrels_path(r, "validation"))),
        "for a split of the manifest",
    ),
}


def edit_trec(release, change):
    path = trec_qrels_path(release, "train")
    path.write_text("\n".join(change(path.read_text().splitlines())) + "\n")
    relist(release, path)


def regrade(line):
    query, iteration, doc, level = line.split(" ")
    return " ".join([query, iteration, doc, str((int(level) + 1) % 6)])


def copy_to(source, target):
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    return target


def relist(release, path):
    """Adds a file to the manifest with its true checksum, so only the layout check can object."""
    from generation.storage.shards import sha256_file

    edit_manifest(
        release,
        lambda m: m["files"].update(
            {
                str(path.relative_to(release)): {
                    "bytes": path.stat().st_size,
                    "sha256": sha256_file(path),
                    "rows": file_rows(path),
                }
            }
        ),
    )


def edit_manifest(release, change):
    manifest = json.loads((release / "manifest.json").read_text())
    change(manifest)
    (release / "manifest.json").write_text(json.dumps(manifest))


def other_question_subq(release, qid):
    subqs = pq.read_table(first_file(release, "subquestions"))
    return subqs.filter(pc.not_equal(subqs["qid"], qid))["subq_id"][0].as_py()


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def symlink_out(path):
    outside = path.parent.parent.parent.parent / "outside.parquet"
    shutil.move(path, outside)
    path.symlink_to(outside)


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.slow
def test_validate_names_each_injected_fault(release, tmp_path, fault):
    broken = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, broken)
    inject, expected_check = FAULTS[fault]
    inject(broken)
    report = validate(broken, load=fault in {"broken YAML", "num_examples mismatch"})
    failed = [c for c in report.checks if not c.ok]
    assert any(expected_check in c.name or any(expected_check in str(e) for e in c.examples) for c in failed), [
        (c.name, c.examples) for c in failed
    ]
    assert not report.ok
    if fault.startswith("TREC") and fault != "TREC qrels of no split":
        assert [c.name for c in failed] == [CHECKS["trec"]], [(c.name, c.examples) for c in failed]


@pytest.mark.subprocess
def test_validate_prints_its_report_and_not_the_datasets_reader_log(release, tmp_path):
    """A truncated file: `datasets` logs `Failed to read file ... ArrowInvalid` while loading it; validate keeps that
    line out of the output (the load check reports the same failure) and prints its own report."""
    broken = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, broken)
    truncate(first_file(broken, "judgments/level_2"))
    result = subprocess.run(
        [sys.executable, "-m", "builder.cli.main", "validate", str(broken)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "250"},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Failed to read file" not in output
    assert "not readable as Parquet (ArrowInvalid" in output and "level-2: ArrowInvalid" in output


def test_level_share_far_off_its_bound(release, tmp_path):
    bounds = tmp_path / "bounds.yaml"
    bounds.write_text("levels:\n  5: [0.40, 0.60]\n  2: [0.25, 0.40]\nunparsed_max: 0.01\n")
    report = validate(release, expect=bounds, load=False)
    failed = {c.name: c.examples for c in report.checks if not c.ok}
    assert list(failed) == ["per-level shares within the expected bounds or the previous release"]
    assert all(
        "level 5 share" in e for e in failed["per-level shares within the expected bounds or the previous release"]
    )
    assert validate(release, against=release, load=False).ok, "a release is within tolerance of itself"


def test_unparsed_bound(release, tmp_path):
    bounds = tmp_path / "strict.yaml"
    bounds.write_text("unparsed_max: 0.0001\n")
    report = validate(release, expect=bounds, load=False)
    assert [c.name for c in report.checks if not c.ok] == ["unparsed ('Other') share under its bound"]
