import io

import pytest

from generation.planning.plan import (
    LLAMA3_TOKENS_PER_WORD,
    PAPER_PAIRS,
    PAPER_PAIRS_PER_SUBQUESTION,
    ModelSize,
    Scenario,
    gpu_hours,
    measure,
    node_pairs_per_second,
)
from generation.profiles.profile import load_profile
from generation.progress import FullWidthConsole


def test_paper_scale_arithmetic_against_a_hand_computation():
    """Llama-3.3-70B (70.6e9 params, 80 layers, hidden 8192), a 3,000-token prompt + 3 new tokens, 24,316,320 pairs,
    bf16 (989 TFLOP/s dense) at 40%. By hand: 2 x 70.6e9 x 3003 = 424,023,600,000,000; attention
    2 x 80 x 8192 x 3003^2 = 11,820,084,756,480; sum 435,843,684,756,480 FLOPs per pair;
    x 24,316,320 / (989e12 x 0.4) / 3600 = 7,441.66 GPU-hours. Prefix cache, 200 shared tokens reused by all but
    the first of 18.865 pairs per sub-question: S = 189.398; 2 x 70.6e9 x (3003 - S) + 2 x 80 x 8192 x (3003^2 - S^2)
    = 409,053,632,092,000 FLOPs -> 6,984.24 GPU-hours. One 4-GPU node: 4 x 989e12 x 0.4 / 435.84e12 = 3.63 pairs/s."""
    model = ModelSize()
    row = Scenario("paper", "", PAPER_PAIRS, 3000, 200, PAPER_PAIRS_PER_SUBQUESTION, 3)
    assert row.flops(model) == pytest.approx(435_843_684_756_480, rel=1e-12)
    assert gpu_hours(row.pairs, row.flops(model), "bf16", 0.4) == pytest.approx(7441.66, abs=0.01)
    assert row.flops(model, prefix_cached=True) == pytest.approx(409_053_632_092_000, rel=1e-9)
    assert gpu_hours(row.pairs, row.flops(model, prefix_cached=True), "bf16", 0.4) == pytest.approx(6984.24, abs=0.01)
    assert node_pairs_per_second(row.flops(model), "bf16", 0.4) == pytest.approx(3.63, abs=0.01)


def test_measure_states_its_stand_in_and_projects_the_paper_row_from_the_cut(small_pipeline):
    """The paper profile's judge tokenizer is not on disk here: MiniLM stands in, and says so; the assumed paper row
    is the measured non-context tokens plus context_words x tokens per word; the shared prefix comes from two prompts
    of one sub-question with different documents (it holds the instruction and the question, not the whole prompt)."""
    profile = load_profile("paper")
    plan = measure(
        profile, small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"], sample=30
    )
    assert plan.stand_in and "stand-in for " + profile.judge.model in plan.tokenizer
    assert any("stood in" in line and "tokens per word" in line for line in plan.notes())
    these, measured, assumed = plan.scenarios()[:3]  # the paper prompt's rows; its variant's follow
    assert assumed.prompt_tokens == pytest.approx(plan.mean_overhead_tokens + 2048 * LLAMA3_TOKENS_PER_WORD)
    assert (
        measured.pairs == assumed.pairs == PAPER_PAIRS and assumed.pairs_per_subquestion == PAPER_PAIRS_PER_SUBQUESTION
    )
    assert these.pairs_per_subquestion == plan.pairs / plan.subquestions
    question_tokens = 5  # every sub-question has more; the instruction alone is over a hundred MiniLM tokens
    assert question_tokens < plan.mean_shared_prefix_tokens < plan.mean_prompt_tokens
    assert plan.mean_overhead_tokens < plan.mean_prompt_tokens
    assert "NOT representative" in measured.note, "the sample's passages never reach 2,048 words"


def test_decode_steps_cost_weight_bytes_over_bandwidth_per_batch():
    """Llama-3.3-70B in bf16 (141,107,412,992 bytes of weights; KV 2 x 80 x 8 x 128 x 2 = 327,680 bytes a token),
    3,000 prompt tokens, 3 new tokens = 2 decode steps, batch 8, 3.35 TB/s. By hand, one step of one pair:
    141,107,412,992 / 8 + 327,680 x (3,000 + 1.5) = 17,638,426,624 + 983,531,520 = 18,621,958,144 bytes;
    two steps / 3.35e12 = 0.011117587 s. One new token (distribution) costs no decode step."""
    from generation.model_shapes import LLAMA_33_70B, PUBLISHED
    from generation.planning.costing import decode_seconds

    shape = PUBLISHED[LLAMA_33_70B]
    assert decode_seconds(shape, "bf16", 3000, 3, 8, 3.35e12) == pytest.approx(2 * 18_621_958_144 / 3.35e12, rel=1e-12)
    assert decode_seconds(shape, "bf16", 3000, 1, 8, 3.35e12) == 0


