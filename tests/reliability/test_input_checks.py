"""Inputs that used to slip through (CHANGELOG.md, 2026-11-23): each is now one clear line (or a warning saying what was
assumed), through the CLI as a user meets it or the library function the command calls."""

import gzip
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builder.analysis.evaluate import RunWarning, read_run
from builder.release.validate.folder import validate
from generation.corpus.topics import load_topics
from generation.errors import InputError
from generation.stages import read_stage
from generation.stages.corpus import CorpusStage, url_hash_of, write_url_map
from generation.stages.questions import QuestionsStage
from generation.storage.shards import ShardError
from tests.helpers import assert_one_line_error as one_line_error
from tests.helpers import cli_one_line as cli
from tests.helpers import hub_record


@pytest.fixture(scope="module")
def judged(synthetic_release):
    release, inputs = synthetic_release("judged", subquestions=200, judgments=3_600, test_share=0.3, shards=1, seed=21)
    return {**inputs, "release": release}


# --- internal errors that now say what is wrong ---


def test_build_release_agreement_that_is_not_agreement_json(judged, tmp_path):
    args = [
        "build-release",
        "--judgments",
        judged["judgments"],
        *sum((["--questions", q] for q in judged["questions"].values()), []),
        "--profile",
        "paper",
        "--out",
        tmp_path / "release",
    ]
    garbage = tmp_path / "agreement.json"
    garbage.write_text("{not json")
    one_line_error(*cli(*args, "--agreement", garbage), "agreement.json:1", "not JSON")
    garbage.write_text(json.dumps({"a": "x", "b": "y"}))
    one_line_error(*cli(*args, "--agreement", garbage), "agreement.json", "no coverage, measures")
    assert not (tmp_path / "release" / "data").exists(), "refused before the build"


def test_agreement_mapping_without_a_target_and_a_threshold_no_grade_reaches(judged):
    labels = judged["judgments"]
    one_line_error(
        *cli("agreement", "--judgments", labels, "--against", labels, "--map-a", "0:0,1:1"),
        "--map-a: scale mapping has no target for grades [2, 3, 4, 5]",
    )
    one_line_error(
        *cli("agreement", "--judgments", labels, "--against", labels, "--binary-at", "99", "--resamples", "0"),
        "--binary-at 99: no label here reaches it",
        "[0, 1, 2, 3, 4, 5]",
    )
    code, output = cli("agreement", "--judgments", labels, "--against", labels, "--binary-at", "4", "--resamples", "0")
    assert code == 0, output


def test_a_garbage_chunk_record_is_named(small_pipeline, tmp_path):
    from generation.stages.judge import JudgeStage

    chunks = tmp_path / "j" / "judgments-00000-of-00001.chunks"
    chunks.mkdir(parents=True)
    (chunks / "config.json").write_text("\x00garbage")
    with pytest.raises(ShardError, match=r"config.json: not a valid chunk record .*remove the folder"):
        JudgeStage(
            small_pipeline["profile"],
            tmp_path / "j",
            small_pipeline["questions"],
            small_pipeline["candidates"],
            small_pipeline["index"],
        ).run()


def test_validate_a_release_whose_subquestions_name_no_question(judged, tmp_path):
    broken = tmp_path / "release"
    shutil.copytree(judged["release"], broken)
    path = sorted((broken / "data" / "subquestions").glob("train-*.parquet"))[0]
    table = pq.read_table(path)
    qids = table["qid"].to_pylist()
    qids[:20] = ["404"] * 20  # the first question's sub-questions, with their judgments
    pq.write_table(table.set_column(1, table.schema.field("qid"), pa.array(qids)), path)
    report = validate(broken, load=False)  # no exception
    assert not report.ok
    assert any("belong to no question" in e for c in report.checks for e in c.examples), [
        (c.name, c.examples) for c in report.checks if not c.ok
    ]


# --- silent wrong output ---


