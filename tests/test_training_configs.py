"""The training configs (`hard-negatives`, `graded-lists`) and the dev split of a built release: each
loads by name with `load_dataset`, holds exactly what the judgments give (recomputed here in plain
Python from the release's own judgment files), the card's snippets run against it, and `validate` catches a dev
split that does not follow its rule."""

import json
import re
import shutil

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builder.release.assemble.training_configs import TrainingRows, dev_questions
from builder.release.layout import config
from builder.release.validate.folder import validate
from builder.standins.release_faults import data_file, rewrite
from generation.profiles import Profile, load_profile

REPO = "org/researchy-subq-judgments"
K = 3


def profile() -> Profile:
    """The paper's profile in distribution mode (so `expected` and `probs` are filled) with a dev share large
    enough for a dev split of a few questions."""
    paper = load_profile("paper")
    return paper.model_copy(
        update={
            "judge": paper.judge.model_copy(update={"mode": "distribution"}),
            "training": paper.training.model_copy(update={"dev_share": 0.25}),
        }
    )


SAMPLE = dict(subquestions=600, judgments=12_000, test_share=0.25, shards=2, seed=5, unparsed_share=0.004)
SYNTHETIC_RELEASE = dict(profile=profile(), rows_per_file=2000, **SAMPLE)


def judgments(release, split):
    return pq.read_table(config("judgments").files(release, split)).to_pylist()


def manifest(release):
    return json.loads((release / "manifest.json").read_text())


def expected_rows(release, split):
    """Hard-negative rows and graded lists as the card describes them, in plain Python."""
    by_subq = {}
    for r in judgments(release, split):
        if r["level"] is not None:
            by_subq.setdefault(r["subq_id"], []).append(r)
    last = float("inf")
    hard, lists, short, positives = {}, {}, 0, 0
    for subq, rows in by_subq.items():
        negatives = sorted(
            (r for r in rows if r["level"] <= 1),
            key=lambda r: (
                r["rerank_rank"] if r["rerank_rank"] is not None else last,
                r["bm25_rank"] if r["bm25_rank"] is not None else last,
                r["docid"],
            ),
        )
        for p in (r for r in rows if r["level"] >= 4):
            positives += 1
            if len(negatives) < K:
                short += 1
                continue
            hard[(subq, p["docid"])] = [n["docid"] for n in negatives[:K]]
        graded = sorted(rows, key=lambda r: (-r["level"], r["docid"]))
        lists[subq] = {
            "docids": [r["docid"] for r in graded],
            "labels": [r["level"] for r in graded],
            "expected": [r["expected"] for r in graded],
            "probs": [r["probs"] for r in graded],
            "qid": graded[0]["qid"],
        }
    return hard, lists, short, positives


def test_every_config_has_the_dev_split_and_it_follows_its_rule(release):
    assert manifest(release)["splits"] == ["train", "dev", "test"]
    questions = {s: datasets.load_dataset(str(release), "questions", split=s)["qid"] for s in ("train", "dev", "test")}
    assert questions["dev"], "a dev split of a few questions"
    assert dev_questions(pa.array(questions["dev"]), 0, 0.25).all()
    assert not dev_questions(pa.array(questions["train"]), 0, 0.25).any()
    assert not set(questions["dev"]) & (set(questions["train"]) | set(questions["test"]))
    for name in ("judgments", "qrels", "queries", "hard-negatives", "graded-lists", "diversity-qrels"):
        loaded = datasets.load_dataset(str(release), name)
        assert set(loaded) == {"train", "dev", "test"}, name
        qid = "query-id" if name == "diversity-qrels" else "qid"
        if qid in loaded["dev"].column_names:
            assert set(loaded["dev"][qid]) <= set(questions["dev"]), name


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_hard_negatives_are_the_hardest_low_levels_of_each_positive(release, split):
    hard, _, short, _ = expected_rows(release, split)
    rows = datasets.load_dataset(str(release), "hard-negatives", split=split)
    assert rows.column_names == ["query_id", "query_text", "positive_document_ids", "negative_document_ids", "qid"]
    texts = {q["_id"]: q["text"] for q in datasets.load_dataset(str(release), "queries", split=split)}
    got = {}
    for row in rows:
        assert len(row["positive_document_ids"]) == 1 and len(row["negative_document_ids"]) == K
        assert row["query_text"] == texts[row["query_id"]] and row["query_id"].startswith(row["qid"] + "-")
        got[(row["query_id"], row["positive_document_ids"][0])] = row["negative_document_ids"]
    assert got == hard and len(rows) == len(hard) > 0


def test_short_positives_are_counted_in_the_manifest_and_card(release):
    stated = manifest(release)["training"]
    short = positives = 0
    for split in ("train", "dev", "test"):
        _, _, s, p = expected_rows(release, split)
        short, positives = short + s, positives + p
    assert (stated["short_positives"], stated["positives"]) == (short, positives) and short > 0
    assert {k: stated[k] for k in ("negative_level", "negatives", "seed", "dev_share", "answer_level")} == {
        "negative_level": 1,
        "negatives": K,
        "seed": 0,
        "dev_share": 0.25,
        "answer_level": 4,
    }
    body = (release / "README.md").read_text()
    assert re.search(rf"{short:,} of\s+{positives:,} positives are left out", body)


