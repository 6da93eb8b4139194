"""A transient failure is not a permanent label. Against the loopback stand-in server
(builder/standins/openai_server.py): a poison pair (its connection always drops) fails alone and names itself, the shard is
finished and says it holds failed pairs, build-release refuses it, and the next `judge` run retries exactly the
failed pairs, resuming to identical output after an interruption; a Retry-After of an hour is capped."""

import json
import time

import pyarrow.parquet as pq
import pytest

from builder.standins.openai_server import Fault, fingerprint
from generation.backends.openai_server import make_judge
from generation.profiles.profile import load_profile
from generation.stages.judge import JudgeStage
from generation.storage.shards import StageOutput
from tests.generation.backends.test_openai_server import PAIRS, config
from tests.helpers import cli, folders, judge_args, rows


def record(out):
    return json.loads(next((out / "_done").glob("judgments-*.json")).read_text())


def served(server_profile, standin):
    profile = load_profile(server_profile)
    return profile.model_copy(
        update={
            "judge": profile.judge.model_copy(
                update={"openai": profile.judge.openai.model_copy(update={"endpoint": standin.endpoint})}
            )
        }
    )


def poison(standin):
    """The first pair request's connection drops every time while `on[0]`; returns the switch."""
    on, target = [True], []

    def match(body):
        if "Is this a probe request?" in json.dumps(body):  # the start-up probe (openai_server.PROBE_QUESTION)
            return False
        if not target:
            target.append(fingerprint(body))
        return on[0] and fingerprint(body) == target[0]

    standin.fail(match, *[Fault(drop=True)] * 1000)
    return on


def test_a_poison_pair_fails_alone_then_the_next_run_retries_exactly_it(
    tmp_path, small_pipeline, server_profile, standin
):
    reference = tmp_path / "reference"
    JudgeStage(served(server_profile, standin), reference, *folders(small_pipeline)).run()
    on = poison(standin)
    out = tmp_path / "served"
    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--endpoint", standin.endpoint))
    assert code == 0, output
    judged = rows(out)
    failed = [r for r in judged if r["status"] == "request_failed"]
    assert len(failed) == 1, output
    assert "RemoteProtocolError" in failed[0]["raw"] and "this request alone fails" in failed[0]["raw"]
    flat = " ".join(output.split())
    assert (
        f"question {failed[0]['qid']}, sub-question {failed[0]['subq_id']}, document {failed[0]['docid']} failed"
    ) in flat
    assert "FAILED PAIRS: 1" in flat and "run `judge` again" in flat
    assert record(out)["extra"]["failed_pairs"] == 1
    assert [r for r in judged if r not in failed] == [
        r for r in rows(reference) if r["subq_id"] != failed[0]["subq_id"] or r["docid"] != failed[0]["docid"]
    ]

    written = server_profile  # the endpoint is outside the config hash: the same profile
    build = ["build-release", "--profile", written, "--judgments", out, "--questions", small_pipeline["questions"]]
    code, output = cli(*build, "--out", tmp_path / "release")
    assert code == 1 and "1 judged pair in 1 shard failed" in " ".join(output.split()), output
    assert "--allow-failed-pairs" in output
    assert not (tmp_path / "release" / "manifest.json").exists()
    code, output = cli(*build, "--out", tmp_path / "release", "--allow-failed-pairs")
    assert code == 0, output
    assert json.loads((tmp_path / "release" / "manifest.json").read_text())["failed_pairs"] == 1
    assert "1 pair whose request failed" in " ".join((tmp_path / "release" / "README.md").read_text().split())

    on[0] = False  # the server is healthy again
    sent = standin.answers()
    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--endpoint", standin.endpoint))
    assert code == 0, output
    assert standin.answers() - sent == 2, "the start-up probe, then the one failed pair and nothing else"
    assert (
        "retried: 1 pair whose request had failed judged again; 1 now graded" in " ".join(output.split())
        and "FAILED PAIRS" not in output
    )
    assert rows(out) == rows(reference)
    assert record(out)["extra"]["failed_pairs"] == 0 and not list(out.glob("*.retry"))
    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--endpoint", standin.endpoint))
    assert code == 0 and "already complete" in output and standin.answers() - sent == 2, "nothing sent"


