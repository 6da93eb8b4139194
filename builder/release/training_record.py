"""`manifest.training`: the training configs' settings and what the derivation counted, as one `TrainingRecord`.
The build (assemble/training_configs.py) and `validate` (validate/training_configs.py) each count the hard negatives
by their own code, and state the record through this one function."""

from __future__ import annotations

from typing import Protocol

from builder.release.contract import TrainingRecord
from builder.release.training_rule import DEV_RULE, OTHER_QUESTIONS
from generation.profiles.profile import Complexity, Profile, TrainingConfigsSettings


class NegativeTally(Protocol):
    """What a derivation of the hard negatives counted: the build's (assemble/hard_negatives.py `NegativeCounts`) or
    validate's (validate/training_reference.py `ReferenceCounts`)."""

    positives: int
    short_positives: int

    def negatives_by_source(self) -> dict[str, int]: ...


def settings_record(profile: Profile | None, negatives: NegativeTally, retrieved_from: str) -> TrainingRecord:
    """The settings the configs were derived with (the profile's, or the defaults without one), and what they hold
    (`retrieved_from`: runs or none)."""
    training = profile.training if profile is not None else TrainingConfigsSettings()
    answer_level = (profile.complexity if profile is not None else Complexity()).answer_level
    return TrainingRecord(
        **training.model_dump(),
        answer_level=answer_level,
        positives=negatives.positives,
        short_positives=negatives.short_positives,
        negatives_by_source=negatives.negatives_by_source(),
        other_questions_sampled=OTHER_QUESTIONS,
        retrieved_unjudged_from=retrieved_from,
        dev_rule=DEV_RULE,
    )
