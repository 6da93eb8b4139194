"""The authors' clicked-document pass (DylanJoo/crux crux/augmentation/gen_ratings_offload_qrel.py
lines 82-91, at dabfb0ac48ed41dbac9a80d4cbcb75c32db44405) zips the clicked ids with a text list that skipped the
missing documents. Their loop's own logic is run here on a question with a missing clicked document; the import
(`--format crux-ratings --corpus`) flags the ratings it graded on another document's text, counts them in the record,
the manifest and the card, and build-release can leave them out. Real corpus, questions, release, validate."""

import json

import pyarrow.parquet as pq
import pytest

from builder.release.validate.folder import validate
from generation.labels.authors_pass import clicked_pass, graded_on_other_text
from generation.stages.corpus import CorpusStage, write_url_map
from generation.stages.questions import QuestionsStage
from tests.helpers import cli, hub_record

A, B, C, D = (f"{c}" * 32 for c in "ABCD")  # clicked URL-hashes in DocStream order; B is missing from the corpus


def their_loop(id, qrel, ratings_done, run, corpus, subquestions):
    """Lines 82-102 of their file, verbatim but for the file write: the request ids and the text each carried."""
    requests = []
    doc_id_list = [docid for docid in qrel[id] if (docid not in ratings_done[id] and docid not in run[id])]
    doc_text_list = []
    for docid in doc_id_list:
        try:
            doc_text_list.append(corpus[docid])
        except:  # noqa: E722 - theirs
            print(f"Document {docid} not found in corpus for id {id}. Skipping.")
    for docid, doc in zip(doc_id_list, doc_text_list):
        for j, question in enumerate(subquestions):  # noqa: B007 (the authors' loop as written)
            requests.append((f"{id}::{docid}::{j}", " ".join(doc["text"].split()[:2048])))
    return requests


@pytest.mark.parametrize("run", [[], [C]], ids=["none in the run", "C in their run's top 10"])
def test_their_loop_grades_later_clicked_documents_on_the_next_ones_text(run):
    corpus = {d: {"text": f"the text of {d[0]}"} for d in (A, C, D)}
    qrel = {"7": {d: 1 for d in (A, B, C, D, A)}}  # get_qrel: a dict, a repeated hash keeps its first place
    requests = their_loop("7", qrel, {"7": {}}, {"7": run}, corpus, ["q0", "q1"])
    sent = {rid.split("::")[1]: text[-1] for rid, text in requests}
    pairs = clicked_pass([A, B, C, D, A], corpus, excluded=run)
    assert {asked: sent_id[0] for asked, sent_id in pairs} == sent
    if not run:
        assert sent == {A: "A", B: "C", C: "D"}  # D is never requested
        assert graded_on_other_text([A, B, C, D], corpus) == {B: C, C: D}
    else:
        assert sent == {A: "A", B: "D"}
        assert graded_on_other_text([A, B, C, D], corpus, excluded=run) == {B: D}
    # which ids are flagged does not depend on their run, only on where the missing documents are
    flagged = set(graded_on_other_text([A, B, C, D], corpus))
    assert set(graded_on_other_text([A, B, C, D], corpus, excluded=run)) == flagged - set(run)
    assert graded_on_other_text([A, C, D], corpus) == {}