@pytest.mark.parametrize("split", ["train", "test"])
def test_graded_lists_hold_every_graded_judgment_once(release, split):
    _, lists, _, _ = expected_rows(release, split)
    rows = datasets.load_dataset(str(release), "graded-lists", split=split)
    got = {r["query_id"]: r for r in rows}
    assert set(got) == set(lists)
    for subq, want in lists.items():
        row = got[subq]
        assert (row["docids"], row["labels"], row["qid"]) == (want["docids"], want["labels"], want["qid"])
        assert row["expected"] == pytest.approx(want["expected"])
        assert np.allclose(row["probs"], want["probs"])


def test_spilled_runs_give_the_rows_held_in_memory(release):
    """The grouping spills sorted runs to disk past its budget; a tiny budget must not change a row."""
    subquestions = pq.read_table(config("subquestions").files(release, "train"))
    table = pq.read_table(config("judgments").files(release, "train"))
    position = pa.compute.index_in(table["subq_id"], value_set=subquestions["subq_id"]).to_numpy(zero_copy_only=False)
    split = np.zeros(subquestions.num_rows, np.int64)
    outputs = []
    for memory in (10_000_000, 700):
        rows = TrainingRows(subquestions, split, 4, profile().training, memory)
        for start in range(0, table.num_rows, 1000):
            rows.add(table.slice(start, 1000), position[start : start + 1000])
        assert (rows.runs.spilled > 1) == (memory == 700)
        outputs.append([(name, t.to_pylist()) for _, name, t in rows.tables()])
    merge = lambda out, n: [r for name, rs in out if name == n for r in rs]  # noqa: E731
    for name in ("hard-negatives", "graded-lists"):
        assert merge(outputs[0], name) == merge(outputs[1], name)


def test_the_card_snippets_of_the_training_configs_run(release):
    """Each snippet over the user's texts; a row (or a list's place) whose document has no text is left out and
    counted, never given the docid as its text."""
    import contextlib
    import io

    hard = pq.read_table(config("hard-negatives").files(release, "train")).to_pylist()
    lists = pq.read_table(config("graded-lists").files(release, "train")).to_pylist()
    docids = {d for r in lists for d in r["docids"]}
    lacking = hard[0]["negative_document_ids"][0]
    body = (release / "README.md").read_text()
    blocks = dict(re.findall(r"^### ([^\n]+)\n\n(?:[^`\n][^\n]*\n)*\n```python\n(.*?)\n```", body, re.M | re.S))
    for title, columns in (
        (
            "Hard negatives: Tevatron v2 rows, sentence-transformers n-tuples",
            "['anchor', 'positive', 'negative_1', 'negative_2', 'negative_3']",
        ),
        ("Graded lists: listwise and distillation losses", "['query', 'docs', 'labels']"),
    ):
        code = blocks[title].replace(f'"{REPO}"', repr(str(release)))
        # the user's texts: every judged document's but one, whose rows (or list places) are left out and counted
        texts = {d: f"text of {d}" for d in docids if d != lacking}
        code = code.replace("texts = {}  # docid", f"texts = {texts!r}  # docid")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, title, "exec"), {})
        said, printed = out.getvalue().strip().splitlines()
        printed_columns, rows = printed.rsplit(" ", 1)
        total = manifest(release)["rows"]["hard-negatives" if "Hard" in title else "graded-lists"]["train"]
        assert printed_columns == columns
        if "Hard" in title:
            left_out = sum(lacking in [*r["positive_document_ids"], *r["negative_document_ids"]] for r in hard)
            assert left_out and int(rows) == total - left_out
            assert said == f"{left_out:,} of {total:,} rows left out: a document without a text in your copy"
        else:
            places = sum(r["docids"].count(lacking) for r in lists)
            assert int(rows) == total and said.startswith(f"{places:,} of ") and places


def move_question(release, source, target):
    row = pq.read_table(data_file(release, "questions", source)).slice(0, 1)
    rewrite(data_file(release, "questions", source), lambda t: t.slice(1))
    rewrite(data_file(release, "questions", target), lambda t: pa.concat_tables([t, row.cast(t.schema)]))
    return row["qid"][0].as_py()


@pytest.mark.parametrize("source,target", [("dev", "train"), ("train", "dev")])
def test_validate_names_a_question_in_the_wrong_one_of_train_and_dev(release, tmp_path, source, target):
    broken = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, broken)
    qid = move_question(broken, source, target)
    report = validate(broken, load=False)
    dev = next(c for c in report.checks if c.name.startswith("the dev split is"))
    assert not dev.ok and f"qid {qid}" in dev.examples[0] and f"questions/{target}" in dev.examples[0], dev.examples


def test_a_negative_level_at_the_answer_level_is_refused():
    paper = load_profile("paper").model_dump()
    paper["training"]["negative_level"] = 4
    with pytest.raises(ValueError, match="negative_level .4. must be below complexity.answer_level .4."):
        Profile.model_validate(paper)


def test_a_release_without_training_settings_is_named(release, tmp_path):
    broken = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, broken)
    data = manifest(broken)
    del data["training"]
    (broken / "manifest.json").write_text(json.dumps(data))
    report = validate(broken, load=False)
    failed = {c.name: c.examples for c in report.checks if not c.ok}
    assert any("no `training` section" in e for examples in failed.values() for e in examples), failed
