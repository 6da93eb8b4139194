"""OpenAI Batch files: export (custom_id, limits, manifest, the server backend's own request bodies) and import
(vLLM run-batch and OpenAI output/error lines, malformed lines, repeats, conflicts, missing pairs). The real
`vllm run-batch` round trip is tests/generation/backends/test_vllm_server.py."""

import gzip
import json

import pytest

from builder.standins.openai_server import answered, run_batch_on
from generation.backends.openai_server import make_judge
from generation.errors import InputError
from generation.judging.batch_files import check_export, custom_id, export_batch, export_judge, parse_custom_id
from generation.judging.batch_import import answer_grader, import_results
from generation.judging.batch_manifest import MANIFEST, load_manifest
from generation.judging.judges import Pair
from generation.storage.rejects import Rejects
from tests.generation.backends.test_openai_server import DOCUMENTS, QUESTIONS, config
from tests.helpers import plan_ids

QID = "1051893"
SUBQUESTIONS = [*QUESTIONS, "What do varroa mites do to a hive?"]
PLAN = [
    {"subq_id": f"{QID}-{k}", "qid": QID, "docid": f"clueweb22-en0000-00-0000{d}"}
    for k in range(len(SUBQUESTIONS))
    for d in range(len(DOCUMENTS))
]
PAIRS = [Pair(SUBQUESTIONS[int(row["subq_id"][-1])], DOCUMENTS[int(row["docid"][-1])]) for row in PLAN]


def keyed(pairs=PAIRS, plan=PLAN):
    return list(zip(plan_ids(plan), pairs))


def test_custom_id_is_the_authors_id_and_unambiguous():
    cid = custom_id(QID, "clueweb22-en0000-00-00000", f"{QID}-4")
    assert cid == f"{QID}::clueweb22-en0000-00-00000::4"
    qid, docid, i_subquestion = cid.split("::")  # crux-researchy/merge_ratings.py's own split
    assert (qid, docid, int(i_subquestion)) == (QID, "clueweb22-en0000-00-00000", 4)
    assert parse_custom_id(cid) == (QID, "clueweb22-en0000-00-00000", f"{QID}-4")
    odd = custom_id("q:1", "doc::a%3A", "q:1-12")
    assert len(odd.split("::")) == 3 and parse_custom_id(odd) == ("q:1", "doc::a%3A", "q:1-12")
    for header in (f"{QID}-h0", f"{QID}-h2-13"):  # --decomposition headers (generation/stages/questions.py)
        assert parse_custom_id(custom_id(QID, "d", header)) == (QID, "d", header)
    with pytest.raises(ValueError, match="is not '1-<position>'"):
        custom_id("1", "d", "2-0")
    with pytest.raises(ValueError, match="is not '1-<position>'"):
        custom_id("1", "d", "1-x")
    for bad in ("1::d", "1::d::x", "::d::0", "1::d::h", "1::d::h1-"):
        with pytest.raises(ValueError):
            parse_custom_id(bad)


def test_export_writes_the_server_backends_own_requests(standin, tokenizer, tmp_path):
    cfg = config(standin.endpoint, shape="chat")
    served = make_judge(cfg, tokenizer)
    served.grade(PAIRS)
    sent = [body for _, path, body in standin.received if path == "/v1/chat/completions"][1:]
    manifest = export_batch(export_judge(cfg, tokenizer), keyed(), tmp_path, profile_hash="abc")
    lines = [json.loads(line) for e in manifest.files for line in (tmp_path / e.name).read_text().splitlines()]
    assert [line["custom_id"] for line in lines] == plan_ids(PLAN)
    assert {(line["method"], line["url"]) for line in lines} == {("POST", "/v1/chat/completions")}
    assert sorted(json.dumps(line["body"], sort_keys=True) for line in lines) == sorted(
        json.dumps(body, sort_keys=True) for body in sent
    )
    assert manifest.context_cut_by_tokens == [cid for cid, p in keyed() if p.document == DOCUMENTS[2]]
    assert (manifest.pairs, manifest.request_shape, manifest.mode) == (len(PAIRS), "chat", "generate")
    assert manifest.prompt_sha256 == served.prompt.sha256 and load_manifest(tmp_path) == manifest
    served.backend.close()


