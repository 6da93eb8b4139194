"""The judge stage through a served model and through OpenAI Batch files, end to end on the sample's pairs, against
the loopback stand-in server (builder/standins/openai_server.py; the real `vllm serve` / `vllm run-batch` run in
tests/generation/backends/test_vllm_server.py under `make test-vllm`)."""

import json

import pyarrow.parquet as pq
import pytest
import yaml

from builder.standins.openai_server import Fault, fingerprint, run_batch_on
from generation.profiles.profile import load_profile
from generation.stages import REGISTRY
from generation.stages.judge import JudgeStage
from generation.stages.judge_batch import BatchImportJudgeStage, IncompleteShard, export_shard
from generation.storage.shards import Shard
from tests.helpers import cli, folders, judge_args, rows


def test_judge_through_a_server_then_a_release_that_validates(tmp_path, small_pipeline, server_profile, standin):
    requests = iter(range(10**6))  # the first request is the start-up probe; the next one fails for good
    standin.fail(lambda body: next(requests) == 1, Fault(400, body='{"error": {"message": "prompt too long"}}'))
    code, output = cli(
        *judge_args(
            server_profile, small_pipeline, tmp_path / "served", "--endpoint", standin.endpoint, "--concurrency", 8
        )
    )
    assert code == 0, output
    judged = rows(tmp_path / "served")
    failed = [r for r in judged if r["status"] == "request_failed"]
    assert len(failed) == 1 and failed[0]["level"] is None and "prompt too long" in failed[0]["raw"]
    assert len(judged) > 1 and all(r["status"] == "ok" and r["level"] is not None for r in judged if r not in failed)
    record = json.loads(next((tmp_path / "served" / "_done").glob("judgments-*.json")).read_text())
    assert record["extra"]["judge"] == (
        "standin-judge (openai server, request shape chat, prompt crux-paper, mode generate)"
    )  # the endpoint is not in it
    code, output = cli(
        "build-release",
        "--profile",
        server_profile,
        "--judgments",
        tmp_path / "served",
        "--questions",
        small_pipeline["questions"],
        "--out",
        tmp_path / "release",
        "--allow-failed-pairs",
    )
    assert code == 0, output
    manifest = json.loads((tmp_path / "release" / "manifest.json").read_text())
    assert manifest["failed_pairs"] == 1, "published only when asked, and counted"
    assert standin.endpoint not in json.dumps(manifest), "the server's address is not published"
    assert manifest["profile"]["judge"]["openai"]["endpoint"] == "http://endpoint.withheld"
    card = (tmp_path / "release" / "README.md").read_text()
    assert "server applied its own chat template" in card and standin.endpoint not in card
    code, output = cli("validate", tmp_path / "release", "--no-load")
    assert code == 0, output  # the failed request's error in raw is not read as a judge's answer


def test_batch_export_run_import_in_two_rounds_gives_the_served_rows(tmp_path, small_pipeline, server_profile, standin):
    profile = load_profile(server_profile)
    q, c, i = folders(small_pipeline)
    served = profile.model_copy(
        update={
            "judge": profile.judge.model_copy(
                update={"openai": profile.judge.openai.model_copy(update={"endpoint": standin.endpoint})}
            )
        }
    )
    JudgeStage(served, tmp_path / "served", q, c, i).run()

    out, first = tmp_path / "batched", tmp_path / "round1"
    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--export-batch", first))
    assert code == 0, output
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["pairs"] == len(rows(tmp_path / "served")) and manifest["request_shape"] == "chat"
    run_batch_on(standin, first / "requests-00000.jsonl", first / "all.jsonl")
    lines = (first / "all.jsonl").read_text().splitlines()
    (first / "results.jsonl").write_text("\n".join(lines[:-5]) + "\n")  # five answers lost on the way

    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--import-batch", first / "results.jsonl"))
    assert code == 1 and "still lack a grade" in output
    assert "missing 5" in " ".join(output.split())
    assert not list(out.glob("judgments-*.parquet")), "an incomplete import is not a shard"
    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--import-batch", first / "results.jsonl"))
    assert code == 1 and f"graded before {len(lines) - 5:,}" in " ".join(output.split()), output
    assert "unknown" not in output, "lines of pairs graded by the first import are not unknown"

    second = tmp_path / "round2"
    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--export-batch", second))
    assert code == 0, output
    again = [json.loads(line)["custom_id"] for line in (second / "requests-00000.jsonl").read_text().splitlines()]
    assert again == [json.loads(line)["custom_id"] for line in lines[-5:]], "only the missing pairs are exported"
    run_batch_on(standin, second / "requests-00000.jsonl", second / "results.jsonl")
    code, output = cli(
        *judge_args(
            server_profile,
            small_pipeline,
            out,
            "--import-batch",
            first / "results.jsonl",
            "--import-batch",
            second / "results.jsonl",
            "--batch-manifest",
            first / "manifest.json",
        )
    )
    assert code == 0, output
    assert rows(out) == rows(tmp_path / "served")
    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--import-batch", first / "results.jsonl"))
    assert code == 0 and "already complete" in output  # importing again changes nothing
    code, output = cli(*judge_args(server_profile, small_pipeline, out, "--export-batch", tmp_path / "round3"))
    assert code == 0 and "already judged and recorded done: nothing to export" in output
    assert not (tmp_path / "round3").exists() and not list(out.glob("*.chunks")), "a done shard exports nothing"


