import copy
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from generation.errors import InputError
from generation.stages.questions import Decomposition, QuestionsStage
from tests.helpers import hub_record


def read(path):
    return pq.read_table(path).to_pylist()


GOLDEN_SUBQUESTIONS = [
    ("1051893-0", "What is purring?", "What is purring?", 1),
    ("1051893-1", "How do cats produce the purring sound?", "What is purring?", 2),
    ("1051893-2", "Which cats can purr?", "What is purring?", 2),
    ("1051893-3", "Do big cats purr?", "What is purring?", 2),
    ("1051893-4", "Why do cats purr?", "Why do cats purr?", 1),
    ("1051893-5", "Do cats purr when they are happy?", "Why do cats purr?", 2),
    ("1051893-6", "Does purring heal bones?", None, None),
]


@pytest.mark.parametrize("name", ["records.jsonl", "records.jsonl.gz"])
def test_hub_record_golden_rows(tmp_path, write_jsonl, name):
    path = write_jsonl([hub_record()], name)
    summary = QuestionsStage(None, tmp_path / "out", [path], split="train").run()
    assert (summary.questions, summary.subquestions, summary.clicked, summary.rejected) == (1, 7, 2, 0)
    assert read(tmp_path / "out" / "questions.parquet") == [
        {
            "qid": "1051893",
            "question": "why do cats purr",
            "split": "train",
            "clicked": [
                {
                    "url_hash": "8C3D0A1F7E2B4C5D6E7F8091A2B3C4D5",
                    "url": "https://www.catscience.org/why-cats-purr",
                    "click_share": 0.75,
                },
                {
                    "url_hash": "00FF00FF00FF00FF00FF00FF00FF00FF",
                    "url": "https://pets.example.com/purring",
                    "click_share": 0.25,
                },
            ],
            "answerable": None,
            "answerable_share": None,
            "completeness": None,
            "retrieval_complex": None,
            "retrieved_unjudged": None,  # build-release --runs fills it
        }
    ]
    rows = read(tmp_path / "out" / "subquestions.parquet")
    assert [(r["subq_id"], r["text"], r["header"], r["depth"]) for r in rows] == GOLDEN_SUBQUESTIONS
    assert {r["qid"] for r in rows} == {"1051893"}


def test_parquet_input_as_on_the_hub(tmp_path):
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist([hub_record(), hub_record(77)]), path)
    summary = QuestionsStage(None, tmp_path / "out", [path], split="test").run()
    assert summary.questions == 2 and summary.subquestions == 14
    rows = read(tmp_path / "out" / "subquestions.parquet")
    assert [(r["subq_id"], r["text"], r["header"], r["depth"]) for r in rows[:7]] == GOLDEN_SUBQUESTIONS
    assert {r["split"] for r in read(tmp_path / "out" / "questions.parquet")} == {"test"}


def test_decomposition_modes_keep_ids_stable(tmp_path, write_jsonl):
    record = hub_record()
    record["gpt4_decomposition"]["headers"].append(["Is purring contagious?", " - Do kittens learn to purr?"])
    path = write_jsonl([record])
    by_mode = {}
    for mode in Decomposition:
        QuestionsStage(None, tmp_path / mode.value, [path], decomposition=mode).run()
        by_mode[mode] = read(tmp_path / mode.value / "subquestions.parquet")
    assert [r["subq_id"] for r in by_mode[Decomposition.headers]] == ["1051893-0", "1051893-4", "1051893-h2"]
    assert all(r["depth"] == 1 for r in by_mode[Decomposition.headers])
    both = by_mode[Decomposition.both]
    assert both[:7] == by_mode[Decomposition.subquestions]
    assert [(r["subq_id"], r["text"], r["depth"]) for r in both[7:]] == [
        ("1051893-h2", "Is purring contagious?", 1),
        ("1051893-h2-1", "Do kittens learn to purr?", 2),
    ]


