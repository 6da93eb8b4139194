"""`import-labels`: the authors' ratings, graded qrels and OpenAI Batch results become judgment
shards that build-release, validate and load_dataset take as they take the judge's; every malformed line is one error
line naming its file and line (releases of them: tests/builder/release/test_imported_releases.py). Label files:
tests/fixtures/import_labels/ (its README cites each format's source)."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from generation.profiles.profile import load_profile
from generation.stages.import_labels import ImportLabelsStage
from generation.stages.questions import QuestionsStage
from generation.storage.shards import Shard, sha256_file
from tests.helpers import cli, hub_record

ROOT = Path(__file__).resolve().parents[3]
LABELS = Path(__file__).parents[2] / "fixtures" / "import_labels"


def second_record():
    return hub_record(
        1051894,
        question="do lions purr",
        DocStream=[
            {
                "Url": "https://lions.example.org/purr",
                "CluewebURLHash": "3A4B5C6D7E8F90A1B2C3D4E5F6071829",
                "UrlLanguage": "en",
                "Title": "Lions",
                "Snippet": "",
                "Click_Cnt": 1.0,
            }
        ],
        gpt4_decomposition={
            "llm": "gpt-4",
            "type": "decomposition",
            "headers": [],
            "queries": [],
            "subquestions": ["- Do lions purr?", "- Why can lions not purr?", "- Which big cats purr?"],
        },
    )


def hub_questions(root: Path) -> Path:
    """The questions folder of two Hub records (tests/builder/release/test_imported_releases.py builds it too)."""
    records = root / "researchy.jsonl"
    records.write_text(json.dumps(hub_record()) + "\n" + json.dumps(second_record()) + "\n")
    QuestionsStage(None, root / "questions", [records]).run()
    return root / "questions"


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
    return hub_questions(tmp_path_factory.mktemp("import-questions"))


def imported(folder: Path) -> list[dict]:
    return pq.read_table(folder / "judgments-00000-of-00001.parquet").to_pylist()


def record(folder: Path, shard: str = "00000-of-00001") -> dict:
    return json.loads((folder / "_done" / f"judgments-{shard}.json").read_text())


def test_the_authors_ratings_become_judgments_with_their_parser_rules_statuses(questions, tmp_path):
    summary = ImportLabelsStage(
        load_profile("crux-code"),
        tmp_path / "j",
        questions,
        [LABELS / "ratings.jsonl"],
        "crux-ratings",
        "Llama-3.3-70B-Instruct (the authors' ratings)",
    ).run()
    rows = imported(tmp_path / "j")
    lines = [json.loads(line) for line in (LABELS / "ratings.jsonl").read_text().splitlines()]
    assert len(rows) == sum(len(line["rating"]) for line in lines) == summary.rows == 27
    by_pair = {(r["subq_id"], r["docid"]): r for r in rows}
    for line in lines:
        for k, rating in enumerate(line["rating"]):
            row = by_pair[(f"{line['id']}-{k}", line["docid"])]
            expected = {-1: (None, "no_digit"), -2: (None, "request_failed"), 7: (None, "out_of_scale")}.get(
                rating, (rating, "imported")
            )
            assert (row["level"], row["status"]) == expected
            assert row["raw"] is None and row["probs"] is None and row["source"] is None
            assert row["bm25_rank"] is None and row["rerank_rank"] is None
            assert row["url_hash"] == line["docid"] and row["qid"] == str(line["id"])
    # clicked from the question's DocStream: 8C3D... is clicked for 1051893, not for 1051894
    assert by_pair[("1051893-0", "8C3D0A1F7E2B4C5D6E7F8091A2B3C4D5")]["clicked"] is True
    assert by_pair[("1051894-0", "8C3D0A1F7E2B4C5D6E7F8091A2B3C4D5")]["clicked"] is False
    assert by_pair[("1051893-0", "7D1E5A9C3B2F4E6D8C0A1B2C3D4E5F60")]["clicked"] is False
    account = record(tmp_path / "j")
    assert account["config_hash"].startswith("imported-")
    assert account["extra"]["judge"] == "Llama-3.3-70B-Instruct (the authors' ratings)"
    files = account["extra"]["imported"]["files"]
    assert [(f["name"], f["sha256"], f["lines"], f["rows"]) for f in files] == [
        ("ratings.jsonl", sha256_file(LABELS / "ratings.jsonl"), 5, 27)
    ]
    assert account["extra"]["imported"]["statuses"] == {
        "imported": 24,
        "no_digit": 1,
        "out_of_scale": 1,
        "request_failed": 1,
    }
    assert account["extra"]["imported"]["documents"] == {"url_hash_kept_as_docid": 27}


def test_graded_qrels_import_with_no_sentinels(questions, tmp_path):
    qrels = tmp_path / "more.qrels"
    qrels.write_text(
        (LABELS / "judge-b.qrels").read_text() + "1051894-1 0 clueweb22-en0000-00-00001 -1\n"
        "1051894-1 Q0 clueweb22-en0000-00-00002 9\n"
        "# a comment line, skipped as trec_eval skips it\n"
        "1051894-2\t0  clueweb22-en0000-00-00003\t2\r\n"  # tabs, two spaces, CRLF: trec_eval's white space
    )
    ImportLabelsStage(load_profile("paper"), tmp_path / "j", questions, [qrels], "qrels", "judge B").run()
    rows = {(r["subq_id"], r["docid"]): r for r in imported(tmp_path / "j")}
    for line in (LABELS / "judge-b.qrels").read_text().splitlines():
        subq_id, _, docid, level = line.split()
        assert (rows[(subq_id, docid)]["level"], rows[(subq_id, docid)]["status"]) == (int(level), "imported")
    assert rows[("1051894-1", "clueweb22-en0000-00-00001")]["status"] == "negative"  # qrels have no -1 sentinel
    assert rows[("1051894-1", "clueweb22-en0000-00-00002")]["status"] == "out_of_scale"
    assert rows[("1051894-2", "clueweb22-en0000-00-00003")]["level"] == 2
    assert len(rows) == len((LABELS / "judge-b.qrels").read_text().splitlines()) + 3
    unknown = rows[("1051894-1", "clueweb22-en0000-00-00001")]
    assert unknown["url_hash"] is None and unknown["clicked"] is False
    assert record(tmp_path / "j")["extra"]["imported"]["clicked_unknown"] == 3


def test_openai_batch_results_are_parsed_by_the_profiles_prompt(questions, tmp_path):
    summary = ImportLabelsStage(
        load_profile("crux-code"),
        tmp_path / "j",
        questions,
        [LABELS / "results.jsonl", LABELS / "errors.jsonl"],
        "openai-batch",
        "tiny Llama (vllm run-batch)",
    ).run()
    rows = {(r["subq_id"], r["docid"]): r for r in imported(tmp_path / "j")}
    assert len(rows) == 6 == summary.rows
    first = rows[("1051893-0", "8C3D0A1F7E2B4C5D6E7F8091A2B3C4D5")]
    assert (first["raw"], first["level"], first["status"]) == (" 1 3 5", 1, "ok")  # vLLM's own line, first digit
    assert rows[("1051894-0", "3A4B5C6D7E8F90A1B2C3D4E5F6071829")]["level"] == 4  # the authors' `id`-keyed line
    failed = rows[("1051893-4", "00FF00FF00FF00FF00FF00FF00FF00FF")]
    assert failed["status"] == "request_failed" and failed["level"] is None
    assert failed["raw"].startswith("500: EngineCore encountered an issue")
    expired = rows[("1051894-1", "3A4B5C6D7E8F90A1B2C3D4E5F6071829")]
    assert expired["raw"] == "batch_expired: This request could not be executed before the completion window expired."
    # 1051894's document has all 3 of its sub-questions; 1051893's two documents 2 and 1 of 7
    assert summary.incomplete_documents == 2
    assert record(tmp_path / "j")["extra"]["imported"]["parser"] == "crux-code"


def test_openai_batch_refuses_a_prompt_whose_parser_needs_the_document(questions, tmp_path):
    profile = load_profile("paper")
    r3a = profile.model_copy(update={"judge": profile.judge.model_copy(update={"prompt": "r3a"})})
    with pytest.raises(ValueError, match="r3a's <extract> must be checked against the document"):
        ImportLabelsStage(r3a, tmp_path / "j", questions, [LABELS / "results.jsonl"], "openai-batch", "x").run()


GOOD = '{"id": 1051894, "docid": "3A4B5C6D7E8F90A1B2C3D4E5F6071829", "rating": [5, 2, 7]}'
MALFORMED = [
    ("crux-ratings", '{"id": 1051894, "docid": ', "not valid JSON"),
    (
        "crux-ratings",
        '{"id": 1051894, "docid": "D1", "rating": [1, 2, 3, 4, 5, 0]}',
        "6 ratings, but question 1051894 has 3 sub-questions",
    ),
    ("crux-ratings", '{"id": 999, "docid": "D1", "rating": [1]}', "question '999' is not in"),
    (
        "crux-ratings",
        '{"id": 1051894, "docid": "3A4B5C6D7E8F90A1B2C3D4E5F6071829", "rating": [5, 2, 6]}',
        "labels the same pair as",
    ),
    ("crux-ratings", '{"id": 1051894, "docid": "D1", "rating": [1, "2", 3]}', "expected a list of integer ratings"),
    (
        "crux-ratings",
        '{"id": 1051894, "docid": "D1", "rating": [1, 2, 3], "model": "x"}',
        "exactly the keys id, docid, rating",
    ),
    ("qrels", "1051893-99 0 D1 3", "sub-question '1051893-99' is not in"),
    ("qrels", "1051893-1 0 D1", "this one has 3 fields"),
    ("qrels", "1051893-1 0 D1 high", "level 'high' is not an integer"),
    ("qrels", "1051893-1 0 D1 1.5", "level '1.5' is not an integer"),  # trec_eval's atol would read 1
    (
        "openai-batch",
        '{"custom_id": "1051894::D1::3", "response": {"status_code": 200, "body": {"choices": '
        '[{"message": {"content": "2"}}]}}, "error": null}',
        "sub-question position 3 is beyond question 1051894's 3 sub-questions",
    ),
    (
        "openai-batch",
        '{"custom_id": "request-1", "response": {"status_code": 200, "body": {"choices": '
        '[{"message": {"content": "2"}}]}}, "error": null}',
        "is not the authors' qid::docid::i_subquestion",
    ),
    (
        "openai-batch",
        '{"custom_id": "1051894::D1::0", "response": {"status_code": 200, "body": {}}, "error": null}',
        "a successful response without choices[0].message.content",
    ),
]
FIRST_LINE = {
    "crux-ratings": GOOD,
    "qrels": "1051893-0 0 D1 4",
    "openai-batch": '{"custom_id": "1051894::D1::0", "response": {"status_code": 200, "body": {"choices": '
    '[{"message": {"content": "3"}}]}}, "error": null}',
}


@pytest.mark.parametrize("kind,line,message", MALFORMED)
def test_a_malformed_line_is_one_error_line_naming_file_and_line(questions, tmp_path, kind, line, message):
    path = tmp_path / "labels.txt"
    path.write_text(FIRST_LINE[kind] + "\n" + line + "\n")
    code, output = cli(
        "import-labels", path, "--format", kind, "--subquestions", questions, "--judge", "j", "--out", tmp_path / "j"
    )
    errors = [text for text in output.splitlines() if text.startswith("error:")]
    assert code == 1 and len(errors) == 1, output  # the one line; above it only the progress bar
    assert errors[0].startswith(f"error: {path}:2") and message in errors[0], errors[0]
    assert not (tmp_path / "j" / "judgments-00000-of-00001.parquet").exists()
    code, output = cli(
        "import-labels",
        path,
        "--format",
        kind,
        "--subquestions",
        questions,
        "--judge",
        "j",
        "--out",
        tmp_path / "k",
        "--rejects",
        tmp_path / "rejects.jsonl",
    )
    assert code == 0, output
    rejected = [json.loads(text) for text in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert [(r["line"], message in r["error"]) for r in rejected] == [(2, True)]
    assert sum(record(tmp_path / "k")["extra"]["imported"]["rejected"].values()) == 1


def test_the_import_record_is_written_and_read_through_one_model(questions, tmp_path):
    """The completion record's `imported` is `ImportAccount` (generation/labels/account.py) as import-labels wrote it:
    build-release's strict reading of the file gives back every key, in the model's order, and the same values."""
    from dataclasses import fields

    from generation.labels.account import FileCounts, ImportAccount, read_account

    path = LABELS / "judge-b.qrels"
    ImportLabelsStage(load_profile("paper"), tmp_path / "j", questions, [path], "qrels", "judge B").run()
    written = record(tmp_path / "j")["extra"]["imported"]
    assert list(written) == list(ImportAccount.model_fields)
    assert [list(f) for f in written["files"]] == [[f.name for f in fields(FileCounts)]]
    account = read_account(tmp_path / "j", written)
    assert account.model_dump() == written and account.files[0].path == str(path)
    assert account.source() == ("qrels", "judge B", (sha256_file(path),))


def test_a_line_repeated_exactly_is_counted_and_kept_once(questions, tmp_path):
    path = tmp_path / "ratings.jsonl"
    path.write_text((LABELS / "ratings.jsonl").read_text() + GOOD + "\n")
    summary = ImportLabelsStage(load_profile("crux-code"), tmp_path / "j", questions, [path], "crux-ratings", "j").run()
    assert summary.duplicates == 1 and summary.rows == 27 == len(imported(tmp_path / "j"))


def test_shards_split_the_questions_and_report_a_bad_line_once(questions, tmp_path):
    path = tmp_path / "ratings.jsonl"
    path.write_text((LABELS / "ratings.jsonl").read_text() + "not json\n")
    whole = ImportLabelsStage(
        load_profile("crux-code"),
        tmp_path / "one",
        questions,
        [path],
        "crux-ratings",
        "j",
        rejects=tmp_path / "one.rejects",
    ).run()
    parts = [
        ImportLabelsStage(
            load_profile("crux-code"),
            tmp_path / "three",
            questions,
            [path],
            "crux-ratings",
            "j",
            rejects=tmp_path / "three.rejects",
        ).run(Shard(i, 3))
        for i in range(3)
    ]
    assert sum(p.rows for p in parts) == whole.rows == 27
    assert sum(sum(p.rejected.values()) for p in parts) == sum(whole.rejected.values()) == 1
    one = sorted((r["subq_id"], r["docid"], r["level"]) for r in imported(tmp_path / "one"))
    three = sorted(
        (r["subq_id"], r["docid"], r["level"])
        for p in (tmp_path / "three").glob("judgments-*.parquet")
        for r in pq.read_table(p).to_pylist()
    )
    assert one == three


def test_corpus_matches_url_hashes_and_clueweb22_ids(questions, tmp_path):
    from generation.sample import CLUEWEB22
    from generation.stages.corpus import CorpusStage, write_url_map

    CorpusStage(None, tmp_path / "corpus", [CLUEWEB22]).run()
    write_url_map(tmp_path / "corpus")
    docs = pq.read_table(next((tmp_path / "corpus").glob("corpus-*.parquet")), columns=["docid", "url_hash"]).slice(
        0, 2
    )
    (docid_a, docid_b), (hash_a, hash_b) = docs["docid"].to_pylist(), docs["url_hash"].to_pylist()
    qrels = tmp_path / "labels.qrels"
    qrels.write_text(
        f"1051893-0 0 {hash_a.lower()} 3\n1051893-0 0 {docid_b} 2\n1051893-0 0 ABCDEF0123456789ABCDEF0123456789 1\n"
        "1051893-0 0 somewhere-else 0\n"
    )
    summary = ImportLabelsStage(
        load_profile("paper"), tmp_path / "j", questions, [qrels], "qrels", "j", corpus=tmp_path / "corpus"
    ).run()
    rows = [(r["docid"], r["url_hash"]) for r in imported(tmp_path / "j")]
    assert rows == [
        (docid_a, hash_a),
        (docid_b, hash_b),
        ("ABCDEF0123456789ABCDEF0123456789",) * 2,
        ("somewhere-else", None),
    ]
    assert dict(summary.documents) == {
        "url_hash_mapped_to_clueweb22_id": 1,
        "clueweb22_id_in_corpus": 1,
        "url_hash_kept_as_docid": 1,
        "kept_as_given_without_url_hash": 1,
    }