def test_results_of_another_profile_are_refused(tmp_path, small_pipeline, server_profile, standin):
    q, c, i = folders(small_pipeline)
    profile = load_profile(server_profile)
    manifest = export_shard(REGISTRY["judge"](profile, tmp_path / "a", q, c, i), Shard(), tmp_path / "requests")
    run_batch_on(standin, tmp_path / "requests" / "requests-00000.jsonl", tmp_path / "results.jsonl")
    other = profile.model_copy(update={"judge": profile.judge.model_copy(update={"context_words": 60})})
    stage = BatchImportJudgeStage(
        other, tmp_path / "b", q, c, i, [tmp_path / "results.jsonl"], tmp_path / "requests" / "manifest.json"
    )
    with pytest.raises(ValueError, match="exported under another judge: profile_hash"):
        stage.run()
    assert manifest.pairs > 0


def test_an_incomplete_import_keeps_what_it_graded(tmp_path, small_pipeline, server_profile, standin):
    q, c, i = folders(small_pipeline)
    profile = load_profile(server_profile)
    export_shard(REGISTRY["judge"](profile, tmp_path / "out", q, c, i), Shard(), tmp_path / "requests")
    run_batch_on(standin, tmp_path / "requests" / "requests-00000.jsonl", tmp_path / "all.jsonl")
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    (tmp_path / "part.jsonl").write_text("\n".join(lines[:20]) + "\n")
    stage = BatchImportJudgeStage(
        profile, tmp_path / "out", q, c, i, [tmp_path / "part.jsonl"], tmp_path / "requests" / "manifest.json"
    )
    with pytest.raises(IncompleteShard, match="still lack a grade"):
        stage.run()
    chunks = next((tmp_path / "out").glob("judgments-*.chunks"))
    written = sum(pq.read_metadata(p).num_rows for p in chunks.glob("chunk-*.parquet"))
    waiting = pq.read_metadata(chunks / "batch-imported.parquet").num_rows
    assert written == 16 and waiting == 4  # chunk 0 whole (16 pairs), 4 graded pairs of chunk 1 wait


def test_a_server_that_refuses_the_probe_is_one_line_before_any_pair(tmp_path, small_pipeline, server_profile, standin):
    standin.fail(lambda body: True, Fault(401, body='{"error": {"message": "invalid key"}}'))
    code, output = cli(*judge_args(server_profile, small_pipeline, tmp_path / "served", "--endpoint", standin.endpoint))
    assert code == 1 and "internal error" not in output
    assert output.strip().splitlines()[-1].startswith("error: openai backend"), output
    assert "invalid key" in output and not list((tmp_path / "served").glob("judgments-*"))


