"""`judge --import-batch` counts and shows the result lines that grade no pair of the shard (a
pair of no plan, a results file of another export, a malformed id), in its last line and the completion record."""

import json

from builder.standins.openai_server import answered, run_batch_on
from generation.profiles.profile import load_profile
from generation.stages import REGISTRY
from generation.stages.judge_batch import export_shard
from generation.storage.shards import Shard
from tests.helpers import cli, folders, judge_args


def test_lines_of_no_pair_of_the_shard_are_counted_shown_and_recorded(
    tmp_path, small_pipeline, server_profile, standin
):
    requests = tmp_path / "requests"
    export_shard(
        REGISTRY["judge"](load_profile(server_profile), tmp_path / "out", *folders(small_pipeline)), Shard(), requests
    )
    run_batch_on(standin, requests / "requests-00000.jsonl", tmp_path / "results.jsonl")
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write(answered("999::clueweb22-en0000-00-00009::0", " 1") + "\n")  # well formed, no pair of this shard
        f.write(answered("only::two", " 3") + "\n")  # not qid::docid::position
    other = [answered(f"77{i}::clueweb22-en0000-09-0000{i}::1", " 2") for i in range(3)]
    (tmp_path / "other.jsonl").write_text("\n".join(other) + "\n")  # the results of another export
    code, output = cli(
        *judge_args(
            server_profile,
            small_pipeline,
            tmp_path / "out",
            "--import-batch",
            tmp_path / "results.jsonl",
            "--import-batch",
            tmp_path / "other.jsonl",
            "--batch-manifest",
            requests / "manifest.json",
        )
    )
    assert code == 0, output
    flat = " ".join(output.split())
    assert (
        "batch result lines set aside: not in shard 1 (e.g." in flat and "'999::clueweb22-en0000-00-00009::0'" in flat
    )
    assert f"another export 3 (e.g. {tmp_path / 'other.jsonl'}: 3 lines, none of a pair of this shard" in flat
    assert "malformed ids 1 (e.g." in flat and "'only::two' is not 'qid::docid::position'" in flat
    record = json.loads(next((tmp_path / "out" / "_done").glob("judgments-*.json")).read_text())
    lines = record["extra"]["batch_lines"]
    assert {k: v["count"] for k, v in lines.items()} == {"not_in_shard": 1, "another_export": 3, "malformed_ids": 1}
    assert "only::two" in lines["malformed_ids"]["examples"][0]
