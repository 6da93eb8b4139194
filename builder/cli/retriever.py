"""The retriever commands of `researchy-subq`, from a release to a fine-tuned retriever: texts (the judged documents'
texts from the user's own licensed copy) and training-files (what sentence-transformers, FlagEmbedding, BEIR and
Tevatron read), both written locally, never into a release folder; train (the fine-tuning recipe over them,
builder/training/recipe.py, and its push to the Hub)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.cli.shared_options import Sharding
from builder.cli.support import (
    RELEASE,
    check_folder_arg,
    existing_release,
    fail,
    guard_commands,
    new_app,
    notice,
    run_stage,
    shard_of,
    with_options,
)
from builder.command_options import REQUIRED, option
from builder.training.options import TrainOptions
from generation.progress import results

app = new_app("Training commands: texts, training-files, train.")


@dataclass(frozen=True, kw_only=True)
class TextsOptions:
    """The user's copy the texts come from, where they go, how the copy is read, and which documents."""

    copy: Path = option(
        REQUIRED,
        "--from",
        help="your licensed copy: a ClueWeb22 folder (holding txt/, or txt/ "
        "itself; the tree ir_datasets' clueweb22 reads), or the kit's corpus Parquet "
        "(`researchy-subq corpus` output)",
    )
    out: Path = option(
        REQUIRED, "--out", output="folder", help="where the texts go: a local folder outside any release"
    )
    offsets: bool = option(
        True,
        help="read ClueWeb22 records through their .offset files when present "
        "(--no-offsets: stream each file to its last judged record)",
    )
    all_retrieved: bool = option(
        False,
        "--all-retrieved",
        help="also every document of questions.retrieved_unjudged (for training-files with a larger --negatives)",
    )


@app.command()
@with_options
def texts(release: Path = RELEASE, *, options: TextsOptions, sharding: Sharding) -> None:
    """Texts of the release's documents from your copy (the judged ones and the hard-negatives rows' unjudged
    negatives): as the judge saw them and whole; lists the documents the copy lacks. Sharded and resumable; refuses
    to write into a release folder."""
    from builder.training.texts import write_texts

    copy = options.copy
    existing_release(release)
    summary = run_stage(
        "texts",
        "docs",
        lambda advance: write_texts(
            release,
            copy,
            options.out,
            shard_of(sharding.shard, sharding.num_shards),
            options.offsets,
            progress=advance,
            all_retrieved=options.all_retrieved,
        ),
    )
    if summary.skipped:
        notice("shard already complete under this release and copy: skipped (delete its _done record to redo it)")
        return
    for offsets, why in summary.wrong_offsets.items():
        notice(f"{offsets}: wrong ({why}); its ClueWeb22 file was read by streaming instead")
    missing = sum(summary.missing.values())
    reasons = ", ".join(f"{k}: {v:,}" for k, v in sorted(summary.missing.items())) or "none"
    read = (
        f"{summary.files_opened:,} ClueWeb22 files"
        if summary.copy_kind == "clueweb22-txt"
        else f"the corpus Parquet {copy}"
    )
    results.print(
        f"shard {summary.shard}: {summary.written:,} of {summary.documents:,} documents written, "
        f"{missing:,} missing ({reasons}) from {read} -> {summary.outputs[0]}; missing list {summary.outputs[1]}",
        highlight=False,
        markup=False,
    )


@dataclass(frozen=True, kw_only=True)
class TrainingFilesOptions:
    """The texts the files are made from, where they go, the hard negatives re-derived, and which formats."""

    texts_folder: Path = option(REQUIRED, "--texts", help="the folder `researchy-subq texts` wrote")
    out: Path = option(
        REQUIRED, "--out", output="folder", help="where the trainers' files go: a local folder outside any release"
    )
    whole: bool = option(False, "--whole", help="use whole documents (default: as the judge saw them)")
    negatives: int | None = option(None, min=1, help="negatives per row, k (default: the release's)")
    negative_level: int | None = option(
        None, min=0, help="a judged document at this level or below is a negative (default: the release's)"
    )
    fill_order: str | None = option(
        None,
        help="where negatives come from, in order, comma-separated: judged, retrieved_unjudged, other_question "
        "(default: the release's)",
    )
    formats: list[str] | None = option(
        None,
        "--format",
        help="write only these (repeatable): sentence-transformers, flagembedding, beir, tevatron (default: all)",
    )


@app.command(name="training-files")
@with_options
def training_files(release: Path = RELEASE, *, options: TrainingFilesOptions) -> None:
    """sentence-transformers dataset (+ id sidecar), FlagEmbedding JSONL, BEIR folder and Tevatron corpus from the
    release and your texts; the hard-negatives rows re-derived from its graded lists (the release's own by default,
    or another k, negative level or fill order)."""
    from builder.training.files import write_training_files

    fill_order, formats = options.fill_order, options.formats
    existing_release(release)
    summary = run_stage(
        "training files",
        "rows",
        lambda advance: write_training_files(
            release,
            options.texts_folder,
            options.out,
            whole=options.whole,
            negatives=options.negatives,
            negative_level=options.negative_level,
            fill_order=None if fill_order is None else tuple(p.strip() for p in fill_order.split(",") if p.strip()),
            progress=advance,
            **({"formats": tuple(formats)} if formats else {}),
        ),
    )
    for line in summary.lines():
        results.print(line, highlight=False, markup=False, soft_wrap=True)


@app.command()
@with_options
def train(release: Path = RELEASE, *, options: TrainOptions) -> None:
    """Fine-tune a sentence-transformers bi-encoder on the release's hard-negatives rows (MultipleNegativesRankingLoss,
    batches that keep judged positives out of each anchor's negatives), keep the checkpoint with the best dev
    nDCG@10, and measure it once on test."""
    from builder.release.publish.hub_errors import PublishRefused, checked_repo_id
    from builder.training.push import check_before_training, push_model
    from builder.training.recipe import train_and_measure
    from builder.training.report import render_report
    from builder.training.run_settings import train_profile

    existing_release(release)
    out, work, texts, push_to_hub = options.out, options.work, options.texts, options.push_to_hub
    check_folder_arg(out, "--out")
    check_folder_arg(work, "--work")
    if not texts.is_dir():
        fail(f"{texts}: no such folder (write it with `researchy-subq texts`)")
    try:
        if push_to_hub:
            checked_repo_id(push_to_hub, "--push-to-hub")  # before the long work
            check_before_training(out)
    except PublishRefused as e:
        fail(str(e))
    chosen = train_profile(release, options)
    try:
        report = train_and_measure(release, texts, chosen, out, work, model_id=push_to_hub, progress=notice)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    results.print(render_report(report, chosen), highlight=False, markup=False)
    if push_to_hub:
        try:
            url = push_model(out, texts, push_to_hub, report.model_files, say=notice)
        except PublishRefused as e:  # training text found (nothing uploaded), or a Hub error in one line
            fail(str(e))
        results.print(f"pushed {out} -> {url}", highlight=False, markup=False)


guard_commands(app)
