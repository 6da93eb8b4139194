"""The profile `train` runs with: the release's own (its manifest.json), or a `--profile` that agrees with it on
every section that made the release's data, with the flags sentence-transformers users expect on top
(`--base-model`, `--epochs`, `--max-steps`, `--batch-size`, `--learning-rate`, `--seed`) and `--ranking`: the train
keys of `TrainOptions` (options.py)."""

from __future__ import annotations

from pathlib import Path

from builder.command_options import command_options
from builder.training.options import TrainOptions
from builder.training.texts import release_context_words
from generation.errors import ArgumentError
from generation.profiles.profile import Profile, load_profile, merged, validated

# what made the release's rows: retrieval (bm25, rerank, pool), the judge, the answer level and the training configs
RELEASE_SECTIONS = ("bm25", "rerank", "pool", "judge", "complexity", "training")


def release_profile(release: Path) -> Profile:
    return release_context_words(release)[1].profile


def _differing(ours, theirs, prefix: str) -> list[str]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [
            k
            for key in sorted(set(ours) | set(theirs))
            for k in _differing(ours.get(key), theirs.get(key), f"{prefix}.{key}")
        ]
    return [] if ours == theirs else [prefix]


def check_release_sections(profile: Profile, release: Path) -> None:
    """An ArgumentError naming the keys where `profile` and the release's profile differ in RELEASE_SECTIONS (as the
    config hash compares them: a judge server's address or a batch size does not count)."""
    built = release_profile(release)
    sections = [s for s in RELEASE_SECTIONS if profile.config_hash(s) != built.config_hash(s)]
    if sections:
        keys = [k for s in sections for k in _differing(profile.model_dump()[s], built.model_dump()[s], s)]
        raise ArgumentError(
            f"--profile {profile.name}: {', '.join(keys[:8]) or ', '.join(sections)} differ from the profile "
            f"{built.name!r} that built {release}; train with the release's own profile (leave --profile out) or one "
            "that differs only in its train section"
        )


def train_profile(release: Path, options: TrainOptions) -> Profile:
    """The release's profile, or the options' profile once checked against it, with the options' train keys set."""
    given = options.profile
    if given is None:
        chosen = release_profile(release)
    else:
        chosen = given if isinstance(given, Profile) else load_profile(given)
        check_release_sections(chosen, release)
    keys = options.train_keys()
    if not keys:
        return chosen
    origin = " ".join(f"{o.flag} {keys[o.name]}" for o in command_options(TrainOptions) if o.name in keys)
    return validated(merged(chosen.model_dump(), {"train": keys}), f"{chosen.name} with {origin}")
