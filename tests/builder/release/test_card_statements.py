"""The card's statements of an order, a scope, a kind and a method (builder/release/card_statements.py): each one is
rendered from the code that defines it and reads true against the release's own files, recomputed here in plain
Python (and pandas for the quartiles); a wrong one planted in the card is named by `validate`; the docs state the
same order; the label-agreement section says which splits its pairs are in; `unparsed` is listed only where it is."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import datasets
import pandas as pd
import pyarrow.parquet as pq
import pytest

from builder.analysis.agreement import agreement
from builder.release.assemble.agreement_scope import UNKNOWN
from builder.release.assemble.folder import ReleaseOptions, build_release
from builder.release.assemble.training_configs import LIST_ORDER
from builder.release.card_statements import QUARTILE_WORDS, order_text
from builder.release.layout import config
from builder.release.validate.card_statements import CARD_STATEMENTS
from builder.release.validate.folder import validate
from builder.release.validate.training_reference import LIST_ORDER as VALIDATE_ORDER
from builder.release.validate.training_statements import TRAINING_STATEMENTS
from builder.standins.release_edits import edit_card
from builder.standins.synthetic import synthesize
from tests.builder.release.assemble.test_training_configs import SYNTHETIC_RELEASE as TRAINING_RELEASE

ROOT = Path(__file__).resolve().parents[3]
SPLITS = ("train", "dev", "test")
SOURCES = ("judged", "retrieved_unjudged", "other_question")
SYNTHETIC_RELEASE = {**TRAINING_RELEASE, "subquestions": 300, "judgments": 6_000}
STATISTICS = "every number in the card's statistics equals the data"


def folded(release: Path) -> str:
    return " ".join((release / "README.md").read_text().split())


def rows_of(release: Path, name: str, split: str) -> list[dict]:
    return [r for p in config(name).files(release, split) for r in pq.read_table(p).to_pylist()]


def test_the_graded_lists_are_in_the_order_every_statement_of_it_gives(release):
    words = "level descending, then rerank rank, then BM25 rank (a missing rank last), then docid"
    assert order_text(LIST_ORDER) == order_text(VALIDATE_ORDER) == words
    card = folded(release)
    assert card.count("level descending") == card.count(words) >= 3  # the Training section, the snippet, the field
    last = float("inf")
    for split in SPLITS:
        by_subq: dict[str, list[dict]] = {}
        for r in rows_of(release, "judgments", split):
            if r["level"] is not None:
                by_subq.setdefault(r["subq_id"], []).append(r)
        for row in rows_of(release, "graded-lists", split):
            judged = by_subq[row["query_id"]]
            key = [(-r["level"], r["rerank_rank"] or last, r["bm25_rank"] or last, r["docid"]) for r in judged]
            assert row["docids"] == [r["docid"] for _, r in sorted(zip(key, judged), key=lambda pair: pair[0])]


def test_each_negative_is_of_the_kind_its_source_names_and_the_shares_are_per_split(release):
    card = folded(release)
    level = json.loads((release / "manifest.json").read_text())["training"]["negative_level"]
    assert "hardest judged negatives" not in card
    assert "`retrieved_unjudged` = retrieved for the question, never judged" in card
    shares = []
    for split in SPLITS:
        judgments = rows_of(release, "judgments", split)
        judged = {(r["subq_id"], r["docid"]): r["level"] for r in judgments}
        questions_judged = {(r["qid"], r["docid"]) for r in judgments}
        counts: Counter = Counter()
        for row in rows_of(release, "hard-negatives", split):
            for docid, source in zip(row["negative_document_ids"], row["negative_sources"]):
                counts[source] += 1
                level_here = judged.get((row["query_id"], docid))
                if source == "judged":
                    assert level_here is not None and level_here <= level
                else:  # never judged for this question: retrieved_unjudged never at all, other_question elsewhere
                    assert (row["qid"], docid) not in questions_judged
        total = sum(counts.values())
        shares.append(split + " " + ", ".join(f"`{s}` {counts[s]:,} ({counts[s] / total:.1%})" for s in SOURCES))
        assert counts["retrieved_unjudged"] > 0
    assert f"Negatives by source, per split: {'; '.join(shares)}." in card


def test_the_quartiles_are_pandas_own_and_say_their_method(release):
    card = (release / "README.md").read_text()
    stats = json.loads((release / "manifest.json").read_text())["stats"]
    for split in SPLITS:
        values = pd.concat(p.to_pandas() for p in (pq.read_table(f) for f in config("questions").files(release, split)))
        q1, median, q3 = values["completeness"].dropna().astype(float).quantile([0.25, 0.5, 0.75]).round(4).tolist()
        assert stats[split]["complexity"]["completeness_quartiles"] == [q1, median, q3]
        assert f"completeness quartiles {q1} / {median} / {q3} ({QUARTILE_WORDS}; " in card


WRONG_STATEMENTS = {
    "an order": (
        "(level descending, then rerank rank, then BM25 rank (a missing rank last), then docid),\n  and the judge",
        "(level descending, then docid),\n  and the judge",
        CARD_STATEMENTS,
        ("README.md states the graded lists' order as", "level descending, then docid), and the judge"),
    ),
    "a kind": (
        "`retrieved_unjudged`: retrieved for the question, never judged",
        "`retrieved_unjudged`: judged at level <= 1 for the sub-question",
        CARD_STATEMENTS,
        ("README.md states what a `retrieved_unjudged` negative is as", "`retrieved_unjudged`: judged at level"),
    ),
    "a scope (the negatives)": (
        "Negatives by source, per split: train",
        "Negatives by source, over all splits: train",
        TRAINING_STATEMENTS,
        ("README.md states the negatives by source as", "Negatives by source, over all splits: train"),
    ),
    "a scope (the positives)": (
        "Over all splits, ",
        "In train, ",
        CARD_STATEMENTS,
        ("README.md does not state the positives with a hard-negatives row", "Over all splits, "),
    ),
    "a method": (
        "numpy.quantile, method 'linear'",
        "the nearest rank",
        STATISTICS,
        ("card says", "the nearest rank: the default of numpy and pandas"),
    ),
}


@pytest.mark.parametrize("name", sorted(WRONG_STATEMENTS))
def test_validate_names_a_wrong_statement_planted_in_the_card(release, tmp_path, name):
    old, new, check_name, finding = WRONG_STATEMENTS[name]
    copy = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, copy)
    edit_card(copy, old, new)
    report = validate(copy, load=False)
    failed = {c.name: c.examples for c in report.checks if not c.ok}
    assert set(failed) == {check_name}, failed
    assert any(all(part in str(e) for part in finding) for e in failed[check_name]), failed


def test_the_docs_state_the_graded_lists_order_as_the_code_sorts(doc_pages):
    words = order_text(LIST_ORDER)
    stated = 0
    for page in doc_pages:
        text = " ".join(page.read_text().split())
        at = text.find("level descending")
        while at >= 0:
            assert text[at : at + len(words)] == words, f"{page.relative_to(ROOT)}: {text[at : at + 90]!r}"
            stated += 1
            at = text.find("level descending", at + 1)
    assert stated >= 3


@pytest.fixture(scope="module")
def without_unparsed(tmp_path_factory):
    """A small release whose judge gave every pair a level, built with an agreement of its own judgments folder
    against itself, and one with an agreement of a folder it was not built from."""
    root = tmp_path_factory.mktemp("without-unparsed")
    profile = TRAINING_RELEASE["profile"]  # a dev share of 0.25: three splits of a few questions
    sample = dict(subquestions=60, judgments=1_200, test_share=0.25, shards=1, seed=3, unparsed_share=0)
    inputs = synthesize(root / "in", profile=profile, **sample)
    folder = inputs["judgments"]
    own = root / "own.json"
    own.write_text(json.dumps(agreement(folder, folder, resamples=0)))
    elsewhere = root / "elsewhere" / folder.name
    shutil.copytree(folder, elsewhere)
    other = root / "other.json"
    other.write_text(json.dumps(agreement(elsewhere, elsewhere, resamples=0)))
    built = {}
    for name, path in (("own", own), ("other", other)):
        out = root / name / "researchy-subq-judgments"
        questions = list(inputs["questions"].values())
        options = ReleaseOptions(judgments=[folder], questions=questions, out=out, profile=profile, agreement=path)
        build_release(options)
        built[name] = out
    return built


def test_unparsed_is_listed_only_where_it_is(release, without_unparsed):
    """A release with unparsed judgments says where they are and loads `unparsed`; one without says it is left out,
    and `load_dataset` refuses the config, as the card says."""
    rows = json.loads((release / "manifest.json").read_text())["rows"]["unparsed"]
    where = ", ".join(f"{split} {rows[split]:,}" for split in SPLITS if rows.get(split))
    assert f"(`unparsed` config: {where})." in folded(release)
    loaded = datasets.load_dataset(str(release), "unparsed")
    assert {split: loaded[split].num_rows for split in loaded} == {s: n for s, n in rows.items() if n}
    empty = without_unparsed["own"]
    card = folded(empty)
    assert "(`unparsed` config; none in this release, so the config is left out)." in card
    assert (
        "| `unparsed` | 0 / 0 / 0 | judgments whose output had no usable digit ('Other') (no rows in this release: not published) |"
        in card
    )
    with pytest.raises(ValueError, match="BuilderConfig 'unparsed' not found"):
        datasets.load_dataset(str(empty), "unparsed")
    assert validate(empty, load=False).ok
    dataset_page = (ROOT / "docs" / "dataset.md").read_text()
    assert "`load_dataset(R, \"unparsed\")` fails with `BuilderConfig 'unparsed' not found`" in dataset_page


def test_the_agreement_section_says_which_splits_its_pairs_are_in(without_unparsed):
    own = without_unparsed["own"]
    graded = {split: sum(len(r["labels"]) for r in rows_of(own, "graded-lists", split)) for split in SPLITS}
    where = [f"`{split}` ({n:,})" for split, n in graded.items() if n]
    said = f"The {sum(graded.values()):,} shared pairs are the graded judgments of `in/judgments`, a judgments folder "
    assert len(where) == 3 and said + "this release was built from; here they are in " + ", ".join(where[:2]) + (
        f" and {where[2]}."
    ) in folded(own)
    assert UNKNOWN in folded(without_unparsed["other"]) and "shared pairs are the graded" not in folded(
        without_unparsed["other"]
    )
