"""The training configs (`hard-negatives`, `graded-lists`) and the dev split of a built release: each
loads by name with `load_dataset`, holds exactly what the judgments give (recomputed here in plain
Python from the release's own judgment files), the card's snippets run against it, and `validate` catches a dev
split that does not follow its rule."""

import hashlib
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
from generation.profiles.profile import Profile, load_profile

REPO = "org/researchy-subq-judgments"  # the repo synthetic_release (conftest.py) builds for
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


# Synthetic judgments of the paper profile in distribution mode, with runs (every fifth question's retrieving nothing
# past its pool), so every source of negatives is used.
SAMPLE = dict(
    subquestions=600,
    judgments=12_000,
    test_share=0.25,
    shards=2,
    seed=5,
    unparsed_share=0.004,
    runs_depth=40,
    runs_pool_only_every=5,
)
SYNTHETIC_RELEASE = dict(profile=profile(), rows_per_file=2000, **SAMPLE)


@pytest.fixture(scope="module")
def inputs(release_inputs):
    return release_inputs


def judgments(release, split):
    return pq.read_table(config("judgments").files(release, split)).to_pylist()


def manifest(release):
    return json.loads((release / "manifest.json").read_text())


LAST = float("inf")


def hardness(r):
    return (
        r["rerank_rank"] if r["rerank_rank"] is not None else LAST,
        r["bm25_rank"] if r["bm25_rank"] is not None else LAST,
        r["docid"],
    )


def fnv1a64(text):
    """FNV-1a, 64-bit, over the UTF-8 bytes (offset basis and prime from Fowler, Noll and Vo)."""
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) % 2**64
    return value


def sha(key):
    return int.from_bytes(hashlib.sha256(f"other-question-negatives:{key}".encode()).digest()[:8], "big")


def retrieved_from_runs(inputs, graded_of, kept=20):
    """Per question, the run documents no graded judgment of it covers, hardest first, read from the runs."""
    ranks = {}
    for r in pq.read_table(sorted(inputs["runs"].glob("*.parquet"))).to_pylist():
        entry = ranks.setdefault((r["qid"], r["docid"]), {"docid": r["docid"], "bm25_rank": None, "rerank_rank": None})
        entry["bm25_rank" if r["stage"] == "bm25" else "rerank_rank"] = r["rank"]
    lists = {}
    for (qid, docid), entry in ranks.items():
        if docid not in graded_of.get(qid, set()):
            lists.setdefault(qid, []).append(entry)
    return {qid: sorted(docs, key=hardness)[:kept] for qid, docs in lists.items()}


def rotated(candidates, i, m):
    return [candidates[x] for x in sorted({(i * m + j) % len(candidates) for j in range(min(m, len(candidates)))})]


SOURCES = ("judged", "retrieved_unjudged", "other_question")


