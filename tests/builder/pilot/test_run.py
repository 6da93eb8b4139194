"""`researchy-subq pilot` on the sample's pipeline: two stand-in settings end to end, the sample and its draw, resume,
and the refusals."""

import json

import pyarrow.parquet as pq
import pytest
import yaml

from builder.pilot.options import PilotOptions
from builder.pilot.record import read_pilot_record, record_json
from builder.pilot.run import run_pilot
from generation.errors import ArgumentError
from generation.pilot.sample import SAMPLE_FILE, Population, SampleRequest, draw, quotas, read_sample
from generation.pilot.settings import load_setting
from tests.helpers import assert_one_line_error, cli, cli_one_line

B_CUTS = "judge.cut_points=[0.30, 0.42, 0.55, 0.62, 0.75]"


@pytest.fixture
def profile_file(tmp_path, small_pipeline):
    """The small pipeline's profile (the demo's, smaller depths) as a file the pilot's --a/--b take."""
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small_pipeline["profile"].model_dump()))
    return path


def options(small_pipeline, out, profile, b_set=(B_CUTS,), **more) -> PilotOptions:
    """A pilot of `profile` against itself with `b_set` on the small pipeline's stage folders."""
    folders = {k: small_pipeline[k] for k in ("candidates", "index")}
    return PilotOptions(a=str(profile), b=str(profile), b_set=list(b_set), subquestions=small_pipeline["questions"],
                        out=out, **folders, **more)  # fmt: skip


def pilot_args(profile, pipeline, out, *more):
    return [
        "pilot",
        "--a", profile,
        "--b", profile,
        "--b-set", B_CUTS,
        "--subquestions", pipeline["questions"],
        "--candidates", pipeline["candidates"],
        "--index", pipeline["index"],
        "--out", out,
        "--pairs", 150,
        "--questions", 2,
        "--resamples", 100,
        *more,
    ]  # fmt: skip


def test_quotas_share_equally_and_pass_on_what_a_small_question_leaves():
    assert quotas([100, 100, 100], 30) == [10, 10, 10]
    assert quotas([4, 100, 100], 30) == [4, 13, 13]
    assert quotas([4, 100, 100], 31) == [4, 14, 13]  # 4, then ceil(27 / 2) = 14, then the 13 left
    assert quotas([2, 3], 50) == [2, 3]


def test_the_draw_takes_whole_questions_then_pairs_within_them_whatever_the_input_order():
    subqs = {f"q{i}": [f"q{i}-{k}" for k in range(i + 1)] for i in range(6)}
    docs = {f"q{i}": [f"d{i}-{j}" for j in range(3)] for i in range(6)}
    population = Population(subqs, docs, {})
    reordered = Population(dict(reversed(subqs.items())), dict(reversed(docs.items())), {})
    table, definition = draw(population, SampleRequest(pairs=20, questions=4, seed=5))
    assert draw(reordered, SampleRequest(pairs=20, questions=4, seed=5))[0].equals(table)
    rows = table.to_pylist()
    drawn = sorted({r["qid"] for r in rows})
    shares = quotas([len(subqs[q]) * 3 for q in drawn], 20)
    assert len(drawn) == 4 and definition["taken"] == {
        "questions": 4,
        "pairs": 20,
        "pairs_per_question": {"min": min(shares), "max": max(shares)},
    }
    for row in rows:  # every pair is a (sub-question, candidate) of its own question, and none twice
        assert row["subq_id"] in subqs[row["qid"]] and row["docid"] in docs[row["qid"]]
    assert len({(r["subq_id"], r["docid"]) for r in rows}) == 20
    assert [sum(r["qid"] == q for r in rows) for q in drawn] == shares


