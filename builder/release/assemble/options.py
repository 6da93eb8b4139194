"""What `build-release` builds a release from, in one typed `ReleaseOptions`: each field is one option of
`researchy-subq build-release`, in this order (builder/command_options.py); builder/cli/release.py makes the command's
options from them, and tests, examples and scripts build the same record by keyword. folder.py `build_release` reads
it. A module of its own, light to import: the command's options are made when the CLI starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.command_options import REQUIRED, option
from generation.profiles.profile import Profile


@dataclass(frozen=True, kw_only=True)
class ReleaseOptions:
    """The judgment and question folders (and the runs), the folder it writes, the profile the judgments were made
    under (a name, a YAML path, a Profile, or None: the one their records name), and the command's other options."""

    judgments: list[Path] = option(REQUIRED, "--judgments", help="judgment shard folder (repeatable: train, test)")
    questions: list[Path] = option(REQUIRED, "--questions", help="questions folder (repeatable: train, test)")
    runs: list[Path] | None = option(
        None,
        "--runs",
        help="the retrieve/rerank runs folder (repeatable: train, test): the documents they retrieved that no judgment "
        "covers become questions.retrieved_unjudged and hard-negatives' retrieved_unjudged negatives",
    )
    out: Path = option(
        Path("researchy-subq-judgments"),
        "--out",
        output="folder",
        help="the release folder (= the Hub repository; its name is the dataset's name): new, "
        "empty, or one this command built before",
    )
    profile: str | Path | Profile | None = option(
        REQUIRED, "--profile", parsed_as=str, help="the profile the judgments were made with"
    )
    repo: str = option("ORG/researchy-subq-judgments", help="Hub repository named in the card")
    rows_per_file: int | None = option(None, min=1, help="rows per Parquet file (default 5,000,000)")
    agreement: Path | None = option(None, "--agreement", help="JSON from `agreement --json`: a card section")
    pilot: Path | None = option(
        None, "--pilot", help="the pilot.json of `researchy-subq pilot` whose setting made these labels: a card section"
    )
    shards_revision: str | None = option(
        None, help="where the judgment shards came from (e.g. ORG/SHARDS@commit), recorded in manifest.json"
    )
    leave_out_other_text: bool = option(
        False,
        "--leave-out-other-text",
        help="leave out the authors' ratings "
        "that their clicked-document pass graded on another document's text "
        "(status imported_other_text; import-labels --format crux-ratings "
        "--corpus finds them); counted in the card and manifest",
    )
    allow_failed_pairs: bool = option(
        False,
        "--allow-failed-pairs",
        help="publish the pairs whose requests "
        "failed after the judge's retries (no level; counted in the card) instead "
        "of refusing; a re-run of `judge` retries them",
    )
