"""A pilot's record in a release: the pilot of two stand-in settings on the sample's pipeline, then every pair judged
with setting B's profile, then `build-release --pilot`. The card states the prompt, the pilot's sample and
agreement and what was saved; the manifest holds the record; `validate` re-checks the one against the other, and
refuses a release whose labels' prompt is not one."""

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml

from builder.pilot.card_text import PILOT_HEADING, pilot_markdown
from builder.pilot.contract import PilotEntry, PilotRecord
from builder.pilot.figures import table_pairs
from builder.pilot.options import PilotOptions
from builder.pilot.run import run_pilot
from builder.pilot.verdict import decide, rule_of
from builder.release.assemble.folder import ReleaseOptions, build_release
from builder.release.contract import MANIFEST_SCHEMA
from builder.release.validate.folder import validate
from builder.release.validate.pilot import ONE_PROMPT, PILOT
from generation.errors import InputError
from generation.profiles.profile import load_profile
from generation.stages.judge import JudgeStage

B_CUTS = "judge.cut_points=[0.30, 0.42, 0.55, 0.62, 0.75]"


@pytest.fixture(scope="module")
def piloted(small_pipeline, tmp_path_factory):
    root = tmp_path_factory.mktemp("piloted")
    base = root / "small.yaml"
    base.write_text(yaml.safe_dump(small_pipeline["profile"].model_dump()))
    folders = {k: small_pipeline[k] for k in ("candidates", "index")}
    pilot, record = run_pilot(PilotOptions(a=str(base), b=str(base), b_set=[B_CUTS], subquestions=small_pipeline[
        "questions"], out=root / "p", pairs=80, questions=2, resamples=100, **folders))  # fmt: skip
    judge_profile = load_profile(pilot.profiles["B"])  # the file the pilot wrote beside B's judgments
    assert judge_profile == pilot.settings[1].profile
    JudgeStage(
        judge_profile, root / "judgments", *(small_pipeline[k] for k in ("questions", "candidates", "index"))
    ).run()
    release = root / "release"
    build_release(ReleaseOptions(judgments=[root / "judgments"], questions=[small_pipeline["questions"]], out=release,
                                 profile=pilot.profiles["B"], repo="o/r", pilot=root / "p" / "pilot.json"))  # fmt: skip
    return {"root": root, "release": release, "record": record, "profile": pilot.profiles["B"]}


def section_of(manifest: dict) -> str:
    """The card's pilot section of a manifest's pilot entry, read through the contract as validate reads it."""
    return pilot_markdown(PilotEntry.model_validate(manifest["pilot"]))


def read(release: Path) -> tuple[dict, str]:
    return json.loads((release / "manifest.json").read_text()), (release / "README.md").read_text()


def test_the_card_states_the_prompt_the_pilot_and_what_was_saved(piloted):
    manifest, card = read(piloted["release"])
    record = piloted["record"]
    assert manifest["pilot"] == {
        "labels": "B",
        "record": json.loads((piloted["root"] / "p" / "pilot.json").read_text()),
    }
    jsonschema.validate(manifest, json.loads((piloted["release"] / MANIFEST_SCHEMA).read_text()))  # pilot included
    assert manifest["prompt"]["id"] == record.settings["B"].prompt.id == "crux-paper"
    section = section_of(manifest)
    assert section in card and card.count(PILOT_HEADING) == 1
    kappa = record.agreement.measures["kappa_linear"]
    taken = record.sample.taken
    assert f"| linear-weighted kappa (the verdict's) | {kappa:.3f} |" in section
    assert f"The sample: {taken.pairs:,} pairs of {taken.questions:,} questions (seed 0)" in section
    assert f"\nVerdict: {record.verdict.line}" in section and "PilotVerdict" not in section
    for label, setting in record.settings.items():  # the judge's own precision, then what plan prices it as
        dtype, priced = setting.profile.judge.dtype, setting.precision
        assert (dtype, priced) == ("float32", "bf16")  # the stand-in runs in float32; plan has no float32 rows
        assert f"{setting.prompt.sha256[:12]}`) | {dtype} | {priced} | " in section, label
    assert "B (the candidate; these labels)" in section and "What was saved: not priced" in section
    report = validate(piloted["release"], load=False)
    assert report.ok, [(c.name, c.examples) for c in report.checks if not c.ok]
    assert next(c for c in report.checks if c.name == PILOT).note == ""


def copy_release(piloted, tmp_path) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(piloted["release"], copy)
    return copy


