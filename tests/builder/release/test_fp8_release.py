"""fp8 in the release: a judge run with `quantization: fp8` is named in the manifest and the
card, with the note that bf16-vs-fp8 label agreement was not measured; validate checks the card states it."""

import json

import yaml

from builder.release.validate.folder import validate
from generation.profiles.profile import load_profile

SYNTHETIC = dict(subquestions=60, judgments=1_000, shards=1, seed=3)


def test_an_fp8_judge_is_named_in_the_manifest_and_the_card(tmp_path, synthetic_release):
    data = json.loads(load_profile("paper").model_dump_json())
    data["judge"]["quantization"] = "fp8"
    profile = tmp_path / "paper-fp8.yaml"
    profile.write_text(yaml.safe_dump(data))
    out, _ = synthetic_release("fp8", str(profile), repo="org/rsj", **SYNTHETIC)
    manifest = json.loads((out / "manifest.json").read_text())
    precision = "fp8 weights and activations (dynamic per-tensor scales); dtype bfloat16"
    assert manifest["models"]["judge_precision"] == precision
    assert manifest["profile"]["judge"]["quantization"] == "fp8"
    card = (out / "README.md").read_text()
    assert f"precision {precision}" in card
    assert "Label agreement\n  between bf16 and fp8 was not measured" in card
    assert validate(out, load=False).ok
    (out / "README.md").write_text(card.replace(precision, "bfloat16"))
    report = validate(out, load=False)
    assert not report.ok and "judge precision" in str([c.__dict__ for c in report.checks])


def test_a_bf16_judge_gets_no_fp8_note(synthetic_release):
    out, _ = synthetic_release("bf16", repo="org/rsj", **SYNTHETIC)
    assert json.loads((out / "manifest.json").read_text())["models"]["judge_precision"] == "bfloat16"
    card = (out / "README.md").read_text()
    assert "precision bfloat16;" in card and "fp8" not in card
