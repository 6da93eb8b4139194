"""What `train` runs with, in one typed `TrainOptions`: each field is one option of `researchy-subq train`, in this
order (builder/command_options.py); builder/cli/retriever.py makes the command's options from them. A field named as
a key of the profile's train section (`model`, `epochs`, ...) sets that key (run_settings.py `train_profile`). A
module of its own, light to import: the command's options are made when the CLI starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.command_options import REQUIRED, option
from generation.profiles.profile import Profile
from generation.profiles.release_sections import TrainSettings


@dataclass(frozen=True, kw_only=True)
class TrainOptions:
    """The texts folder, the model folder and the work folder, the profile (a name, a YAML path, a Profile, or None:
    the release's own), the train keys set on top of it, and the Hub repository the model goes to."""

    texts: Path = option(REQUIRED, "--texts", help="the folder `researchy-subq texts` wrote from your copy")
    out: Path = option(
        REQUIRED, "--out", output="folder", help="the model folder: the fine-tuned model and its card, nothing else"
    )
    work: Path | None = option(
        None,
        "--work",
        output="folder",
        help="the training files and checkpoints (default: OUT-work beside OUT); a re-run resumes",
    )
    profile: str | Path | Profile | None = option(
        None,
        "--profile",
        parsed_as=str,
        help="default: the profile the release was built with; another must agree with it in every section but train",
    )
    model: str | None = option(
        None, "--base-model", help="the bi-encoder to fine-tune: a local folder, or a Hub name already cached"
    )
    epochs: float | None = option(None, "--epochs", min=0, help="passes over the training rows")
    max_steps: int | None = option(None, "--max-steps", min=1, help="stop after this many steps")
    batch_size: int | None = option(None, "--batch-size", min=2, help="rows per batch at most")
    learning_rate: float | None = option(None, "--learning-rate", min=0, help="AdamW's peak learning rate")
    seed: int | None = option(None, "--seed", min=0, help="the trainer's and the batch sampler's seed")
    ranking: str | None = option(
        None, "--ranking", help="what a query ranks when measuring: corpus (the texts folder, as mteb) or judged"
    )
    push_to_hub: str | None = option(
        None,
        "--push-to-hub",
        help="ORG/NAME: upload the files train wrote (a folder holding any other is refused), once a scan of them "
        "finds none of the training texts",
    )

    def train_keys(self) -> dict[str, object]:
        """The keys of the profile's train section these options set: the fields named as one, when given."""
        given = {name: getattr(self, name, None) for name in TrainSettings.model_fields}
        return {name: value for name, value in given.items() if value is not None}
