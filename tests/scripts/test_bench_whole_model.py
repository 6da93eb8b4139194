"""scripts/bench_whole_model.py records what `plan` prices with: the document-first prompt's FLOPs as plan counts them
(1/g of the prefix plus the suffix), the composition the budget forms (not a tail, not a common-prefix pass), one
precision a process with each row written as it is measured, the kit's own commit, and its figures under the device
they were measured on."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from generation.judging.calibration import REFERENCE, Calibration

ROOT = Path(__file__).resolve().parents[2]


def bench():
    spec = importlib.util.spec_from_file_location("bench_whole_model", ROOT / "scripts" / "bench_whole_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.subprocess
def test_the_benchmark_at_a_tiny_shape_one_precision_a_process(tmp_path):
    """Two precisions, each in a process of its own: fp8 cannot run on this CPU, so its process fails, and its rows
    say so while the float32 rows stand. In float32 a pair's label does not depend on its batch: no flips, |dP| <
    1e-4; the document-first prompt runs both documents' prefixes in one forward, then their suffixes in one more;
    its FLOPs a pair are 1/3 of a document's prefix plus its suffix, as plan counts them."""
    from generation.model_shapes import TINY, prompt_flops
    from generation.planning.document_first import Groups

    done = subprocess.run(
        [sys.executable, "scripts/bench_whole_model.py", "--tiny", "--words", "60", "--documents", "2",
         "--subquestions", "3", "--precision", "fp8-per-tensor", "float32", "--out", str(tmp_path),
         "--calibration", str(tmp_path / "calibration.json")],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "whole_model.json").read_text())
    failed = [r for r in record["rows"] if r["precision"] == "fp8-per-tensor"]
    assert len(failed) == 2 and all("its process ended with exit code" in r["skipped"] for r in failed)
    rows = {r["prompt"]: r for r in record["rows"] if r["precision"] == "float32"}
    assert list(rows) == ["crux-paper-document-first", "crux-paper"], "document-first first"
    for prompt, row in rows.items():
        assert f"| tiny-llama | float32 | {prompt} | {row['pairs_per_s']:.2f} | {row['forwards']} |" in done.stdout
        assert row["pairs"] == 6 and row["level_flips"] == 0 and row["max_abs_dp"] < 1e-4
    variant, paper = rows["crux-paper-document-first"], rows["crux-paper"]
    assert (variant["rows_per_long_forward"], variant["forwards"]) == (2, 2), "2 prefixes in one, then the suffixes"
    assert paper["rows_per_long_forward"] == 6, "the batch, not its common prefix's 1-row pass"
    assert variant["tokens_computed_per_pair"] < paper["tokens_computed_per_pair"]
    shape = TINY["tiny-llama"]
    groups = Groups(variant["prefix_tokens"], variant["suffix_tokens"], 3)
    assert variant["flops_per_pair"] == pytest.approx(groups.flops(shape, 0))
    assert variant["flops_per_pair"] < prompt_flops(shape, variant["prompt_tokens"]) / 2
    assert paper["flops_per_pair"] == pytest.approx(prompt_flops(shape, paper["prompt_tokens"]))
    entries = {e["prompt"]: e for e in record["whole_model"]}
    assert set(entries) == set(rows) and entries["crux-paper-document-first"]["rows_per_forward"] == 2
    assert entries["crux-paper"]["pairs_per_s"] == round(paper["pairs_per_s"], 4)
    assert entries["crux-paper"]["code"] == record["code"] == bench().code_version()
    written, bundled = Calibration.load(tmp_path / "calibration.json"), Calibration.load(REFERENCE)
    assert written.whole_model == bundled.whole_model + record["whole_model"], "float32 figures beside the fp8 ones"
    assert written.device == record["device"] != bundled.device, "named for the device that measured them"
    assert {r["device"] for r in written.rows} == {bundled.device}, "the bundled shares keep the H100's name"


def test_the_composition_is_the_batches_the_budget_formed():
    rows = bench().long_forward_rows
    assert rows([(3, 3000), (3, 2990), (1, 2980), (42, 240), (42, 240), (14, 240)]) == (3, False), "not the tail"
    assert rows([(1, 181), (6, 93)]) == (6, True), "a tiny run: the common prefix's pass is as long as the batch"
    assert rows([(4, 3100)] * 13 + [(2, 3000)]) == (4, False)


def test_an_h200_figure_is_named_for_the_h200_and_its_shares_for_the_h100():
    """Calibration.add_whole_model on an H200: the calibration's device, peaks and bandwidth are the H200's; each bundled share
    names the H100 it was measured on, and plan says so."""
    from generation.planning.origins import measured_on

    template = Calibration.load(REFERENCE).whole_model[1]
    figure = {
        **template,
        "device": "NVIDIA H200",
        "pairs_per_s": 25.0,
        "rows_per_forward": 18,
        "measured": "2026-12-01",
    }
    calibration = Calibration.load(REFERENCE).add_whole_model([figure], "NVIDIA H200")
    assert calibration.device == "NVIDIA H200" and calibration.bandwidth == 4.8e12
    assert calibration.whole_model[-1] == figure and len(calibration.whole_model) == 3
    assert "(NVIDIA H100 80GB HBM3, 2026-11-23)" in measured_on(calibration, "bf16", 0.511)
    again = Calibration.load(REFERENCE).add_whole_model([{**figure, "pairs_per_s": 26.0}], "NVIDIA H200")
    assert [e["pairs_per_s"] for e in again.whole_model].count(25.0) == 0, "the same setting and composition replaced"


def test_the_commit_is_the_kits_own_whatever_the_working_folder(tmp_path, monkeypatch):
    """Run from inside another git repository, the script names the kit's commit, not that repository's."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    subprocess.run(["git", "-C", str(other), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)  # fmt: skip
    monkeypatch.chdir(other)
    kit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    elsewhere = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    version = bench().code_version()
    if kit.returncode != 0:
        assert "not a git checkout" in version or version == "code not recorded"
        return
    assert kit.stdout.strip() in version and elsewhere not in version