def test_the_calibrated_plan_prices_prefill_at_the_measured_share(small_pipeline):
    """The bundled H100 reference: the paper profile judges on vLLM, which was not measured, so the transformers
    figures stand in and the plan says so; prefill hours = pairs x prompt FLOPs / (peak x share); generate adds its
    decode steps; fp8 uses its own share of the fp8 peak; the rerank rows use the reranker's share."""
    from generation.judging.calibration import REFERENCE, Calibration
    from generation.model_shapes import prompt_flops
    from generation.planning.cost_report import plan_table
    from generation.planning.costing import costing_for, decode_seconds

    profile = load_profile("paper")
    plan = measure(
        profile, small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"], sample=30
    )
    costing, stand_ins = costing_for(profile)
    assert stand_ins == [], "both models are published shapes"
    assert (costing.judge.name, costing.reranker.name) == ("Llama-3.3-70B", "Qwen3-Reranker-0.6B")
    assert costing.calibration.device == Calibration.load(REFERENCE).device == "NVIDIA H100 80GB HBM3"
    assert (costing.backend, costing.mode, costing.decode_batch) == ("vllm", "generate", 256)
    table, notes = plan_table(plan, costing, profile.rerank.depth)
    assert "vLLM not measured: the transformers bf16 figure" in notes[0]
    piped = FullWidthConsole(file=io.StringIO())  # stdout piped: unbounded width, so the cells set it
    piped.print(table)
    assert max(map(len, piped.file.getvalue().splitlines())) <= 300, "the sources are keyed, listed in the notes"
    assert any(note.startswith("[1] utilisation from ") for note in notes)
    cells = {
        tuple(table.columns[c]._cells[i] for c in (0, 1, 4)): [c._cells[i] for c in table.columns]
        for i in range(table.row_count)
    }
    assumed = plan.scenarios()[2]
    whole = next(e for e in costing.calibration.whole_model if e["prompt"] == "crux-paper")
    for precision, share, peak in (("bf16", 0.511, 989e12), ("fp8", 0.334, 1979e12)):
        row = cells[("paper, assumed", "crux-paper", precision)]
        flops = prompt_flops(costing.judge, assumed.prompt_tokens)
        prefill = PAPER_PAIRS * flops / (peak * share) / 3600
        if precision == "fp8":  # the whole-model figure of 2026-11-27 (1.33 pairs/s) is above the 33.4% share's price
            measured = PAPER_PAIRS * max(flops / whole["flops_per_pair"], 1) / whole["pairs_per_s"] / 3600
            assert measured > prefill and "whole-model figure" in row[-1]
            prefill = measured
        decode = PAPER_PAIRS * decode_seconds(costing.judge, precision, assumed.prompt_tokens, 3, 256, 3.35e12) / 3600
        assert row[5] == f"{share:.1%}"
        assert row[7] == f"{prefill:,.1f}" and row[8] == f"{decode:,.1f}" and row[9] == f"{prefill + decode:,.1f}"
    rerank = cells[("rerank, paper (ASSUMED 90,000 questions)", "-", "bf16")]
    hours = 90_000 * 100 * prompt_flops(costing.reranker, 2800) / (989e12 * 0.137) / 3600
    assert rerank[2] == "9,000,000" and rerank[9] == f"{hours:,.1f}"
    distribution, _ = costing_for(
        profile.model_copy(update={"judge": profile.judge.model_copy(update={"mode": "distribution"})})
    )
    table, _ = plan_table(plan, distribution, profile.rerank.depth)
    assert set(table.columns[8]._cells) == {"0.0"}, "distribution mode has no decode step"


@pytest.mark.subprocess
def test_bench_gpu_writes_a_calibration_that_plan_reads(tmp_path, small_pipeline):
    """scripts/bench_gpu.py at tiny shapes on the CPU (no peak in its table: the test states one): it prints every
    run of both shapes and writes a calibration file whose figures `plan` then prices with."""
    import subprocess
    import sys
    from pathlib import Path

    from generation.judging.calibration import Calibration
    from generation.planning.cost_report import plan_table
    from generation.planning.costing import costing_for

    out = tmp_path / "calibration.json"
    done = subprocess.run(
        [
            sys.executable,
            "scripts/bench_gpu.py",
            "--device",
            "cpu",
            "--shape",
            "tiny-llama",
            "tiny-qwen3",
            "--prompt-tokens",
            "250",
            "--rerank-tokens",
            "150",
            "--pairs",
            "4",
            "--batch-size",
            "2",
            "--repeats",
            "1",
            "--peak-tflops",
            "0.5",
            "--bandwidth-tbs",
            "0.02",
            "--calibration",
            str(out),
        ],
        cwd=Path(__file__).parents[3],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout
    for run in (
        "| tiny-llama | kit | distribution |",
        "| tiny-llama | kit | generate |",
        "| tiny-llama | raw padded |",
        "| tiny-llama | raw unpadded |",
        "| tiny-qwen3 | kit | rerank |",
        "| tiny-qwen3 | kit packed | rerank |",
    ):
        assert run in printed
    calibration = Calibration.load(out)
    assert calibration.peak_flops == {"float32": pytest.approx(0.5e12)} and calibration.bandwidth == 0.02e12
    kit = next(r for r in calibration.rows if r["run"] == "kit" and r["mode"] == "distribution")
    assert calibration.utilisation["transformers"]["float32"] == round(kit["share_of_peak"], 4)
    assert kit["tflops"] == pytest.approx(kit["share_of_peak"] * 0.5)
    assert "rerank" in calibration.utilisation
    profile = load_profile("paper")
    profile = profile.model_copy(update={"judge": profile.judge.model_copy(update={"backend": "transformers"})})
    plan = measure(
        profile, small_pipeline["questions"], small_pipeline["candidates"], small_pipeline["index"], sample=10
    )
    profile = profile.model_copy(update={"judge": profile.judge.model_copy(update={"model": "someone/unknown-judge"})})
    costing, stand_ins = costing_for(profile, out)
    assert stand_ins == [
        "someone/unknown-judge: no config on disk and no published shape here; Llama-3.3-70B's shape stood in."
    ]
    table, notes = plan_table(plan, costing, profile.rerank.depth)
    assert table.columns[4]._cells == ["float32"] * table.row_count
    assert "float32: transformers float32, calibrated" in notes[0]
