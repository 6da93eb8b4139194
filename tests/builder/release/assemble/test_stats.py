"""The release's statistics and training record travel as the contract's models from where they are counted
(builder/release/assemble/stats.py, validate/statistics.py, builder/release/training_record.py) to the card, the
manifest and validate's comparisons."""

import json
import re
import shutil

import pytest

from builder.release.card_text import STATS_BEGIN, STATS_END, stats_markdown
from builder.release.contract import ManifestError, SplitStats, TrainingRecord, read_manifest
from builder.release.validate.folder import validate

SYNTHETIC_RELEASE = dict(subquestions=200, judgments=2500, test_share=0.25, shards=2, seed=11)


def failing(report) -> dict[str, list]:
    return {c.name: c.examples for c in report.checks if not c.ok}


def edited_copy(release, tmp_path, edit):
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def test_the_build_and_validate_count_into_the_same_models(release):
    """validate's own count (validate/statistics.py) and the build's (assemble/stats.py), read back from
    manifest.json, are equal SplitStats per split, and the card's statistics section is rendered from them."""
    stated = read_manifest(release).stats
    derived = validate(release, load=False).stats
    assert set(stated) == set(derived) >= {"train", "test"}
    assert all(isinstance(s, SplitStats) for s in [*stated.values(), *derived.values()])
    assert stated == derived
    card = (release / "README.md").read_text()
    assert card[card.index(STATS_BEGIN) : card.index(STATS_END) + len(STATS_END)] == stats_markdown(derived)
    train = derived["train"].provenance_share
    assert train.bm25_only + train.rerank_only + train.bm25_and_rerank + train.clicked_only == pytest.approx(
        1, abs=4e-4
    )


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda share: share.update(bm25_top5=0.5), r"stats\.train\.provenance_share\.bm25_top5"),
        (lambda share: share.pop("clicked_only"), r"stats\.train\.provenance_share\.clicked_only"),
    ],
    ids=["a share the contract does not name", "a share missing"],
)
def test_the_provenance_shares_are_the_contracts_seven(release, tmp_path, edit, problem):
    """provenance_share is a model of its seven shares, no longer any mapping of names to numbers: a share added or
    left out is refused by key path, by the kit and by validate."""
    copy = edited_copy(release, tmp_path, lambda manifest: edit(manifest["stats"]["train"]["provenance_share"]))
    with pytest.raises(ManifestError, match=problem):
        read_manifest(copy)
    examples = [str(e) for examples in failing(validate(copy, load=False)).values() for e in examples]
    assert any(re.search(problem, e) for e in examples), examples


def test_validate_names_a_training_count_the_data_does_not_give(release, tmp_path):
    """manifest.training is the TrainingRecord both sides state through settings_record: a positive more in the
    manifest than validate's own derivation counts is named with both values."""
    stated = read_manifest(release).training
    assert isinstance(stated, TrainingRecord) and stated.positives > 0
    copy = edited_copy(release, tmp_path, lambda manifest: manifest["training"].update(positives=stated.positives + 1))
    examples = [e for examples in failing(validate(copy, load=False)).values() for e in examples]
    assert (
        f"manifest.json training: positives {stated.positives + 1!r}, the data gives {stated.positives!r}" in examples
    )