def resealed(piloted, tmp_path, edit_manifest) -> Path:
    """The release with its manifest edited and the card's pilot section rendered again from the edited record (as a
    careful forger would), so only what the record itself says can give it away."""
    copy = copy_release(piloted, tmp_path)
    manifest, card = read(copy)
    before = section_of(manifest)
    edit_manifest(manifest)
    card = card.replace(before, section_of(manifest))
    (copy / "manifest.json").write_text(json.dumps(manifest))
    (copy / "README.md").write_text(card)
    return copy


def findings(release: Path, name: str) -> list[str]:
    check = next(c for c in validate(release, load=False).checks if c.name == name)
    return [str(e) for e in check.examples]


def other_prompt(manifest):
    manifest["pilot"]["record"]["settings"]["B"]["prompt"].update(id="crux-code", sha256="0" * 64)


def other_kappa(manifest):
    """Figures that clear every bound of the rule (or, for a record that passed, a kappa that misses it)."""
    agreement = manifest["pilot"]["record"]["agreement"]
    if manifest["pilot"]["record"]["verdict"]["passed"]:
        agreement["measures"]["kappa_linear"] = 0.1
    else:
        agreement["measures"]["kappa_linear"] = 0.99
        agreement["answer"].update(precision=1.0, recall=1.0)


def two_judges(manifest):
    manifest["models"]["judge"] += "; llama (vllm, prompt crux-paper-document-first, mode generate)"


@pytest.mark.parametrize(
    "edit,check,finding",
    [
        (other_prompt, ONE_PROMPT, "the pilot's setting 'B' made the labels with prompt 'crux-code'"),
        (other_prompt, PILOT, "setting B's prompt crux-code has sha256 0000"),
        (other_kappa, PILOT, "verdict"),
        (two_judges, ONE_PROMPT, "the judges name the prompt crux-paper-document-first beside crux-paper"),
    ],
)
def test_validate_refuses_a_resealed_release_that_mixes_prompts_or_misstates_its_pilot(
    piloted, tmp_path, edit, check, finding
):
    release = resealed(piloted, tmp_path, edit)
    if edit is other_kappa:  # the figures are not the confusion table's, and the verdict not the stated one's
        stated = piloted["record"].verdict.decision
        finding = f"verdict {stated!r} (decision, passed, value, "
        assert any("agreement.measures.kappa_linear is " in line for line in findings(release, check))
    assert any(finding in line for line in findings(release, check)), findings(release, check)


def test_validate_finds_a_card_whose_pilot_section_is_not_the_record(piloted, tmp_path):
    copy = copy_release(piloted, tmp_path)
    manifest, card = read(copy)
    (copy / "README.md").write_text(card.replace("| exact agreement | ", "| exact agreement | 9"))
    assert any("the pilot section is not the manifest's record rendered" in f for f in findings(copy, PILOT))
    manifest.pop("pilot")
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert any("manifest.json no pilot record" in f for f in findings(copy, PILOT))


def test_build_release_refuses_a_pilot_record_about_other_labels(piloted, tmp_path, small_pipeline):
    record = json.loads((piloted["root"] / "p" / "pilot.json").read_text())
    for setting in record["settings"].values():
        setting["judge_config_hash"] = "0" * 16
    other = tmp_path / "other.json"
    other.write_text(json.dumps(record))
    inputs = dict(judgments=[piloted["root"] / "judgments"], questions=[small_pipeline["questions"]], out=tmp_path / "r",
                  profile=piloted["profile"])  # fmt: skip
    with pytest.raises(InputError, match="the record is not about these labels"):
        build_release(ReleaseOptions(**inputs, pilot=other))
    other.write_text(json.dumps({"record": "something else"}))
    with pytest.raises(InputError, match="not a pilot record"):
        build_release(ReleaseOptions(**inputs, pilot=other))
    record = json.loads((piloted["root"] / "p" / "pilot.json").read_text())
    record["agreement"]["kappa_by_hand"] = 0.9  # a key the contract does not name (builder/pilot/contract.py)
    other.write_text(json.dumps(record))
    with pytest.raises(InputError, match="other.json.*agreement.kappa_by_hand: Extra inputs are not permitted"):
        build_release(ReleaseOptions(**inputs, pilot=other))
    record["agreement"].pop("kappa_by_hand")
    record["sample"]["taken"]["pairs"] = "eighty"
    other.write_text(json.dumps(record))
    with pytest.raises(InputError, match="sample.taken.pairs: Input should be a valid integer"):
        build_release(ReleaseOptions(**inputs, pilot=other))
    record["sample"]["taken"]["pairs"] = True  # read strictly: lax mode took it for 1
    other.write_text(json.dumps(record))
    with pytest.raises(InputError, match="sample.taken.pairs: Input should be a valid integer, not true"):
        build_release(ReleaseOptions(**inputs, pilot=other))