def test_two_stand_in_settings_end_to_end(small_pipeline, profile_file, tmp_path):
    out = tmp_path / "pilot"
    code, output = cli(*pilot_args(profile_file, small_pipeline, out))
    assert code == 0, output
    record = json.loads((out / "pilot.json").read_text())
    sample, _ = read_sample(out / SAMPLE_FILE)
    assert sample.num_rows == record["sample"]["taken"]["pairs"] == 150
    assert record["sample"]["taken"]["questions"] == 2 == len(set(sample["qid"].to_pylist()))
    judged = {
        side: pq.read_table(out / side / "pilot-judgments-00000-of-00001.parquet").to_pylist() for side in ("a", "b")
    }
    pairs = set(zip(sample["subq_id"].to_pylist(), sample["docid"].to_pylist()))
    for rows in judged.values():
        assert {(r["subq_id"], r["docid"]) for r in rows} == pairs
    # the same cosine cut at other points: recompute exact agreement from the two files
    a = {(r["subq_id"], r["docid"]): r["level"] for r in judged["a"]}
    b = {(r["subq_id"], r["docid"]): r["level"] for r in judged["b"]}
    exact = sum(a[p] == b[p] for p in pairs) / len(pairs)
    agreement = record["agreement"]
    assert agreement["measures"]["exact_agreement"] == pytest.approx(exact)
    assert agreement["measures"]["within_one_level"] == pytest.approx(sum(abs(a[p] - b[p]) <= 1 for p in pairs) / 150)
    assert sum(map(sum, agreement["confusion"]["rows_a_columns_b"])) == 150
    assert agreement["confusion"]["levels"] == [0, 1, 2, 3, 4, 5]
    assert 0 < exact < 1, "lower cut points move some pairs up a level"
    answers_a = {p for p in pairs if a[p] >= 4}
    answers_b = {p for p in pairs if b[p] >= 4}
    if answers_b:
        assert agreement["answer"]["precision"] == pytest.approx(len(answers_a & answers_b) / len(answers_b))
    kappa = agreement["measures"]["kappa_linear"]
    verdict = record["verdict"]
    answer = agreement["answer"]
    assert verdict["passed"] == (kappa >= 0.8 and answer["recall"] >= 0.9 and answer["precision"] >= 0.9)
    assert verdict["line"].startswith(f"{verdict['decision']}: linear-weighted kappa {kappa:.3f}")
    assert verdict["line"] in output and "Spearman of the expected level" in output
    assert record["settings"]["B"]["overrides"] == [B_CUTS]
    assert record["differences"] == [
        "judge.cut_points: [0.37, 0.46, 0.585, 0.63, 0.72] -> [0.3, 0.42, 0.55, 0.62, 0.75]"
    ]
    assert record["gpu_hours"]["A"]["rows"] == [] and record["gpu_hours"]["saved"] is None
    assert "saved: not priced" in output


def test_a_sample_larger_than_the_pairs_takes_all_and_says_so(small_pipeline, profile_file, tmp_path):
    asked = options(small_pipeline, tmp_path / "all", profile_file, pairs=10**6, questions=50, seed=3, resamples=0)
    pilot, record = run_pilot(asked)
    population, taken = record.sample.population, record.sample.taken
    assert (taken.questions, taken.pairs) == (population["questions"], population["pairs"])
    assert pilot.summaries["A"].pairs == population["pairs"]


def test_settings_on_different_scales_are_refused(tmp_path):
    folders = dict(subquestions=tmp_path, candidates=tmp_path, index=tmp_path, out=tmp_path / "out")
    with pytest.raises(ArgumentError, match="different scales: A 0-5 .*B 0-2"):
        run_pilot(PilotOptions(a="paper", b="paper", b_set=["judge.prompt=umbrela"], **folders))
    with pytest.raises(ArgumentError, match="--b-set 'pool.bm25_top=5': the pilot compares judge settings only"):
        load_setting("B", "paper", ["pool.bm25_top=5"])
    other_pool_file = tmp_path / "other-pool.yaml"
    data = load_setting("B", "paper").profile.model_dump()
    data["pool"]["bm25_top"] = 5
    other_pool_file.write_text(yaml.safe_dump(data))
    with pytest.raises(ArgumentError, match="differ outside the judge, in pool"):
        run_pilot(PilotOptions(a="paper", b=str(other_pool_file), **folders))
    folders = ("--subquestions", tmp_path, "--candidates", tmp_path, "--index", tmp_path, "--out", tmp_path / "out")
    code, output = cli_one_line("pilot", "--a", "paper", "--b", "paper", "--b-set", "judge.prompt=umbrela", *folders)
    assert_one_line_error(code, output, "different scales: A 0-5 (prompt crux-paper), B 0-2 (prompt umbrela)")
    code, output = cli_one_line("pilot", "--a", "paper", "--b", "paper", "--b-set", "judge.prompt", *folders)
    assert_one_line_error(code, output, "--b-set 'judge.prompt': expected SECTION.KEY=VALUE")
    assert not (tmp_path / "out").exists(), "nothing is written before the settings are checked"