def test_click_shares_must_be_a_distribution(tmp_path, write_jsonl):
    huge = hub_record("1")
    huge["DocStream"][0]["Click_Cnt"] = 1e30
    over = hub_record("2")
    over["DocStream"][0]["Click_Cnt"] = 0.9  # 0.9 + 0.25
    rounded = hub_record("3")
    rounded["DocStream"][0]["Click_Cnt"] = 0.7501  # 1.0001: the rounding of the Hub's shares
    rejects = tmp_path / "rejects.jsonl"
    summary = QuestionsStage(None, tmp_path / "q", [write_jsonl([huge, over, rounded])], rejects=rejects).run()
    assert summary.questions == 1 and summary.rejected == 2
    errors = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert errors[0]["field"] == "DocStream[0].Click_Cnt" and "in [0, 1], got 1e+30" in errors[0]["error"]
    assert errors[1]["field"] == "DocStream" and "sum to 1.15: not a probability distribution" in errors[1]["error"]


def test_url_hashes_that_are_not_32_hex_digits_are_rejected(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    lines = [
        {"ClueWeb22-ID": "clueweb22-en0000-00-00000", "URL": "https://a\n", "URL-hash": 12345, "Clean-Text": "a"},
        {"ClueWeb22-ID": "clueweb22-en0000-00-00001", "URL": "https://b\n", "URL-hash": "XYZ", "Clean-Text": "b"},
        {
            "ClueWeb22-ID": "clueweb22-en0000-00-00002",
            "URL": "https://c\n",
            "URL-hash": url_hash_of("https://c").lower(),
            "Clean-Text": "c",
        },
        {"id": "doc-3", "contents": "d", "url_hash": "not-a-hash"},
    ]
    with gzip.open(docs / "en0000-00.json.gz", "wt") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    rejects = tmp_path / "rejects.jsonl"
    summary = CorpusStage(None, tmp_path / "corpus", [docs], rejects=rejects).run()
    assert summary.documents == 1 and summary.rejected["undecodable or malformed"] == 3
    kept = read_stage(tmp_path / "corpus", "corpus").to_table()
    assert kept["url_hash"].to_pylist() == [url_hash_of("https://c")]  # upper-cased, as Researchy's
    reasons = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [r["field"] for r in reasons] == ["URL-hash", "URL-hash", "url_hash"]
    assert "expected 32 hex digits" in reasons[0]["error"] and "12345" in reasons[0]["error"]


def test_one_url_hash_of_two_documents_is_said_and_resolved_the_same_way_every_time(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    same = url_hash_of("https://same")
    (docs / "a.jsonl").write_text(
        "".join(json.dumps({"id": i, "contents": "text", "url_hash": same}) + "\n" for i in ("doc-b", "doc-a"))
    )
    CorpusStage(None, tmp_path / "corpus", [docs]).run()
    path, rows = write_url_map(tmp_path / "corpus")
    err = " ".join(capsys.readouterr().err.split())
    assert "warning:" in err and "1 documents share a URL-hash" in err and "doc-a and doc-b" in err
    assert rows == 1 and pq.read_table(path)["docid"].to_pylist() == ["doc-a"]


def test_a_run_with_nan_scores_is_not_ranked(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 nan t\nq1 Q0 d2 2 0.5 t\nq1 Q0 d3 3 NaN t\n")
    with pytest.warns(RunWarning, match="2 lines malformed .*a score that is a number.*line 1, 3"):
        assert read_run(run).ranked == {"q1": ["d2"]}
    nan_only = tmp_path / "nan.trec"
    nan_only.write_text("q1 Q0 d1 1 nan t\n")
    one_line_error(*cli("evaluate", tmp_path, "--run", nan_only), "nan.trec:1", "the score a number")


def test_validate_against_a_release_without_the_split(judged, tmp_path):
    previous = tmp_path / "previous"
    previous.mkdir()
    manifest = json.loads((judged["release"] / "manifest.json").read_text())
    del manifest["stats"]["test"]
    (previous / "manifest.json").write_text(json.dumps(manifest))
    report = validate(judged["release"], against=previous, load=False)
    failed = {c.name: c.examples for c in report.checks if not c.ok}
    assert list(failed) == ["per-level shares within the expected bounds or the previous release"]
    assert "has no test split" in failed[list(failed)[0]][0]


# --- accepted without a word ---


def test_an_empty_questions_file_and_a_question_without_subquestions(tmp_path, write_jsonl):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    one_line_error(*cli("questions", "--input", empty, "--out", tmp_path / "q"), "empty.jsonl", "no questions read")
    assert not (tmp_path / "q" / "questions.parquet").exists()
    bare = hub_record("5")
    bare["gpt4_decomposition"]["subquestions"] = []
    one_line_error(
        *cli("questions", "--input", write_jsonl([bare]), "--out", tmp_path / "q"),
        "field 'gpt4_decomposition.subquestions': no sub-questions",
        "nothing to judge",
    )
    summary = QuestionsStage(
        None,
        tmp_path / "q2",
        [write_jsonl([bare, hub_record("6")], name="two.jsonl")],
        rejects=tmp_path / "rejects.jsonl",
    ).run()
    assert (summary.questions, summary.rejected) == (1, 1)
    code, output = cli(
        "questions",
        "--input",
        write_jsonl([bare], name="one.jsonl"),
        "--out",
        tmp_path / "q3",
        "--rejects",
        tmp_path / "rejects3.jsonl",
    )  # going on past bad records was asked for: said
    assert code == 0 and "warning: no questions kept: all 1 records were rejected" in output, output


def test_a_split_that_is_not_a_release_split(tmp_path, write_jsonl):
    one_line_error(
        *cli("questions", "--input", write_jsonl([hub_record("1")]), "--out", tmp_path / "q", "--split", "../x"),
        "--split '../x': Researchy Questions' splits are train and test (build-release carves dev from train)",
    )
    assert not (tmp_path / "q").exists()


def test_a_corpus_input_changed_or_deleted_after_its_shard_was_done(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a", "b"):
        (docs / f"{name}.jsonl").write_text(json.dumps({"id": f"doc-{name}", "contents": "text"}) + "\n")
    CorpusStage(None, tmp_path / "corpus", [docs]).run()
    assert CorpusStage(None, tmp_path / "corpus", [docs]).run().skipped_shards == 1  # unchanged: skipped as before
    (docs / "b.jsonl").unlink()
    with pytest.raises(ShardError, match=r"made from other inputs than now: .*b.jsonl is gone.*remove the shard"):
        CorpusStage(None, tmp_path / "corpus", [docs]).run()
    read_stage(tmp_path / "corpus", "corpus", full=False)  # a reader goes on, and says what it serves
    err = " ".join(capsys.readouterr().err.split())
    assert "warning:" in err and "b.jsonl is gone" in err and "still holds the documents they had then" in err
    (docs / "a.jsonl").write_text(json.dumps({"id": "doc-a", "contents": "other text"}) + "\n")
    with pytest.raises(ShardError, match=r"a.jsonl changed"):
        CorpusStage(None, tmp_path / "corpus", [docs / "a.jsonl"]).run()


def test_plan_with_a_tokenizer_that_is_not_there(tmp_path):
    one_line_error(
        *cli(
            "plan",
            "--profile",
            "demo",
            "--subquestions",
            tmp_path,
            "--candidates",
            tmp_path,
            "--index",
            tmp_path,
            "--tokenizer",
            "/no/such/path",
        ),
        "--tokenizer /no/such/path",
        "is not on this machine",
    )


# --- unclear ---


def test_publish_tag_checked_before_anything(judged):
    one_line_error(
        *cli("publish", judged["release"], "--repo", "org/researchy-subq-judgments", "--tag", "bad tag/../x"),
        "--tag 'bad tag/../x' is not a valid git ref name",
        "check-ref-format",
    )


def test_a_questions_table_without_its_question_column_names_the_file(tmp_path, write_jsonl):
    QuestionsStage(None, tmp_path / "q", [write_jsonl([hub_record("1")])]).run()
    table = pq.read_table(tmp_path / "q" / "questions.parquet")
    pq.write_table(table.drop_columns(["question"]), tmp_path / "q" / "questions.parquet")
    with pytest.raises(InputError, match=r"questions.parquet:0: no column 'question' \(it has qid, split"):
        load_topics(tmp_path / "q")
