"""The retriever commands of `researchy-subq`, from a release to a fine-tuned retriever: texts (the judged documents'
texts from the user's own licensed copy) and training-files (what sentence-transformers, FlagEmbedding, BEIR and
Tevatron read), both written locally, never into a release folder; train (the fine-tuning recipe over them,
builder/training/recipe.py, and its push to the Hub)."""

from __future__ import annotations

from pathlib import Path

import typer

from builder.cli.support import (
    NUM_SHARDS,
    RELEASE,
    SHARD,
    check_folder_arg,
    existing_release,
    fail,
    guard_commands,
    new_app,
    notice,
    output_option,
    run_stage,
    shard_of,
    with_options,
)
from builder.training.options import TrainOptions
from generation.progress import results

app = new_app("Training commands: texts, training-files, train.")


@app.command()
def texts(
    release: Path = RELEASE,
    copy: Path = typer.Option(
        ...,
        "--from",
        help="your licensed copy: a ClueWeb22 folder (holding txt/, or txt/ "
        "itself; the tree ir_datasets' clueweb22 reads), or the kit's corpus Parquet "
        "(`researchy-subq corpus` output)",
    ),
    out: Path = output_option(..., "--out", help="where the texts go: a local folder outside any release"),
    offsets: bool = typer.Option(
        True,
        help="read ClueWeb22 records through their .offset files when present "
        "(--no-offsets: stream each file to its last judged record)",
    ),
    all_retrieved: bool = typer.Option(
        False,
        "--all-retrieved",
        help="also every document of questions.retrieved_unjudged (for training-files with a larger --negatives)",
    ),
    shard: int = SHARD,
    num_shards: int = NUM_SHARDS,
) -> None:
    """Texts of the release's documents from your copy (the judged ones and the hard-negatives rows' unjudged
    negatives): as the judge saw them and whole; lists the documents the copy lacks. Sharded and resumable; refuses
    to write into a release folder."""
    from builder.training.texts import write_texts

    existing_release(release)
    summary = run_stage(
        "texts",
        "docs",
        lambda advance: write_texts(
            release, copy, out, shard_of(shard, num_shards), offsets, progress=advance, all_retrieved=all_retrieved
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


@app.command(name="training-files")
def training_files(
    release: Path = RELEASE,
    texts_folder: Path = typer.Option(..., "--texts", help="the folder `researchy-subq texts` wrote"),
    out: Path = output_option(..., "--out", help="where the trainers' files go: a local folder outside any release"),
    whole: bool = typer.Option(False, "--whole", help="use whole documents (default: as the judge saw them)"),
    negatives: int | None = typer.Option(None, min=1, help="negatives per row, k (default: the release's)"),
    negative_level: int | None = typer.Option(
        None, min=0, help="a judged document at this level or below is a negative (default: the release's)"
    ),
    fill_order: str | None = typer.Option(
        None,
        help="where negatives come from, in order, comma-separated: judged, retrieved_unjudged, other_question "
        "(default: the release's)",
    ),
    formats: list[str] | None = typer.Option(
        None,
        "--format",
        help="write only these (repeatable): sentence-transformers, flagembedding, beir, tevatron (default: all)",
    ),
) -> None:
    """sentence-transformers dataset (+ id sidecar), FlagEmbedding JSONL, BEIR folder and Tevatron corpus from the
    release and your texts; the hard-negatives rows re-derived from its graded lists (the release's own by default,
    or another k, negative level or fill order)."""
    from builder.training.files import write_training_files

    existing_release(release)
    summary = run_stage(
        "training files",
        "rows",
        lambda advance: write_training_files(
            release,
            texts_folder,
            out,
            whole=whole,
            negatives=negatives,
            negative_level=negative_level,
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
