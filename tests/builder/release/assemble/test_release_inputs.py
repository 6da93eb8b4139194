"""build-release refuses inputs that would make a wrong release (lineage and overlapping inputs)."""

import shutil

import pyarrow.parquet as pq
import pytest

from builder.release.assemble.folder import ReleaseOptions, build_release
from builder.standins.synthetic import synthesize
from generation.errors import InputError
from generation.storage.shards import ShardError


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    return synthesize(root, subquestions=300, judgments=5_000, test_share=0.3, shards=2, seed=5)


def build(inputs, out, questions=None, judgments=None, profile="paper"):
    return build_release(
        ReleaseOptions(
            judgments=judgments or [inputs["judgments"]],
            questions=questions or list(inputs["questions"].values()),
            out=out,
            profile=profile,
            repo="org/rsj",
        )
    )


def test_the_same_questions_folder_twice(inputs, tmp_path):
    train = inputs["questions"]["train"]
    with pytest.raises(InputError, match="the same questions folder is given twice"):
        build(inputs, tmp_path / "r", questions=[train, inputs["questions"]["test"], train])


def test_overlapping_question_folders(inputs, tmp_path):
    copy = tmp_path / "train-copy"
    shutil.copytree(inputs["questions"]["train"], copy)
    with pytest.raises(InputError, match="qids appear more than once"):
        build(inputs, tmp_path / "r", questions=[*inputs["questions"].values(), copy])


def test_the_same_judgments_folder_twice(inputs, tmp_path):
    with pytest.raises(InputError, match="the same judgments folder is given twice"):
        build(inputs, tmp_path / "r", judgments=[inputs["judgments"], inputs["judgments"]])


def test_profile_other_than_the_judgments_records(inputs, tmp_path):
    with pytest.raises(InputError, match="the judgments were made under config .* profile 'demo'.*matches is 'paper'"):
        build(inputs, tmp_path / "r", profile="demo")
    assert not (tmp_path / "r" / "manifest.json").exists()


def test_profile_and_judge_come_from_the_records(inputs, tmp_path):
    import json

    build(inputs, tmp_path / "r", profile=None)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["profile"]["name"] == "paper"
    assert manifest["models"]["judge"] == "synthetic (Table 1 level mix)"


def test_a_shard_changed_after_its_record(inputs, tmp_path):
    judgments = tmp_path / "judgments"
    shutil.copytree(inputs["judgments"], judgments)
    shard = sorted(judgments.glob("judgments-*.parquet"))[0]
    pq.write_table(pq.read_table(shard).slice(0, 10), shard)
    with pytest.raises(ShardError, match="does not match its completion record"):
        build(inputs, tmp_path / "r", judgments=[judgments])