def expected_rows(release, split, inputs, k=K, negative_level=1, order=SOURCES):
    """Hard-negative rows and graded lists as the card describes them, in plain Python from the release's
    judgments and the runs: (sub-question, positive) -> [(negative, source)], lists, short, positives."""
    rows_all = judgments(release, split)
    by_subq, graded_of = {}, {}
    for r in rows_all:
        if r["level"] is not None:
            by_subq.setdefault(r["subq_id"], []).append(r)
            graded_of.setdefault(r["qid"], set()).add(r["docid"])
    retrieved = retrieved_from_runs(inputs, graded_of)
    sampled = sorted({r["qid"] for r in rows_all}, key=sha)[:1024]
    pairs = sorted(
        {
            (r["docid"], r["qid"])
            for r in rows_all
            if r["qid"] in sampled and r["level"] is not None and r["level"] <= negative_level
        },
        key=lambda pair: (sha(pair[1]), pair[0]),
    )
    pool = list(dict.fromkeys(docid for docid, _ in pairs))  # each document once, at its first place
    hard, lists, short, positives = {}, {}, 0, 0
    for subq, rows in by_subq.items():
        graded = sorted(rows, key=lambda r: (-r["level"], *hardness(r)))
        qid = graded[0]["qid"]
        low = [r["docid"] for r in graded if r["level"] <= negative_level]
        unjudged = [d["docid"] for d in retrieved.get(qid, [])]
        for i, p in enumerate(r for r in graded if r["level"] >= 4):
            positives += 1
            taken = []
            for source in order:
                m, chosen = k - len(taken), {d for d, _ in taken}
                if m == 0:
                    break
                if source == "other_question":
                    excluded, start = graded_of[qid] | set(unjudged) | chosen, fnv1a64(subq) + i * m
                    for step in range(len(pool)):
                        docid = pool[(start + step) % len(pool)]
                        if len(taken) < k and docid not in excluded:
                            taken.append((docid, source))
                            excluded.add(docid)
                    continue
                candidates = [d for d in (low if source == "judged" else unjudged) if d not in chosen]
                taken += [(d, source) for d in rotated(candidates, i, m)] if candidates else []
            if len(taken) < k:
                short += 1
                continue
            hard[(subq, p["docid"])] = taken
        lists[subq] = {
            "docids": [r["docid"] for r in graded],
            "labels": [r["level"] for r in graded],
            "expected": [r["expected"] for r in graded],
            "probs": [r["probs"] for r in graded],
            "qid": qid,
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
def test_every_positive_has_a_row_with_its_negatives_sources_named(release, inputs, split):
    hard, _, short, positives = expected_rows(release, split, inputs)
    rows = datasets.load_dataset(str(release), "hard-negatives", split=split)
    assert rows.column_names == [
        "query_id",
        "query_text",
        "positive_document_ids",
        "negative_document_ids",
        "negative_sources",
        "qid",
    ]
    texts = {q["_id"]: q["text"] for q in datasets.load_dataset(str(release), "queries", split=split)}
    got = {}
    for row in rows:
        assert len(row["positive_document_ids"]) == 1 and len(row["negative_document_ids"]) == K
        assert row["query_text"] == texts[row["query_id"]] and row["query_id"].startswith(row["qid"] + "-")
        got[(row["query_id"], row["positive_document_ids"][0])] = list(
            zip(row["negative_document_ids"], row["negative_sources"])
        )
    assert got == hard and len(rows) == len(hard) == positives > 0 and short == 0
    assert {s for taken in hard.values() for _, s in taken} == {"judged", "retrieved_unjudged", "other_question"}


def test_retrieved_unjudged_lists_are_the_runs_documents_no_judgment_covers(release, inputs):
    for split in ("train", "dev", "test"):
        graded_of = {}
        for r in judgments(release, split):
            if r["level"] is not None:
                graded_of.setdefault(r["qid"], set()).add(r["docid"])
        want = retrieved_from_runs(inputs, graded_of)
        got = {q["qid"]: q["retrieved_unjudged"] for q in datasets.load_dataset(str(release), "questions", split=split)}
        assert got == {qid: want.get(qid, []) for qid in got} and any(got.values())


def test_positives_and_negatives_by_source_are_counted_in_the_manifest_and_card(release, inputs):
    stated = manifest(release)["training"]
    short = positives = 0
    by_source = dict.fromkeys(("judged", "retrieved_unjudged", "other_question"), 0)
    for split in ("train", "dev", "test"):
        hard, _, s, p = expected_rows(release, split, inputs)
        short, positives = short + s, positives + p
        for taken in hard.values():
            for _, source in taken:
                by_source[source] += 1
    assert (stated["short_positives"], stated["positives"], stated["negatives_by_source"]) == (
        short,
        positives,
        by_source,
    )
    assert {k: stated[k] for k in ("negative_level", "negatives", "seed", "dev_share", "answer_level")} == {
        "negative_level": 1,
        "negatives": K,
        "seed": 0,
        "dev_share": 0.25,
        "answer_level": 4,
    }
    assert stated["retrieved_unjudged_from"] == "runs"
    body = " ".join((release / "README.md").read_text().split())
    assert f"Over all splits, {positives - short:,} of {positives:,} positives have a row" in body


@pytest.mark.parametrize("split", ["train", "test"])
def test_graded_lists_hold_every_graded_judgment_once(release, inputs, split):
    _, lists, _, _ = expected_rows(release, split, inputs)
    rows = datasets.load_dataset(str(release), "graded-lists", split=split)
    got = {r["query_id"]: r for r in rows}
    assert set(got) == set(lists)
    for subq, want in lists.items():
        row = got[subq]
        assert (row["docids"], row["labels"], row["qid"]) == (want["docids"], want["labels"], want["qid"])
        assert row["expected"] == pytest.approx(want["expected"])
        assert np.allclose(row["probs"], want["probs"])


def test_any_arrival_order_gives_the_same_rows(release):
    """Judgments in question order make one sorted run on disk; shuffled, many runs merged: the same rows."""
    subquestions = pq.read_table(config("subquestions").files(release, "train"))
    table = pq.read_table(config("judgments").files(release, "train"))
    position = pa.compute.index_in(table["subq_id"], value_set=subquestions["subq_id"]).to_numpy(zero_copy_only=False)
    split = np.zeros(subquestions.num_rows, np.int64)
    outputs = []
    orders = {False: np.argsort(position, kind="stable"), True: np.random.default_rng(0).permutation(table.num_rows)}
    for shuffled, order in orders.items():
        rows = TrainingRows(subquestions, split, 4, profile().training)
        for start in range(0, table.num_rows, 1000):
            chunk = order[start : start + 1000]
            rows.add(table.take(pa.array(chunk)), position[chunk])
        assert (rows.runs.spilled > 1) == shuffled
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
    # every document a row names: judged, retrieved unjudged (the runs) and other questions'
    docids = {d for r in lists for d in r["docids"]}
    docids |= {d for r in hard for d in [*r["positive_document_ids"], *r["negative_document_ids"]]}
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
        # the user's texts: every named document's but one, whose rows (or list places) are left out and counted
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
    assert any("manifest.json: training: Field required" in e for examples in failed.values() for e in examples), failed


@pytest.mark.parametrize("bucket_ids", [10**6, 50])
def test_the_documents_users_bring_are_counted_a_bucket_at_a_time(release, monkeypatch, bucket_ids):
    """`ranking_documents` spills the judged ids and the negatives to buckets on disk by a hash of the id and counts
    a bucket at a time: with one bucket and with many, the counts are those of every id held at once."""
    from builder.release import ranking_documents as documents

    judged = documents.judged_docids(release)["docid"].combine_chunks()
    whole = {"judged": len(judged), "unjudged_negatives": len(documents.unjudged_negatives(release, judged))}
    monkeypatch.setattr(documents, "BUCKET_IDS", bucket_ids)
    assert documents.ranking_documents(release) == whole and whole["unjudged_negatives"] > 0


def test_the_card_states_the_documents_and_negatives_the_files_hold_and_validate_checks_it(release, tmp_path):
    """The mteb note's corpus and the negatives by source, recomputed here from the release's own files; a card
    that says "the judged documents only" (re-sealed) and one with another count are found by `validate`."""
    from builder.release.validate.training_statements import TRAINING_STATEMENTS
    from builder.standins.release_edits import edit_card, reseal

    judged = {
        d for s in ("train", "dev", "test") for p in config("corpus-ids").files(release, s)
        for d in pq.read_table(p)["_id"].to_pylist()
    }  # fmt: skip
    rows = [r for s in ("train", "dev", "test") for p in config("hard-negatives").files(release, s)
            for r in pq.read_table(p).to_pylist()]  # fmt: skip
    unjudged = {d for r in rows for d in r["negative_document_ids"]} - judged
    sources = [s for r in rows for s in r["negative_sources"]]
    assert sources.count("retrieved_unjudged") > 0 and unjudged, "the sample has unjudged negatives"
    card = (release / "README.md").read_text()
    said = f"the release's {len(judged):,} judged documents and the {len(unjudged):,} never-judged documents"
    assert said in card and "the judged documents only" not in card
    # mteb caches results by model name and names every local model no_model_name/available: the snippet turns the
    # cache off (mteb/evaluate.py `evaluate`: "If None, then no cache will be used")
    assert "results = mteb.evaluate(model, ResearchySubquestions(), cache=None)" in card
    per_split = []
    for split in ("train", "dev", "test"):
        of_split = [s for p in config("hard-negatives").files(release, split) for r in pq.read_table(p).to_pylist()
                    for s in r["negative_sources"]]  # fmt: skip
        per_split.append(split + " " + ", ".join(
            f"`{s}` {of_split.count(s):,} ({of_split.count(s) / len(of_split):.1%})"
            for s in ("judged", "retrieved_unjudged", "other_question")
        ))  # fmt: skip
    assert f"Negatives by source, per split: {'; '.join(per_split)}." in " ".join(card.split())
    check = next(c for c in validate(release, load=False).checks if c.name == TRAINING_STATEMENTS)
    assert check.failures == 0, check.examples

    for old, new, finding in (
        (said.split(" and the ")[0] + " and the " + f"{len(unjudged):,} never-judged documents its `hard-negatives` "
         "rows name as negatives", "the judged documents only", "the mteb corpus is stated as (the judged documents "
         "only); the release's files give"),
        ("Negatives by source, per split: train `judged`", "Negatives by source, per split: train `judged` 1",
         "README.md states the negatives by source as 'Negatives by source, per split: train `judged` 1"),
    ):  # fmt: skip
        copy = tmp_path / f"edited-{len(old)}"
        shutil.copytree(release, copy)
        edit_card(copy, old, new)
        reseal(copy)
        check = next(c for c in validate(copy, load=False).checks if c.name == TRAINING_STATEMENTS)
        assert any(finding in str(e) for e in check.examples), check.examples
