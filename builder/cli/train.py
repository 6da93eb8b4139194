"""`researchy-subq train`: the fine-tuning recipe (builder/training/recipe.py) as a command; the before/after table
and the false-negative report on stdout, progress on stderr."""
from __future__ import annotations

from pathlib import Path

import typer

from builder.cli.support import PROFILE, RELEASE, check_folder_arg, existing_release, fail, guard_commands, new_app, \
    notice, profile_of
from generation.progress import results

app = new_app("Training: train.")


@app.command()
def train(
    release: Path = RELEASE,
    texts: Path = typer.Option(..., "--texts", help="the folder `researchy-subq texts` wrote from your copy"),
    out: Path = typer.Option(..., "--out", help="where the fine-tuned model goes (its checkpoints under "
                                                "OUT/checkpoints; a re-run resumes from the last)"),
    profile: str = PROFILE,
) -> None:
    """Fine-tune a sentence-transformers bi-encoder on the release's hard-negatives rows (MultipleNegativesRankingLoss,
    batches that keep judged positives out of each anchor's negatives), then print base vs fine-tuned on dev and test."""
    from builder.training.recipe import text_lookup, train_and_measure
    from builder.training.report import render_report

    existing_release(release)
    check_folder_arg(out, "--out")
    if not texts.is_dir():
        fail(f"{texts}: no such folder (write it with `researchy-subq texts`)")
    chosen = profile_of(profile)
    try:
        report = train_and_measure(release, text_lookup(texts), chosen, out, progress=notice)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    results.print(render_report(report, chosen), highlight=False, markup=False)


guard_commands(app)