def test_export_splits_within_the_limits_and_records_each_file(tokenizer, tmp_path):
    cfg = config("http://unused:1/v1", shape="completions", mode="distribution")
    manifest = export_batch(export_judge(cfg, tokenizer), keyed(), tmp_path, "abc", max_lines=4, max_bytes=6000)
    sizes = [(f.lines, f.bytes) for f in manifest.files]
    assert sum(n for n, _ in sizes) == len(PAIRS) and all(n <= 4 and b <= 6000 for n, b in sizes)
    assert len(sizes) > len(PAIRS) // 4, "the byte limit cut a file before its line limit"
    first = json.loads((tmp_path / "requests-00000.jsonl").read_text().splitlines()[0])
    assert first["url"] == "/v1/completions" and isinstance(first["body"]["prompt"][0], int)
    assert first["body"]["max_tokens"] == 1 and len(first["body"]["logprob_token_ids"]) == 6
    with pytest.raises(ValueError, match="over the file limit 100"):
        export_batch(export_judge(cfg, tokenizer), keyed(), tmp_path / "small", "abc", max_bytes=100)
    assert list((tmp_path / "small").iterdir()) == [], "no half-written file left behind"


def test_the_manifest_is_typed_and_an_edited_one_is_refused_naming_the_file(tokenizer, tmp_path):
    """generation/judging/batch_manifest.py: the file lists its keys in the order they were always written, reads
    back equal, and a key it does not name, a missing one or a value of another JSON type is refused with the file's
    name."""
    manifest = export_batch(export_judge(config("http://unused:1/v1", shape="chat"), tokenizer), keyed(), tmp_path, "a")
    written = json.loads((tmp_path / MANIFEST).read_text())
    assert list(written) == [
        "profile_hash", "prompt", "prompt_sha256", "request_shape", "url", "model", "mode", "digit_logprobs",
        "pairs", "files", "context_cut_by_tokens", "not_exported",
    ]  # fmt: skip
    assert load_manifest(tmp_path / MANIFEST) == manifest and written["files"][0]["lines"] == len(PAIRS)
    for edit, problem in [
        (lambda m: m.update(temperature=0), "temperature: Extra inputs are not permitted"),
        (lambda m: m.pop("profile_hash"), "profile_hash: Field required"),
        (lambda m: m["files"][0].update(lines="many"), "files.0.lines: Input should be a valid integer"),
        # read strictly: lax mode would have counted "3" as 3 and true as 1
        (lambda m: m.update(pairs=str(m["pairs"])), f'pairs: Input should be a valid integer, not "{len(PAIRS)}"'),
        (lambda m: m["files"][0].update(bytes=True), "files.0.bytes: Input should be a valid integer, not true"),
    ]:
        edited = json.loads((tmp_path / MANIFEST).read_text())
        edit(edited)
        (tmp_path / "edited.json").write_text(json.dumps(edited))
        with pytest.raises(InputError, match=f"edited.json.*not a batch manifest .{problem}"):
            load_manifest(tmp_path / "edited.json")


def test_a_prompt_that_cannot_fit_is_recorded_not_exported(tokenizer, tmp_path):
    cfg = config("http://unused:1/v1", shape="chat")
    long_question = Pair("why " * 400 + "?", DOCUMENTS[0])
    manifest = export_batch(export_judge(cfg, tokenizer), keyed([long_question, *PAIRS[1:]]), tmp_path, "abc")
    assert manifest.pairs == len(PAIRS) - 1
    assert [e.custom_id for e in manifest.not_exported] == plan_ids(PLAN)[:1]
    assert "PromptTooLong" in manifest.not_exported[0].error


@pytest.mark.parametrize("mode", ["generate", "distribution"])
def test_export_run_import_gives_the_server_backends_grades(standin, tokenizer, tmp_path, mode):
    cfg = config(standin.endpoint, shape="chat", mode=mode)
    served = make_judge(cfg, tokenizer)
    expected = served.grade(PAIRS)
    judge = export_judge(cfg, tokenizer)
    manifest = export_batch(judge, keyed(), tmp_path / "requests", "abc")
    run_batch_on(standin, tmp_path / "requests" / "requests-00000.jsonl", tmp_path / "results.jsonl")
    result = import_results(
        [tmp_path / "results.jsonl"], plan_ids(PLAN), answer_grader(judge), manifest.context_cut_by_tokens
    )
    assert [result.grades[cid] for cid in plan_ids(PLAN)] == expected
    assert result.counts() == {
        "lines": len(PAIRS),
        "graded": len(PAIRS),
        "graded before": 0,
        "duplicates": 0,
        "not in shard": 0,
        "another export": 0,
        "malformed ids": 0,
        "conflicting": 0,
        "error_lines": 0,
        "superseded_errors": 0,
        "missing": 0,
    }
    check_export(manifest, judge, "abc")
    with pytest.raises(ValueError, match="exported under another judge: profile_hash 'abc' .this run: 'xyz'"):
        check_export(manifest, judge, "xyz")
    served.backend.close()