def test_killed_mid_run_then_sharded_resume_gives_the_uninterrupted_record(small_pipeline, tmp_path):
    """A pilot killed (SIGKILL) while judging setting A, resumed as shard 0 of 3 and finished by shards 1 and 2 (the
    small pipeline's two questions fall in shards 1 and 0; shard 2 owns none): the same judgments and the same record
    as one uninterrupted run; a shard before the last writes no record and says it waits."""
    import os
    import signal
    import subprocess
    import sys
    import time

    data = small_pipeline["profile"].model_dump()
    data["judge"]["chunk_size"] = 8
    profile = tmp_path / "chunked.yaml"
    profile.write_text(yaml.safe_dump(data))
    code, output = cli(*pilot_args(profile, small_pipeline, tmp_path / "reference"))
    assert code == 0, output
    reference = json.loads((tmp_path / "reference" / "pilot.json").read_text())

    out = tmp_path / "killed"
    chunks = out / "a" / "pilot-judgments-00000-of-00003.chunks"
    command = [sys.executable, "-m", "builder.cli.main", *map(str, pilot_args(profile, small_pipeline, out))]
    proc = subprocess.Popen([*command, "--shard", "0", "--num-shards", "3"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None and not any(chunks.glob("chunk-*.parquet")):
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before a chunk was written: nothing was killed mid-run"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "pilot.json").exists() and any(chunks.glob("chunk-*.parquet"))

    for shard in (0, 1, 2):
        code, output = cli(*pilot_args(profile, small_pipeline, out, "--shard", shard, "--num-shards", 3))
        assert code == 0, output
        assert (out / "pilot.json").exists() == (shard == 2)
        assert ("the report waits for the other shards" in output) == (shard < 2), output
        assert ("resumed:" in output) == (shard == 0), output
    record = json.loads((out / "pilot.json").read_text())
    assert record == reference
    assert (out / "pilot.json").read_bytes() == (tmp_path / "reference" / "pilot.json").read_bytes()
    for side in ("a", "b"):
        whole = pq.read_table(tmp_path / "reference" / side / "pilot-judgments-00000-of-00001.parquet")
        parts = [pq.read_table(out / side / f"pilot-judgments-0000{i}-of-00003.parquet").to_pylist() for i in range(3)]
        assert not parts[2] and parts[0] and parts[1]
        key = lambda r: (r["subq_id"], r["docid"])  # noqa: E731
        assert sorted(parts[0] + parts[1], key=key) == sorted(whole.to_pylist(), key=key)


def test_a_resumed_pilot_refuses_another_sample_in_the_same_folder(small_pipeline, profile_file, tmp_path):
    run_pilot(options(small_pipeline, tmp_path / "p", profile_file, pairs=40, questions=2, seed=1, resamples=0))
    again = options(small_pipeline, tmp_path / "p", profile_file, pairs=40, questions=2, seed=2, resamples=0)
    with pytest.raises(Exception, match="a sample drawn for another request"):
        run_pilot(again)


def test_paper_prompt_against_document_first_on_a_tiny_chat_llama(small_pipeline, chat_profile, tmp_path):
    """The transformers backend on a tiny random Llama with Llama-3.3's chat template, in distribution mode: the paper's
    prompt (A) against its document-first variant (B, one override). Both judge the sample; the expected levels are
    the distribution's; plan prices both from the model's own config; the notes say which prompt shares a prefix."""
    profile = chat_profile
    out = tmp_path / "pilot"
    code, output = cli(
        "pilot",
        "--a", profile,
        "--b", profile,
        "--b-set", "judge.prompt=crux-paper-document-first",
        "--subquestions", small_pipeline["questions"],
        "--candidates", small_pipeline["candidates"],
        "--index", small_pipeline["index"],
        "--out", out,
        "--pairs", 40,
        "--questions", 2,
        "--resamples", 100,
    )  # fmt: skip
    assert code == 0, output
    record = json.loads((out / "pilot.json").read_text())
    typed = read_pilot_record(out / "pilot.json")  # priced rows, distributions, a real prompt: the contract reads all
    assert record_json(typed) == (out / "pilot.json").read_text()  # 1 stays 1, 1.0 stays 1.0
    settings = record["settings"]
    assert (settings["A"]["prompt"]["id"], settings["B"]["prompt"]["id"]) == ("crux-paper", "crux-paper-document-first")
    assert not settings["A"]["prompt"]["document_first"] and settings["B"]["prompt"]["document_first"]
    assert settings["A"]["judge_config_hash"] != settings["B"]["judge_config_hash"]
    assert record["differences"] == ["judge.prompt: 'crux-paper' -> 'crux-paper-document-first'"]
    assert "prompt crux-paper puts the sub-question before the document" in " ".join(output.split())
    assert "prompt crux-paper-document-first puts the document first" in " ".join(output.split())
    agreement = record["agreement"]
    assert agreement["settings"]["A"]["graded"] == agreement["settings"]["B"]["graded"] == 40  # distribution: no Other
    assert agreement["expected_spearman"]["a"] == agreement["expected_spearman"]["b"] == "expected value"
    rows = {side: pq.read_table(out / side / "pilot-judgments-00000-of-00001.parquet").to_pylist() for side in "ab"}
    assert all(r["probs"] is not None for r in rows["a"] + rows["b"])
    changed = sum(x["probs"] != y["probs"] for x, y in zip(rows["a"], rows["b"]))
    assert changed == 40, "the order of the lines changes every prompt, so every distribution"
    for side in "AB":
        bill = record["gpu_hours"][side]
        assert [r["label"] for r in bill["rows"]] == ["paper, measured", "paper, assumed"]
        assert bill["precision"] == "bf16" and all(r["hours"] > 0 for r in bill["rows"])
    for side, prompt in (("A", "crux-paper"), ("B", "crux-paper-document-first")):
        assert {r["prompt"] for r in record["gpu_hours"][side]["rows"]} == {prompt}, "each its own prompt's rows"
    # each headline is plan's own row for that profile: 'paper, assumed', its prompt, bf16, prefix cached
    from generation.planning.cost_report import plan_json
    from generation.planning.costing import costing_for
    from generation.planning.plan import measure

    for side, overrides in (("A", []), ("B", ["judge.prompt=crux-paper-document-first"])):
        setting = load_setting(side, str(profile), overrides)
        planned = plan_json(measure(setting.profile, *(small_pipeline[k] for k in ("questions", "candidates", "index"))),
                            costing_for(setting.profile)[0], setting.profile, 0)  # fmt: skip
        row = next(
            r for r in planned["rows"]
            if (r["label"], r["prompt"], r["precision"]) == ("paper, assumed", setting.prompt.id, "bf16")
        )  # fmt: skip
        assert record["gpu_hours"][side]["headline"]["cached_hours"] == pytest.approx(row["cached_hours"])
    saved = record["gpu_hours"]["saved"]
    assert saved["saved"] == pytest.approx(saved["a"] - saved["b"])
    assert record["verdict"]["line"] in output
    said = " ".join(output.split())  # the tiny judge runs in float32: said so, beside the bf16 plan prices it at
    assert said.count("float32 (`plan` prices it as bf16)") == 2 and "label stability" not in said


def test_a_ray_actor_rebuilds_the_same_sampled_job_from_its_recipe(small_pipeline, profile_file, tmp_path):
    """What generation/executors/ray.py's ChunkActor does with a job's recipe gives the same pairs, sample included."""
    from pathlib import Path

    from generation.pilot.judge_stage import PilotJudgeStage
    from generation.profiles.profile import Profile
    from generation.storage.shards import Shard

    pilot, _ = run_pilot(options(small_pipeline, tmp_path / "p", profile_file, pairs=30, questions=2, resamples=0))
    stage = pilot.stage(pilot.settings[1])
    stage.check_inputs()
    job = stage.chunk_work(Shard(1, 3))
    stage_class, arguments, index, count = job.recipe()
    profile = Profile.model_validate_json(arguments.pop("profile_json"))
    rebuilt = stage_class(profile, Path(arguments.pop("out")), **{k: Path(v) for k, v in arguments.items()})
    rebuilt.check_inputs()
    assert stage_class is PilotJudgeStage and (index, count) == (1, 3)
    assert rebuilt.chunk_work(Shard(index, count)).pairs == job.pairs and 0 < len(job.pairs) < 30