def import_ratings(ratings, root, out, *extra):
    """`import-labels` of the authors' ratings for the fixture's questions (`extra`: `--corpus DIR` checks their
    clicked pass)."""
    return cli(
        "import-labels",
        ratings,
        "--format",
        "crux-ratings",
        "--profile",
        "crux-code",
        "--judge",
        "the authors' ratings",
        "--subquestions",
        root / "questions",
        *extra,
        "--out",
        out,
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("authors-pass")
    stream = [
        {
            "Url": f"https://{d[0].lower()}.example.org/",
            "CluewebURLHash": d,
            "UrlLanguage": "en",
            "Title": d[0],
            "Snippet": "",
            "Click_Cnt": 0.25,
        }
        for d in (A, B, C, D)
    ]
    records = root / "researchy.jsonl"
    records.write_text(json.dumps(hub_record(DocStream=stream)) + "\n")
    QuestionsStage(None, root / "questions", [records]).run()
    documents = root / "documents.jsonl"
    documents.write_text(
        "".join(
            json.dumps({"id": f"clueweb22-en0000-00-0000{i}", "contents": f"text of {d[0]}", "url_hash": d}) + "\n"
            for i, d in enumerate((A, C, D))
        )
    )
    CorpusStage(None, root / "corpus", [documents]).run()
    write_url_map(root / "corpus")
    ratings = root / "ratings.jsonl"  # as their merge writes the clicked pass: A on its text, B on C's, C on D's
    ratings.write_text(
        "".join(
            json.dumps({"id": "1051893", "docid": d, "rating": [r] * 7}) + "\n" for d, r in ((A, 5), (B, 2), (C, 1))
        )
    )
    code, output = import_ratings(ratings, root, root / "judgments", "--corpus", root / "corpus")
    assert code == 0, output
    return root, " ".join(output.split())


def test_the_import_flags_the_ratings_graded_on_another_documents_text(imported):
    root, output = imported
    rows = pq.read_table(next((root / "judgments").glob("judgments-*.parquet"))).to_pylist()
    status = {(r["url_hash"], r["status"]) for r in rows}
    assert status == {(A, "imported"), (B, "imported_other_text"), (C, "imported_other_text")}
    assert all(r["level"] is not None for r in rows)
    record = json.loads(next((root / "judgments" / "_done").glob("*.json")).read_text())
    assert record["extra"]["imported"]["graded_on_other_text"] == {
        "missing_clicked_documents": 1,
        "documents": 2,
        "ratings": 14,
        "ratings_without_level": 0,
    }
    assert "graded 14 ratings of 2 documents on another document's text, after 1 clicked documents missing" in output


def test_without_a_corpus_nothing_is_flagged_nor_claimed(imported, tmp_path):
    root, _ = imported
    code, output = import_ratings(root / "ratings.jsonl", root, tmp_path / "j")
    assert code == 0 and "another document's text" not in output
    record = json.loads(next((tmp_path / "j" / "_done").glob("*.json")).read_text())
    assert record["extra"]["imported"]["graded_on_other_text"] is None
    code, output = cli(
        "build-release",
        "--profile",
        "crux-code",
        "--judgments",
        tmp_path / "j",
        "--questions",
        root / "questions",
        "--out",
        tmp_path / "r",
        "--leave-out-other-text",
    )
    assert code == 1 and "nothing to leave out" in output


@pytest.mark.parametrize("leave_out", [False, True], ids=["kept", "left out"])
def test_the_release_counts_them_and_can_leave_them_out(imported, tmp_path, leave_out):
    root, _ = imported
    out = tmp_path / "release"
    code, output = cli(
        "build-release",
        "--profile",
        "crux-code",
        "--judgments",
        root / "judgments",
        "--questions",
        root / "questions",
        "--out",
        out,
        *(["--leave-out-other-text"] if leave_out else []),
    )
    assert code == 0, output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["imported"]["graded_on_other_text"]["ratings"] == 14
    judgments = sum(s["judgments"] for s in manifest["stats"].values())
    assert judgments == (7 if leave_out else 21)
    assert manifest["imported"].get("left_out") == ({"imported_other_text": 14} if leave_out else None)
    card = " ".join((out / "README.md").read_text().split())
    assert "14 ratings of 2 (question, document) pairs graded on another document's text" in card
    assert ("14 of them are left out of this release" in card) == leave_out
    (tmp_path / "bounds.yaml").write_text("unparsed_max: 1\n")
    report = validate(out, expect=tmp_path / "bounds.yaml", load=False)
    assert report.ok, [(c.name, c.examples) for c in report.checks if not c.ok]


def test_ratings_without_a_level_graded_on_another_text_are_flagged_and_counted(imported, tmp_path):
    """Their -1 (no digit), -2 (request failed) and 7 (off the scale) were also answers about another document's
    text: each rating of such a document is flagged, with or without a level, and the levelless ones are counted."""
    root, _ = imported
    ratings = tmp_path / "ratings.jsonl"
    lists = {A: [5] * 7, B: [2, -1, -2, 7, 3, 1, 0], C: [-1] * 7}
    ratings.write_text("".join(json.dumps({"id": "1051893", "docid": d, "rating": r}) + "\n" for d, r in lists.items()))
    code, output = import_ratings(ratings, root, tmp_path / "judgments", "--corpus", root / "corpus")
    assert code == 0, output
    rows = pq.read_table(next((tmp_path / "judgments").glob("judgments-*.parquet"))).to_pylist()
    assert {r["status"] for r in rows if r["url_hash"] in (B, C)} == {"imported_other_text"}
    assert sorted((r["level"] is None) for r in rows if r["url_hash"] == B) == [False] * 4 + [True] * 3
    record = json.loads(next((tmp_path / "judgments" / "_done").glob("*.json")).read_text())
    assert record["extra"]["imported"]["graded_on_other_text"] == {
        "missing_clicked_documents": 1,
        "documents": 2,
        "ratings": 14,
        "ratings_without_level": 10,
    }
    flat = " ".join(output.split())
    assert "graded 14 ratings of 2 documents on another document's text (10 of them without a level" in flat
    code, output = cli(
        "build-release",
        "--profile",
        "crux-code",
        "--judgments",
        tmp_path / "judgments",
        "--questions",
        root / "questions",
        "--out",
        tmp_path / "release",
    )
    assert code == 0, output
    card = " ".join((tmp_path / "release" / "README.md").read_text().split())
    assert "14 ratings of 2 (question, document) pairs graded on another document's text (10 of them without a" in card
    (tmp_path / "bounds.yaml").write_text("unparsed_max: 1\n")
    report = validate(tmp_path / "release", expect=tmp_path / "bounds.yaml", load=False)
    assert report.ok, [(c.name, c.examples) for c in report.checks if not c.ok]