def test_build_release_refuses_a_pilot_record_whose_verdict_contradicts_its_figures(piloted, tmp_path, small_pipeline):
    record = json.loads((piloted["root"] / "p" / "pilot.json").read_text())
    flipped = "FAIL" if record["verdict"]["passed"] else "PASS"
    record["verdict"].update(decision=flipped, passed=not record["verdict"]["passed"])
    record["verdict"]["line"] = flipped + record["verdict"]["line"].split(":", 1)[1]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(record))
    inputs = dict(judgments=[piloted["root"] / "judgments"], questions=[small_pipeline["questions"]], out=tmp_path / "r",
                  profile=piloted["profile"])  # fmt: skip
    with pytest.raises(InputError, match=f"edited.json.*verdict '{flipped}'.*its rule on the record's own figures"):
        build_release(ReleaseOptions(**inputs, pilot=edited))
    assert not (tmp_path / "r" / "README.md").exists()


def forged_figures(record: dict) -> None:
    """A careful forgery: kappa, recall and precision set to 0.95 and the verdict given again by the kit's own
    rule on them, the confusion table left as it was."""
    agreement = record["agreement"]
    agreement["measures"]["kappa_linear"] = 0.95
    agreement["answer"].update(recall=0.95, precision=0.95)
    forged = PilotRecord.model_validate(record)
    record["verdict"] = decide(forged.agreement, rule_of(forged.verdict)).model_dump()


def one_pair_off_the_diagonal(record: dict) -> None:
    """One pair of the confusion table moved to the next level of B, every stated figure left as it was."""
    table = record["agreement"]["confusion"]["rows_a_columns_b"]
    i = next(i for i, row in enumerate(table) if row[i])
    table[i][i] -= 1
    table[i][i + 1 if i + 1 < len(table) else i - 1] += 1


def test_the_records_figures_are_its_confusion_tables(piloted):
    """Every figure the verdict reads is derived again from the record's confusion table (builder/pilot/figures.py);
    on the pilot's own record they agree, and sklearn's kappas of the table's pairs are the record's."""
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    from builder.pilot.figures import figure_problems

    record = PilotRecord.model_validate_json((piloted["root"] / "p" / "pilot.json").read_text(), strict=True)
    assert figure_problems(record) == []
    a, b = table_pairs(record.agreement.confusion.rows_a_columns_b)
    assert len(a) == record.agreement.coverage.both > 0
    for weights in ("linear", "quadratic"):
        expected = cohen_kappa_score(a, b, labels=record.agreement.levels, weights=weights)
        stated = record.agreement.measures[f"kappa_{weights}"]
        assert (stated is None and np.isnan(expected)) or stated == pytest.approx(expected, rel=1e-9)
    positives_a, positives_b = a >= record.agreement.answer_level, b >= record.agreement.answer_level
    assert (
        record.agreement.answer.reference == positives_a.sum()
        and record.agreement.answer.both == (positives_a & positives_b).sum()
    )


@pytest.mark.parametrize("edit", [forged_figures, one_pair_off_the_diagonal])
def test_a_record_whose_figures_its_confusion_table_does_not_give_is_refused(piloted, tmp_path, small_pipeline, edit):
    """build-release --pilot refuses the record, and validate a release that holds it with its card's pilot section
    rendered from it (a careful forger), naming the figure and what the table gives: sklearn's kappa of its pairs."""
    from sklearn.metrics import cohen_kappa_score

    record = json.loads((piloted["root"] / "p" / "pilot.json").read_text())
    edit(record)
    a, b = table_pairs(record["agreement"]["confusion"]["rows_a_columns_b"])
    kappa = cohen_kappa_score(a, b, labels=record["agreement"]["levels"], weights="linear")
    stated = record["agreement"]["measures"]["kappa_linear"]
    said = re.compile(
        rf"agreement\.measures\.kappa_linear is {re.escape(str(stated))}; the confusion table gives ([-+.\deE]+)"
    )
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(record))
    inputs = dict(judgments=[piloted["root"] / "judgments"], questions=[small_pipeline["questions"]], out=tmp_path / "r",
                  profile=piloted["profile"])  # fmt: skip
    with pytest.raises(InputError, match=r"edited\.json.*the record was edited") as refused:
        build_release(ReleaseOptions(**inputs, pilot=edited))
    assert float(said.search(str(refused.value))[1]) == pytest.approx(kappa, rel=1e-9)
    release = resealed(piloted, tmp_path, lambda manifest: edit(manifest["pilot"]["record"]))
    found = [said.search(line) for line in findings(release, PILOT)]
    assert any(found), findings(release, PILOT)
    assert float(next(f for f in found if f)[1]) == pytest.approx(kappa, rel=1e-9)
