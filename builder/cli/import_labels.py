"""`researchy-subq import-labels`: the command over generation/stages/import_labels.py. builder/cli/stages.py
registers it with its own `execute` (progress bar and skipped-shard notice), so no command module imports another."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from builder.cli.reports import stage_report
from builder.cli.support import (
    NUM_SHARDS,
    SHARD,
    check_folder_arg,
    check_writable_file,
    output_option,
    profile_of,
    shard_of,
)
from generation.errors import InputError
from generation.labels.formats import LabelFormat
from generation.progress import console
from generation.stages.import_labels import ImportLabelsStage


def import_labels_command(execute: Callable) -> Callable:
    def import_labels(
        files: list[Path] = typer.Argument(
            ...,
            metavar="FILE",
            help="label files: the authors' ratings JSONL, graded qrels, or OpenAI Batch result lines (.gz too)",
        ),
        format: LabelFormat = typer.Option(
            ...,
            "--format",
            help='crux-ratings ({"id", "docid", "rating": [...]} '
            "per line), qrels (subq_id 0 docid level), openai-batch (custom_id "
            "qid::docid::i_subquestion)",
        ),
        subquestions: Path = typer.Option(..., "--subquestions", help="folder from `researchy-subq questions`"),
        out: Path = output_option(..., "--out", help="folder for the judgments shards"),
        judge: str = typer.Option(
            ...,
            "--judge",
            help="who or what made the labels, as the card and manifest will "
            "name it, e.g. 'Llama-3.3-70B-Instruct (authors' ratings)'",
        ),
        profile: str = typer.Option(
            "paper",
            "--profile",
            help="the profile the release states (its scale, answer level and, for openai-batch, its prompt's parser)",
        ),
        corpus: Path | None = typer.Option(
            None,
            "--corpus",
            help="corpus folder: match document ids against its "
            "ClueWeb22-IDs and URL-hash map (default: keep them as given)",
        ),
        rejects: Path | None = output_option(
            None,
            "--rejects",
            output="file",
            help="set bad lines aside here (with their reason) and go on, instead of stopping at the first",
        ),
        shard: int = SHARD,
        num_shards: int = NUM_SHARDS,
    ) -> None:
        """Import labels made elsewhere into judgment shards whose completion records name the files they came from."""
        check_folder_arg(out, "--out")
        check_writable_file(rejects, "--rejects")
        config = profile_of(profile)
        stage = ImportLabelsStage(config, out, subquestions, files, format, judge, corpus, rejects)
        try:
            summary = execute(stage, shard_of(shard, num_shards))
        except InputError as e:
            if rejects is None and e.line > 0:
                e.message += " (pass --rejects FILE to set bad lines aside and go on)"
            raise
        console.print(stage_report(summary, config, out), highlight=False, markup=False)

    return import_labels
