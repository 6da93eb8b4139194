"""validate's report as a reader meets it: a check it did not run is `skipped`, with the reason it did not run, never
`ok`; the closing line counts the checks that passed, were skipped and failed apart, in the library's report, the
command's table and its last line."""

import pytest
from typer.testing import CliRunner

from builder.cli.main import app
from builder.release.validate.folder import validate
from builder.release.validate.pilot import PILOT

SYNTHETIC_RELEASE = dict(repo="ORG/researchy-subq-judgments", subquestions=60, judgments=1200, shards=1, seed=11)

LOAD = "load_dataset(RELEASE, config) loads every config and split with the schema's Features"
SHARES = "per-level shares within the expected bounds or the previous release"
DISTRIBUTION = "distribution mode: probs sum to 1, level is their argmax, expected is sum p x level"
# the synthetic release: the paper profile's judge (generate mode), no pilot record; validated without bounds or loads
NOT_RUN = {
    LOAD: "--no-load",
    SHARES: "no bounds given (--expect or --against)",
    PILOT: "no pilot record (and no pilot section in README.md)",
    DISTRIBUTION: "not distribution mode (the judge's rule: generate)",
}


def statuses(report) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.skipped) for c in report.checks}


def test_checks_not_run_are_skipped_with_their_reason_and_counted_apart(release):
    report = validate(release, load=False)
    found = statuses(report)
    assert {name: found[name] for name in NOT_RUN} == {name: ("skipped", why) for name, why in NOT_RUN.items()}
    assert {c.name for c in report.checks if c.status == "skipped"} == set(NOT_RUN)
    assert report.ok and report.count("FAIL") == 0
    passed = len(report.checks) - len(NOT_RUN)
    assert report.count("ok") == passed
    assert report.summary() == f"{passed} of {len(report.checks)} checks passed, {len(NOT_RUN)} skipped"


def test_a_check_given_its_input_runs(release, tmp_path):
    """Bounds given: the shares check runs (passes or fails); bounds no split is large enough for: skipped, saying so."""
    wide = tmp_path / "wide.yaml"
    wide.write_text("levels: {0: [0, 1], 5: [0, 1]}\n")
    assert statuses(validate(release, wide, load=False))[SHARES] == ("ok", "")
    narrow = tmp_path / "narrow.yaml"
    narrow.write_text("levels: {5: [0.99, 1.0]}\n")
    failed = validate(release, narrow, load=False)
    assert statuses(failed)[SHARES][0] == "FAIL" and not failed.ok
    total, skipped = len(failed.checks), len(NOT_RUN) - 1
    assert failed.summary() == f"1 of {total} checks failed ({total - 1 - skipped} passed, {skipped} skipped)"
    small = tmp_path / "small.yaml"
    small.write_text("levels: {5: [0.99, 1.0]}\nmin_judgments: 1000000\n")
    status, why = statuses(validate(release, small, load=False))[SHARES]
    assert status == "skipped" and why.startswith("every split is under min_judgments 1,000,000: train (")


@pytest.mark.parametrize("bounds", [None, "levels: {5: [0.99, 1.0]}\n"], ids=["passes", "fails"])
def test_command_prints_skipped_rows_with_reasons_and_the_counts(release, tmp_path, bounds):
    args = ["validate", str(release), "--no-load"]
    if bounds:
        (tmp_path / "bounds.yaml").write_text(bounds)
        args += ["--expect", str(tmp_path / "bounds.yaml")]
    result = CliRunner().invoke(app, args)
    rows = {
        line.split("│")[2].strip(): line.split("│")[1].strip() for line in result.stdout.splitlines() if "│" in line
    }
    skipped = {name: why for name, why in NOT_RUN.items() if not (bounds and name == SHARES)}
    assert {name for name, mark in rows.items() if mark == "skipped"} == set(skipped)
    for name, why in skipped.items():
        line = next(line for line in result.stdout.splitlines() if f"│ {name}" in line)
        assert line.split("│")[4].strip() == why
    report = validate(release, tmp_path / "bounds.yaml" if bounds else None, load=False)
    if bounds:
        assert result.exit_code == 1 and rows[SHARES] == "FAIL"
        assert result.stderr.strip() == f"error: {report.summary()}: {SHARES}"
    else:
        assert result.exit_code == 0 and "ok" not in {rows[name] for name in NOT_RUN}
        assert result.stdout.rstrip().splitlines()[-1] == report.summary()
