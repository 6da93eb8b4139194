"""`researchy-subq import-labels`: the command over generation/stages/import_labels.py. builder/cli/stages.py
registers it with its own `execute` (progress bar and skipped-shard notice), so no command module imports another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

from builder.cli.reports import stage_report
from builder.cli.shared_options import Sharding
from builder.cli.support import check_folder_arg, check_writable_file, profile_of, shard_of, with_options
from builder.command_options import REQUIRED, option
from generation.errors import InputError
from generation.labels.formats import LabelFormat
from generation.progress import console
from generation.stages.import_labels import ImportLabelsStage


@dataclass(frozen=True, kw_only=True)
class ImportLabelsOptions:
    """What the label files are, the questions they grade, where the shards go, and how they are named and matched."""

    format: LabelFormat = option(
        REQUIRED,
        "--format",
        help='crux-ratings ({"id", "docid", "rating": [...]} '
        "per line), qrels (subq_id 0 docid level), openai-batch (custom_id "
        "qid::docid::i_subquestion)",
    )
    subquestions: Path = option(REQUIRED, "--subquestions", help="folder from `researchy-subq questions`")
    out: Path = option(REQUIRED, "--out", output="folder", help="folder for the judgments shards")
    judge: str = option(
        REQUIRED,
        "--judge",
        help="who or what made the labels, as the card and manifest will "
        "name it, e.g. 'Llama-3.3-70B-Instruct (authors' ratings)'",
    )
    profile: str = option(
        "paper",
        "--profile",
        help="the profile the release states (its scale, answer level and, for openai-batch, its prompt's parser)",
    )
    corpus: Path | None = option(
        None,
        "--corpus",
        help="corpus folder: match document ids against its "
        "ClueWeb22-IDs and URL-hash map (default: keep them as given)",
    )
    rejects: Path | None = option(
        None,
        "--rejects",
        output="file",
        help="set bad lines aside here (with their reason) and go on, instead of stopping at the first",
    )


def import_labels_command(execute: Callable) -> Callable:
    @with_options
    def import_labels(
        files: list[Path] = typer.Argument(
            ...,
            metavar="FILE",
            help="label files: the authors' ratings JSONL, graded qrels, or OpenAI Batch result lines (.gz too)",
        ),
        *,
        options: ImportLabelsOptions,
        sharding: Sharding,
    ) -> None:
        """Import labels made elsewhere into judgment shards whose completion records name the files they came from."""
        out, rejects = options.out, options.rejects
        check_folder_arg(out, "--out")
        check_writable_file(rejects, "--rejects")
        config = profile_of(options.profile)
        stage = ImportLabelsStage(
            config, out, options.subquestions, files, options.format, options.judge, options.corpus, rejects
        )
        try:
            summary = execute(stage, shard_of(sharding.shard, sharding.num_shards))
        except InputError as e:
            if rejects is None and e.line > 0:
                e.message += " (pass --rejects FILE to set bad lines aside and go on)"
            raise
        console.print(stage_report(summary, config, out), highlight=False, markup=False)

    return import_labels