@pytest.mark.parametrize(
    "mutate, field, message",
    [
        (lambda r: r.pop("question"), "question", "missing"),
        (lambda r: r["gpt4_decomposition"].pop("subquestions"), "gpt4_decomposition.subquestions", "missing"),
        (lambda r: r.update(id=[1]), "id", "expected str or int, got list"),
        (
            lambda r: r["gpt4_decomposition"]["subquestions"].__setitem__(3, 17),
            "gpt4_decomposition.subquestions[3]",
            "expected str, got int",
        ),
        (
            lambda r: r["gpt4_decomposition"].update(headers="What is purring?"),
            "gpt4_decomposition.headers",
            "expected list, got str",
        ),
        (lambda r: r["DocStream"][1].update(Click_Cnt="3"), "DocStream[1].Click_Cnt", "expected float or int, got str"),
        (lambda r: r["DocStream"][0].update(CluewebURLHash="abc"), "DocStream[0].CluewebURLHash", "32 hex"),
        (
            lambda r: r["gpt4_decomposition"]["subquestions"].__setitem__(0, " - "),
            "gpt4_decomposition.subquestions[0]",
            "empty sub-question",
        ),
    ],
)
def test_malformed_record_names_file_line_and_field(tmp_path, write_jsonl, mutate, field, message):
    bad = hub_record("2")
    mutate(bad)
    path = write_jsonl([hub_record("1"), bad])
    with pytest.raises(InputError) as caught:
        QuestionsStage(None, tmp_path / "out", [path]).run()
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), 2, field)
    assert message in error.message
    assert f"{path}:2" in str(error) and repr(field) in str(error)
    assert not (tmp_path / "out" / "questions.parquet").exists(), "a failed run must not leave a partial table"


def test_bad_json_line_and_rejects_file(tmp_path, write_jsonl):
    missing = hub_record("3")
    del missing["DocStream"][0]["CluewebURLHash"]
    truncated = '{"id": "4", "question": '
    strict = write_jsonl([hub_record("1"), hub_record("2")], "strict.jsonl", raw_lines=[truncated])
    with pytest.raises(InputError, match=rf"{strict.name}:3: not valid JSON"):
        QuestionsStage(None, tmp_path / "strict", [strict]).run()

    path = write_jsonl([hub_record("1"), missing], raw_lines=[truncated, json.dumps(hub_record("5"))])

    rejects = tmp_path / "rejects.jsonl"
    summary = QuestionsStage(None, tmp_path / "out", [path], rejects=rejects).run()
    assert (summary.questions, summary.rejected) == (2, 2)
    assert [r["qid"] for r in read(tmp_path / "out" / "questions.parquet")] == ["1", "5"]
    set_aside = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [(r["line"], r["id"], r["field"]) for r in set_aside] == [
        (2, "3", "DocStream[0].CluewebURLHash"),
        (3, None, None),
    ]
    assert set_aside[0]["record"]["id"] == "3", "the rejected record is kept whole"


def test_duplicate_question_id_is_an_error(tmp_path, write_jsonl):
    path = write_jsonl([hub_record("9"), hub_record("8"), copy.deepcopy(hub_record("9"))])
    with pytest.raises(InputError, match=r"duplicate id, first seen at .*:1"):
        QuestionsStage(None, tmp_path / "out", [path]).run()


def test_reads_the_bundled_sample(tmp_path):
    from generation.sample import RESEARCHY

    summary = QuestionsStage(None, tmp_path / "out", [RESEARCHY["train"], RESEARCHY["test"]]).run()
    assert summary.rejected == 0 and 18 <= summary.questions <= 25
    rows = read(tmp_path / "out" / "subquestions.parquet")
    assert {r["depth"] for r in rows} == {1, 2}
    assert all(not r["text"].startswith("-") for r in rows)


def test_published_types_and_optional_fields(tmp_path, write_jsonl):
    """Integer and string ids, float Click_Cnt shares, extra fields, no DocStream, no headers: as the Hub has them."""
    no_stream = hub_record("rq-7", extra_field={"anything": 1})
    del no_stream["DocStream"]
    no_headers = hub_record(12)
    del no_headers["gpt4_decomposition"]["headers"]
    path = write_jsonl([hub_record(), no_stream, no_headers])
    summary = QuestionsStage(None, tmp_path / "out", [path]).run()
    assert (summary.questions, summary.subquestions, summary.clicked, summary.rejected) == (3, 21, 4, 0)
    questions = pq.read_table(tmp_path / "out" / "questions.parquet")
    assert questions["qid"].to_pylist() == ["1051893", "rq-7", "12"]
    assert questions.schema.field("clicked").type.value_type.field("click_share").type == pa.float32()
    assert [c["click_share"] for c in questions["clicked"][0].as_py()] == [0.75, 0.25]
    assert questions["clicked"][1].as_py() == []
    rows = read(tmp_path / "out" / "subquestions.parquet")
    assert {(r["header"], r["depth"]) for r in rows if r["qid"] == "12"} == {(None, None)}
