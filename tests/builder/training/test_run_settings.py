"""What `train` runs with: the release's own profile by default, a `--profile` only when it agrees with it in every
section that made the release's data, and the flags sentence-transformers users expect on top. Each refusal comes
before any work, in one line."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.training.options import TrainOptions
from builder.training.run_settings import train_profile
from generation.errors import ArgumentError
from generation.profiles.profile import ProfileError, load_profile
from tests.builder.training.test_texts import CONTEXT_WORDS, SYNTHETIC_RELEASE  # noqa: F401 - test_texts's release (conftest.py builds it: the paper profile, cut at 40 words)


def options(**given) -> TrainOptions:
    """`train`'s options with its two required folders (train_profile reads neither)."""
    return TrainOptions(texts=Path("texts"), out=Path("model"), **given)


def test_the_release_profile_is_the_default_and_the_flags_set_its_train_section(release):  # noqa: F811
    default = train_profile(release, options())
    assert default.judge.context_words == CONTEXT_WORDS and default.train == load_profile("paper").train
    flagged = train_profile(
        release,
        options(
            model="/models/bge-small",
            epochs=2.5,
            max_steps=40,
            batch_size=128,
            learning_rate=3e-5,
            seed=7,
            ranking="judged",
        ),
    )
    assert flagged.train.model_dump(
        include={"model", "epochs", "max_steps", "batch_size", "learning_rate", "seed"}
    ) == {
        "model": "/models/bge-small",
        "epochs": 2.5,
        "max_steps": 40,
        "batch_size": 128,
        "learning_rate": 3e-5,
        "seed": 7,
    }
    assert flagged.train.ranking == "judged" and flagged.judge == default.judge


def test_a_profile_that_differs_from_the_release_outside_train_is_refused(release, tmp_path):  # noqa: F811
    with pytest.raises(ArgumentError, match=r"judge\.context_words differ from the profile 'paper'"):
        # the release was cut at 40 words, the paper profile at 2048
        train_profile(release, options(profile=load_profile("paper")))
    same = train_profile(release, options())
    changed = same.model_copy(update={"name": "mine", "train": same.train.model_copy(update={"batch_size": 8})})
    assert train_profile(release, options(profile=changed)).train.batch_size == 8


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--profile", "paper"], "judge.context_words differ"),
        (["--epochs", "0"], "train.epochs: Input should be greater than 0"),
        (["--ranking", "bm25"], "train.ranking: Input should be 'corpus' or 'judged'"),
        (["--batch-size", "1"], "--batch-size"),
    ],
)
def test_the_cli_refuses_before_any_work(release, tmp_path, flags, message):  # noqa: F811
    from builder.cli.main import app

    (tmp_path / "texts").mkdir()
    result = CliRunner().invoke(
        app, ["train", str(release), "--texts", str(tmp_path / "texts"), "--out", str(tmp_path / "m"), *flags]
    )
    assert result.exit_code != 0 and message in " ".join(result.output.split()), result.output
    assert "internal error" not in result.output and not (tmp_path / "m").exists()


def test_profile_error_is_what_a_bad_flag_raises(release):  # noqa: F811
    with pytest.raises(ProfileError, match="train.learning_rate"):
        train_profile(release, options(learning_rate=-1.0))
    with pytest.raises(ProfileError, match=r"with --base-model m --learning-rate -1.0 --seed 3: key train\.learn"):
        train_profile(release, options(learning_rate=-1.0, seed=3, model="m"))  # named by flag, in the command's order
