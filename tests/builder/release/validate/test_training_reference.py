"""`validate`'s own re-derivation of the training configs (builder/release/validate/training_reference.py): a bug
planted in the build's derivation is caught (both sides once ran the same code, so it could not be), the derivation
bucket by bucket gives the same rows as in one bucket, and questions.retrieved_unjudged is checked on its own."""

import shutil

import numpy as np
import pyarrow as pa
import pytest

from builder.release.contract import read_manifest
from builder.release.layout import config
from builder.release.training_rule import fnv1a64
from builder.release.validate.folder import validate
from builder.standins.release_edits import data_file, rewrite, set_column
from tests.builder.release.assemble.test_training_configs import SYNTHETIC_RELEASE as TRAINING_RELEASE

SYNTHETIC_RELEASE = {**TRAINING_RELEASE, "subquestions": 300, "judgments": 6_000}
TRAINING = "hard-negatives and graded-lists are what the judgments give under the manifest's training settings"


def training_findings(release) -> list[str]:
    check = next(c for c in validate(release, load=False).checks if c.name == TRAINING)
    return check.examples


def test_a_fresh_release_passes_in_one_bucket_and_in_many(release, monkeypatch):
    import builder.release.validate.training_reference as reference

    assert training_findings(release) == []
    monkeypatch.setattr(reference, "BUCKET_ROWS", 500)  # 6,000 judgments: 12 buckets of ~25 questions
    assert training_findings(release) == []


def test_another_fill_order_and_k_validate_too(synthetic_release):
    """The retrieved lists first (at most 20 a question), then the judged documents, then other questions', 25 a
    row: every source is used, each with another m."""
    profile = SYNTHETIC_RELEASE["profile"]
    training = profile.training.model_copy(
        update={"negatives": 25, "fill_order": ["retrieved_unjudged", "judged", "other_question"]}
    )
    options = {**SYNTHETIC_RELEASE, "profile": profile.model_copy(update={"training": training})}
    release, _ = synthetic_release("fill-order-reversed", **options)
    assert training_findings(release) == []
    stated = read_manifest(release).training
    assert stated.negatives == 25 and min(stated.negatives_by_source.values()) > 0, stated


def test_a_k_that_leaves_some_positives_short_validates(synthetic_release):
    """k = 100 with the other questions' documents second: some sub-questions' positives are short (the pool less
    the question's own documents holds fewer), others not; the rows and the counts must agree all the same."""
    profile = SYNTHETIC_RELEASE["profile"]
    training = profile.training.model_copy(
        update={"negatives": 100, "fill_order": ["judged", "other_question", "retrieved_unjudged"]}
    )
    options = {**SYNTHETIC_RELEASE, "profile": profile.model_copy(update={"training": training})}
    release, _ = synthetic_release("some-short", **options)
    assert training_findings(release) == []
    stated = read_manifest(release).training
    assert 0 < stated.short_positives < stated.positives, stated


def other_question_start_moved(monkeypatch):
    """The build walks the other-question pool from one place further (FNV-1a 64 of query_id + 1)."""
    import builder.release.assemble.hard_negatives as hard_negatives

    monkeypatch.setattr(hard_negatives, "fnv1a64", lambda strings: fnv1a64(strings) + np.uint64(1))


def rerank_rank_reversed(monkeypatch):
    """The build orders a graded list's equal levels by rerank rank descending (the easiest first)."""
    import builder.release.assemble.training_configs as training_configs

    order = [("level", "descending"), ("rerank_rank", "descending", "at_end"), *training_configs.HARDNESS[1:]]
    monkeypatch.setattr(training_configs, "LIST_ORDER", order)


@pytest.mark.parametrize(
    "plant,finding",
    [(other_question_start_moved, "hard_negatives/"), (rerank_rank_reversed, "graded_lists/")],
    ids=["other-question start", "graded-list order"],
)
def test_a_bug_planted_in_the_build_s_derivation_is_caught(synthetic_release, monkeypatch, plant, finding):
    plant(monkeypatch)
    release, _ = synthetic_release(f"planted-{plant.__name__}", **SYNTHETIC_RELEASE)
    monkeypatch.undo()  # validate runs the kit as shipped
    found = training_findings(release)
    assert any(f.startswith(finding) and "not the row the judgments give" in f for f in found), found


def edited_lists(release, tmp_path, change):
    """A copy whose train questions' retrieved_unjudged lists are `change(qids, lists)`."""
    copy = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, copy)
    path = data_file(copy, "questions", "train")

    def edit(table):
        lists = change(table["qid"].to_pylist(), table["retrieved_unjudged"].to_pylist())
        return set_column(table, "retrieved_unjudged", pa.array(lists, table.schema.field("retrieved_unjudged").type))

    rewrite(path, edit)
    return copy


def first_long_list(lists):
    return next(i for i, entries in enumerate(lists) if entries and len(entries) > 2)


def test_a_list_out_of_hardness_order_is_named(release, tmp_path):
    def reverse(qids, lists):
        i = first_long_list(lists)
        lists[i] = lists[i][::-1]
        return lists

    qids, lists = edited_lists_inputs(release)
    found = training_findings(edited_lists(release, tmp_path, reverse))
    assert f"questions.retrieved_unjudged: qid {qids[first_long_list(lists)]}: not hardest first" in found, found


def test_a_judged_document_in_a_list_is_named(release, tmp_path):
    import pyarrow.parquet as pq

    graded = pq.read_table(config("judgments").files(release, "train")[0], columns=["qid", "docid"])[0:1].to_pylist()[0]

    def insert(qids, lists):
        i = qids.index(graded["qid"])
        lists[i] = [{"docid": graded["docid"], "bm25_rank": 1, "rerank_rank": 1}, *(lists[i] or [])]
        return lists

    found = training_findings(edited_lists(release, tmp_path, insert))
    said = f"questions.retrieved_unjudged: qid {graded['qid']} lists {graded['docid']}, which a judgment"
    assert any(f.startswith(said) for f in found), found


def test_a_list_longer_than_kept_is_named(release, tmp_path):
    def lengthen(qids, lists):
        i = first_long_list(lists)
        extra = [{"docid": f"clueweb22-extra-{n:03d}", "bm25_rank": None, "rerank_rank": None} for n in range(20)]
        lists[i] = lists[i] + extra
        return lists

    qids, lists = edited_lists_inputs(release)
    found = training_findings(edited_lists(release, tmp_path, lengthen))
    n = len(lists[first_long_list(lists)]) + 20
    assert f"questions.retrieved_unjudged: qid {qids[first_long_list(lists)]}: {n} documents, more than 20" in found


def edited_lists_inputs(release):
    import pyarrow.parquet as pq

    table = pq.read_table(data_file(release, "questions", "train"), columns=["qid", "retrieved_unjudged"])
    return table["qid"].to_pylist(), table["retrieved_unjudged"].to_pylist()