def test_import_counts_every_kind_of_problem_and_does_not_depend_on_order(tokenizer, tmp_path):
    ids = plan_ids(PLAN)
    judge = export_judge(config("http://unused:1/v1", shape="chat"), tokenizer)
    output = [
        answered(ids[0], " 4"),
        answered(ids[0], " 4"),  # a repeat with the same answer
        answered(ids[1], " 2"),
        answered(ids[1], "5"),  # two different answers: a conflict
        answered(ids[2], "none", style="openai"),  # the authors' parser: no digit
        # vLLM 0.32 run_batch's error line: status 400, no body, an ErrorResponse
        json.dumps(
            {
                "id": "vllm-9",
                "custom_id": ids[3],
                "response": {"status_code": 400, "request_id": "r", "body": None},
                "error": {
                    "error": {"message": "maximum context length is 384", "type": "BadRequestError", "code": 400}
                },
            }
        ),
        answered(ids[4], " 3"),
        answered("999::clueweb22-en0000-00-00009::0", " 1"),  # a pair of no plan
        answered("not-ours", " 1"),
    ]
    # the OpenAI Batch API's error file: `error` {code, message} with no response (OpenAI's OpenAPI spec,
    # BatchRequestOutput.error; codes batch_expired, batch_cancelled, request_timeout)
    errors = [
        json.dumps(
            {
                "id": "batch_req_7",
                "custom_id": ids[4],
                "response": None,
                "error": {"code": "request_timeout", "message": "The model call timed out."},
            }
        ),
        json.dumps(
            {
                "id": "batch_req_8",
                "custom_id": ids[5],
                "response": None,
                "error": {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion window expired.",
                },
            }
        ),
    ]
    (tmp_path / "output.jsonl").write_text("\n".join(output) + "\n\n")
    with gzip.open(tmp_path / "errors.jsonl.gz", "wt") as f:
        f.write("\n".join(errors) + "\n")
    files = [tmp_path / "output.jsonl", tmp_path / "errors.jsonl.gz"]
    result = import_results(files, ids, answer_grader(judge))
    assert result.counts() == {
        "lines": 11,
        "graded": 5,
        "graded before": 0,
        "duplicates": 1,
        "not in shard": 1,
        "another export": 0,
        "malformed ids": 1,
        "conflicting": 1,
        "error_lines": 3,
        "superseded_errors": 1,
        "missing": 3,
    }
    assert (result.grades[ids[0]].level, result.grades[ids[2]].status) == (4, "no_digit")
    assert result.grades[ids[4]].level == 3, "an answer supersedes an error line for the same pair"
    for cid, text in [(ids[3], "maximum context length is 384"), (ids[5], "batch_expired: This request")]:
        assert result.grades[cid].status == "request_failed" and text in result.grades[cid].raw
    assert f"{ids[1]}: " in result.conflicting.examples[0] and "' 2'" in result.conflicting.examples[0]
    assert result.malformed_ids.examples[0].startswith(f"{tmp_path / 'output.jsonl'}:9: 'not-ours' is not")
    assert result.not_in_shard.examples[0].startswith(f"{tmp_path / 'output.jsonl'}:8: '999::")
    assert result.missing.examples == ids[6:] and result.unresolved == {ids[1], *ids[6:]}
    again = import_results(files[::-1] + files, ids, answer_grader(judge))
    assert again.grades == result.grades and again.unresolved == result.unresolved
    assert (again.conflicting.count, again.missing.count) == (1, 3)


def test_a_malformed_result_line_is_one_error_naming_file_and_line(tokenizer, tmp_path):
    ids = plan_ids(PLAN)
    judge = export_judge(config("http://unused:1/v1", shape="chat"), tokenizer)
    path = tmp_path / "output.jsonl"
    path.write_text(
        "\n".join(
            [
                answered(ids[0], "1"),
                '{"custom_id": "x", "response": {',
                '["a list"]',
                json.dumps({"response": None}),
                answered(ids[1], "2", style="authors"),
            ]
        )
        + "\n"
    )
    with pytest.raises(InputError, match=r"output.jsonl:2: .*(Expecting|Unterminated)"):
        import_results([path], ids, answer_grader(judge))
    with Rejects(tmp_path / "rejects.jsonl", stop=False) as rejects:
        result = import_results([path], ids, answer_grader(judge), rejects=rejects)
    assert rejects.count == 3 and sorted(result.grades) == sorted(ids[:2])
    rejected = [json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert [r["line"] for r in rejected] == [2, 3, 4] and "needs a `custom_id`" in rejected[2]["error"]
    path.write_text(answered(ids[0], "1").replace('"choices"', '"nothing"') + "\n")
    with pytest.raises(InputError, match="output.jsonl:1 .*: a successful response without choices"):
        import_results([path], ids, answer_grader(judge))


def test_r3a_cannot_be_exported(tokenizer):
    cfg = config("http://unused:1/v1", shape="chat").model_copy(update={"prompt": "r3a"})
    with pytest.raises(ValueError, match="r3a asks in two rounds"):
        export_judge(cfg, tokenizer)