def test_grades_waiting_for_their_chunk_outlive_a_served_run_that_fails(
    tmp_path, small_pipeline, server_profile, standin
):
    q, c, i = folders(small_pipeline)
    export_shard(
        REGISTRY["judge"](load_profile(server_profile), tmp_path / "out", q, c, i), Shard(), tmp_path / "requests"
    )
    run_batch_on(standin, tmp_path / "requests" / "requests-00000.jsonl", tmp_path / "all.jsonl")
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    (tmp_path / "part.jsonl").write_text("\n".join(lines[16:20]) + "\n")  # four pairs of chunk 1, no whole chunk
    code, output = cli(
        *judge_args(
            server_profile,
            small_pipeline,
            tmp_path / "out",
            "--import-batch",
            tmp_path / "part.jsonl",
            "--batch-manifest",
            tmp_path / "requests" / "manifest.json",
        )
    )
    assert code == 1 and "still lack a grade" in output
    chunks = next((tmp_path / "out").glob("judgments-*.chunks"))
    assert not list(chunks.glob("chunk-*")) and pq.read_metadata(chunks / "batch-imported.parquet").num_rows == 4

    requests = iter(range(10**6))  # the probe passes; then every request is refused (a quota spent)
    standin.fail(lambda body: next(requests) > 0, *[Fault(400, body='{"error": {"message": "quota exceeded"}}')] * 99)
    code, output = cli(*judge_args(server_profile, small_pipeline, tmp_path / "out", "--endpoint", standin.endpoint))
    assert code == 1 and "internal error" not in output, output
    assert "every one of the 16 requests of a batch failed" in output and "quota exceeded" in output
    assert pq.read_metadata(chunks / "batch-imported.parquet").num_rows == 4, "the imported grades are kept"


def test_a_backend_given_on_the_command_line_writes_the_profile_a_release_needs(
    tmp_path, small_pipeline, server_profile, standin
):
    data = yaml.safe_load(server_profile.read_text())
    in_process = tmp_path / "in-process.yaml"
    in_process.write_text(
        yaml.safe_dump({**data, "name": "in-process", "judge": {**data["judge"], "backend": "transformers"}})
    )
    out = tmp_path / "served"
    code, output = cli(
        *judge_args(in_process, small_pipeline, out, "--backend", "openai", "--endpoint", standin.endpoint)
    )
    assert code == 0, output
    written = out / "in-process-openai.yaml"
    assert f"it is written to {written}; pass that file as --profile to build-release" in " ".join(output.split())
    assert load_profile(written).judge.backend == "openai"
    release = ["build-release", "--judgments", out, "--questions", small_pipeline["questions"]]
    code, output = cli(*release, "--profile", in_process, "--out", tmp_path / "r1")
    assert code == 1 and f"{written}, which judge wrote beside them, does" in " ".join(output.split())
    code, output = cli(*release, "--profile", written, "--out", tmp_path / "r2")
    assert code == 0, output


def test_a_release_built_with_allow_failed_pairs_validates_with_them_counted_apart(
    tmp_path, small_pipeline, server_profile, standin
):
    """`build-release --allow-failed-pairs` is the documented way to publish failed pairs: its release validates
    (and so publishes). A failed pair is no judge's answer, so it is not in the unparsed ('Other') share; validate
    counts the failed pairs apart and checks them against the manifest."""
    standin.fail(
        lambda body: "Is this a probe request?" not in json.dumps(body) and fingerprint(body) % 5 == 0,
        *[Fault(400, body='{"error": {"message": "prompt too long"}}')] * 10_000,
    )
    code, output = cli(*judge_args(server_profile, small_pipeline, tmp_path / "served", "--endpoint", standin.endpoint))
    assert code == 0, output
    judged = rows(tmp_path / "served")
    failed = sum(r["status"] == "request_failed" for r in judged)
    assert failed / len(judged) > 0.05, "more failed pairs than the unparsed bound (1%) allows answers"
    release = tmp_path / "release"
    build = ["build-release", "--profile", server_profile, "--judgments", tmp_path / "served"]
    code, output = cli(*build, "--questions", small_pipeline["questions"], "--out", release, "--allow-failed-pairs")
    assert code == 0, output
    code, output = cli("validate", release, "--no-load")
    assert code == 0, output
    flat = " ".join(output.split())
    assert f"{failed:,} failed pairs (status request_failed, published with --allow-failed-pairs)" in flat
    manifest = json.loads((release / "manifest.json").read_text())
    manifest["failed_pairs"] = failed - 1  # the data holds one more than the build counted
    (release / "manifest.json").write_text(json.dumps(manifest))
    code, output = cli("validate", release, "--no-load")
    assert (
        code == 1
        and f"{failed:,} rows with status request_failed, but manifest.json counts {failed - 1:,}"
        in " ".join(output.split())
    )