def test_an_interrupted_retry_resumes_to_the_same_shard(tmp_path, small_pipeline, server_profile, standin, monkeypatch):
    profile = served(server_profile, standin)
    reference = tmp_path / "reference"
    JudgeStage(profile, reference, *folders(small_pipeline)).run()
    on = [True]
    standin.fail(
        lambda body: on[0] and fingerprint(body) % 3 == 0 and "Is this a probe request?" not in json.dumps(body),
        *[Fault(503)] * 10000,
    )
    out = tmp_path / "out"
    JudgeStage(profile, out, *folders(small_pipeline)).run()
    failed = record(out)["extra"]["failed_pairs"]
    assert failed > profile.judge.chunk_size, "more than one retry chunk"
    on[0] = False

    def stop_after_first_chunk(done, total=None):
        if total is None:
            raise KeyboardInterrupt  # a kill after the first retry chunk was written

    with pytest.raises(KeyboardInterrupt):
        JudgeStage(profile, out, *folders(small_pipeline)).run(progress=stop_after_first_chunk)
    retry = next(out.glob("*.retry"))
    assert len(list(retry.glob("chunk-*.parquet"))) == 1
    assert record(out)["extra"]["failed_pairs"] == failed, "the shard and its record are untouched"

    real_mark_done = StageOutput.mark_done

    def killed_before_the_record(self, shard, **extra):  # a kill between the renamed shard and its new record
        raise KeyboardInterrupt

    monkeypatch.setattr(StageOutput, "mark_done", killed_before_the_record)
    sent = standin.answers()
    with pytest.raises(KeyboardInterrupt):
        JudgeStage(profile, out, *folders(small_pipeline)).run()
    left = failed - profile.judge.chunk_size + 1  # the pairs of the chunks not yet done, and the start-up probe
    assert standin.answers() - sent == left, "only the pairs of the retry chunks not yet done"
    monkeypatch.setattr(StageOutput, "mark_done", real_mark_done)
    summary = JudgeStage(profile, out, *folders(small_pipeline)).run()
    assert summary.skipped and standin.answers() - sent == left, "the swap is recorded, nothing sent again"
    assert rows(out) == rows(reference) and record(out)["extra"]["failed_pairs"] == 0
    assert pq.read_metadata(next(out.glob("judgments-*.parquet"))).num_rows == len(rows(reference))
    assert not list(out.glob("*.retry"))


def test_a_retry_after_of_an_hour_is_capped_and_said_once(standin, tokenizer, capsys):  # noqa: F811
    standin.fail(lambda body: True, *[Fault(429, headers=(("Retry-After", "3600"),))] * 3)
    judge = make_judge(config(standin.endpoint, max_retry_after_s=0.2, concurrency=1), tokenizer)
    started = time.monotonic()
    grades = judge.grade(PAIRS[:2])
    judge.backend.close()
    assert time.monotonic() - started < 10 and all(g.status == "ok" for g in grades)
    err = " ".join(capsys.readouterr().err.split())
    assert err.count("asked to wait 3600 s") == 1 and "waits 0.2 s (judge.openai.max_retry_after_s)" in err


def test_a_request_that_always_drops_fails_alone_while_a_server_that_is_gone_stops(standin, tokenizer):  # noqa: F811
    from generation.judging.judges import BackendUnavailable

    judge = make_judge(config(standin.endpoint, shape="chat", max_retries=1), tokenizer)
    poisoned = lambda body: PAIRS[0].question in json.dumps(body) and "Varroa" in json.dumps(body)  # noqa: E731
    standin.fail(poisoned, *[Fault(drop=True)] * 100)
    grades = judge.grade(PAIRS)
    assert grades[0].status == "request_failed" and "this request alone fails" in grades[0].raw
    assert "RemoteProtocolError" in grades[0].raw and "(2 attempts)" in grades[0].raw
    assert all(g.status == "ok" for g in grades[1:])
    alone = judge.grade(PAIRS[:1])  # a chunk of one failing request is no sign of an outage
    assert alone[0].status == "request_failed"
    standin.close()
    with pytest.raises(BackendUnavailable, match="the server stopped answering: .* GET /models: ConnectError"):
        judge.grade(PAIRS[1:2])
    judge.backend.close()
