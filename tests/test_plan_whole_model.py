"""`plan` prices what runs: whole-model figures keyed by the batch composition floor the paper-scale
rows of their prompt and precision; a newer figure, with its device and date, replaces them; sbatch times get a
stated margin."""

import json

import pytest

from generation.judging.calibration import REFERENCE, Calibration, CalibrationError
from generation.planning.costing import costing_for, judge_rows
from generation.planning.plan import PAPER_PAIRS, measure
from generation.planning.whole_model import composition, figure_for
from generation.profiles import load_profile, with_overrides
from tests.helpers import cli

VARIANT, PAPER = "crux-paper-document-first", "crux-paper"
MEASURED_HOURS = {VARIANT: PAPER_PAIRS / 9.79 / 3600, PAPER: PAPER_PAIRS / 1.33 / 3600}  # 689.9 and 5,078.6


def rows_of(profile, small_pipeline, calibration=None):
    plan = measure(profile, *(small_pipeline[k] for k in ("questions", "candidates", "index")), sample=30)
    costing, _ = costing_for(profile, calibration)
    rows, notes = judge_rows(plan, costing)
    return {(r.label, r.prompt, r.precision): r for r in rows}, notes


PROFILES = {
    "paper-document-first (vllm, TP 4)": [],
    "the transformers backend on one H100 at 0.95": [
        "judge.backend=transformers", "judge.quantization=fp8", "judge.gpu_memory_utilization=0.95",
        "judge.tensor_parallel_size=1",
    ],
}  # fmt: skip


@pytest.mark.parametrize("overrides", PROFILES.values(), ids=PROFILES.keys())
def test_no_paper_scale_fp8_row_is_cheaper_than_the_whole_model_measured(small_pipeline, overrides):
    """Until a newer whole-model figure says otherwise: the variant at 9.79 pairs/s (689.9 H100-hours) and the paper
    prompt at 1.33 (5,078.6), H100 80GB, 2026-11-27. Each row names the figure; the notes cite device and date."""
    profile = with_overrides(load_profile("paper-document-first"), overrides, origin="test")
    rows, notes = rows_of(profile, small_pipeline)
    for prompt, hours in MEASURED_HOURS.items():
        for label in ("paper, measured", "paper, assumed"):
            row = rows[(label, prompt, "fp8")]
            assert row.prefill_hours >= hours - 1e-6, (label, prompt, row.prefill_hours)
            assert row.whole_model.startswith(f"{prompt}, fp8")
        line = next(n for n in notes if n.startswith(f"{prompt}, fp8: not below the whole-model figure"))
        assert "2026-11-27 on NVIDIA H100 80GB HBM3" in line and f"{hours:,.0f} GPU-hours" in line
    assert rows[("paper, assumed", VARIANT, "fp8")].prefill_hours == pytest.approx(MEASURED_HOURS[VARIANT])
    assert not rows[("paper, assumed", VARIANT, "bf16")].whole_model, "bf16 has no whole-model figure: components"


def newer(tmp_path, *entries):
    data = json.loads(REFERENCE.read_text())
    data["whole_model"] += list(entries)
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(data))
    return path


def entry(pairs_per_s, rows, measured="2026-12-01", **more):
    template = next(e for e in Calibration.load(REFERENCE).whole_model if e["prompt"] == VARIANT)
    return {**template, "pairs_per_s": pairs_per_s, "rows_per_forward": rows, "measured": measured, **more}


def test_a_newer_figure_of_the_composition_that_runs_prices_the_variant_and_is_cited(small_pipeline, tmp_path):
    """A newer figure at the backend's composition (the prefixes its batches hold) at 20 pairs/s: the variant's
    assumed row comes out near PAPER_PAIRS / 20 s (338 H100-hours), cited with its device and date. A figure of more
    rows than the backend forms would not lower it: a speed-up is not assumed before it is measured."""
    profile = load_profile("paper-document-first")
    rows, _ = rows_of(profile, small_pipeline)
    runs_at = composition(rows[("paper, assumed", VARIANT, "fp8")].decode_batch)
    faster_batched = newer(tmp_path, entry(40.0, runs_at + 4, device="NVIDIA H100 80GB HBM3"))
    rows, _ = rows_of(profile, small_pipeline, faster_batched)
    assert rows[("paper, assumed", VARIANT, "fp8")].prefill_hours == pytest.approx(MEASURED_HOURS[VARIANT])
    newest = newer(tmp_path, entry(20.0, runs_at, device="NVIDIA H200"))  # beside the 9.79 one
    rows, notes = rows_of(profile, small_pipeline, newest)
    assert rows[("paper, assumed", VARIANT, "fp8")].prefill_hours == pytest.approx(PAPER_PAIRS / 20 / 3600, rel=0.01)
    assert any("whole-model figure of 2026-12-01 on NVIDIA H200" in n for n in notes)


def test_the_composition_rule_exact_then_fewer_rows_then_the_fewest_said_optimistic(tmp_path):
    calibration = Calibration.load(newer(tmp_path, entry(20.0, 4), entry(30.0, 8)))
    assert (
        "measured at 1 rows a forward, as this plan runs it"
        in figure_for(calibration, VARIANT, "fp8", "per-tensor", 1).line
    )
    six = figure_for(calibration, VARIANT, "fp8", "per-tensor", 6)
    assert six.seconds_per_pair == pytest.approx(1 / 20) and "6 rows a forward not measured" in six.line
    assert figure_for(calibration, VARIANT, "fp8", "per-row", 1) is None, "per-row was not measured"
    assert figure_for(calibration, VARIANT, "bf16", "per-tensor", 1) is None
    only_batched = Calibration.load(newer(tmp_path, entry(20.0, 4)))
    only_batched.whole_model = [e for e in only_batched.whole_model if e["rows_per_forward"] == 4]
    assert "possibly optimistic" in figure_for(only_batched, VARIANT, "fp8", "per-tensor", 1).line


def test_a_figure_without_its_device_or_date_is_refused(tmp_path):
    bad = entry(20.0, 1)
    del bad["measured"]
    with pytest.raises(
        CalibrationError, match=r"whole_model\[2\] has no measured \(a figure names its device and date\)"
    ):
        Calibration.load(newer(tmp_path, bad))


def test_the_plan_states_the_sbatch_margin(small_pipeline, tmp_path):
    out = tmp_path / "plan.json"
    code, output = cli(
        "plan", "--profile", "paper-document-first", "--subquestions", small_pipeline["questions"],
        "--candidates", small_pipeline["candidates"], "--index", small_pipeline["index"], "--sample", 20,
    )  # fmt: skip
    assert code == 0, output
    assert "x 1.25" in " ".join(output.split()) and "4,496 against 5,083" in " ".join(output.split())
    code, _ = cli(
        "plan", "--profile", "paper-document-first", "--subquestions", small_pipeline["questions"],
        "--candidates", small_pipeline["candidates"], "--index", small_pipeline["index"], "--sample", 20,
        "--json", out,
    )  # fmt: skip
    assert code == 0 and any("x 1.25" in n for n in json.loads(out.read_text())["notes"])
