"""Release commands of `researchy-subq`: build-release, validate, publish. A release folder is always the
positional RELEASE argument (as in `simulate` and `evaluate`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.cli.support import (
    RELEASE,
    existing_release,
    fail,
    guard_commands,
    new_app,
    notice,
    run_stage,
    with_options,
)
from builder.command_options import REQUIRED, option
from builder.release.assemble.options import ReleaseOptions
from builder.release.validate.expectations import ExpectationError
from generation.progress import results
from generation.storage.atomic_files import MARKER, OwnershipError, claim_folder

app = new_app("Release commands: build-release, validate, publish.")


@app.command(name="build-release")
@with_options
def build_release_command(options: ReleaseOptions) -> None:
    """Build the release folder: Parquet by config and split, README card, plot and manifest.json."""
    from builder.release.assemble.folder import build_release
    from builder.release.layout import MANIFEST

    out = options.out
    try:  # only a folder this command made (its manifest or marker is there) is rebuilt
        claim_folder(out, "release", owned_by=(MANIFEST, MARKER))
    except OwnershipError as e:
        fail(str(e))
    summary, card = run_stage("building release", "judgments", lambda advance: build_release(options, progress=advance))
    for split, stats in summary.stats.items():
        levels = ", ".join(f"{r.level}: {r.count:,}" for r in stats.table1)
        results.print(f"{split}: {stats.judgments:,} judgments ({levels})", highlight=False, markup=False)
    parquet = sum(p.suffix == ".parquet" for p in summary.files)
    results.print(
        f"release -> {out} (card {card}, {parquet} Parquet files, {len(summary.files) - parquet} TREC qrels files)",
        highlight=False,
        markup=False,
    )


@dataclass(frozen=True, kw_only=True)
class ValidateOptions:
    """The bounds a release is held to, the release it is compared with, and whether every config is loaded."""

    expect: Path | None = option(
        None,
        help="YAML bounds: levels: {5: [low, high], ...}, unparsed_max, "
        "tolerance, min_judgments (see expectations/expected_levels.yaml)",
    )
    against: Path | None = option(None, help="a previous release: level shares must stay within tolerance")
    load: bool = option(True, help="also load every config with datasets.load_dataset")


@app.command()
@with_options
def validate(release: Path = RELEASE, *, options: ValidateOptions) -> None:
    """Check a release folder; exit status 1 if any check fails."""
    from builder.cli.reports import print_validation
    from builder.release.validate.expectations import load_expectations
    from builder.release.validate.folder import validate as run_validate

    expect, against = options.expect, options.against
    existing_release(release)
    if against is not None:
        existing_release(against)
    try:
        load_expectations(expect)  # before the long checks: a misspelt key is an error, not a bound switched off
        report = run_validate(release, expect, against, options.load)
    except ExpectationError as e:
        fail(str(e))
    print_validation(report)
    if not report.ok:
        fail(f"{report.summary()}: " + "; ".join(c.name for c in report.checks if not c.ok))
    results.print(report.summary())


@dataclass(frozen=True, kw_only=True)
class PublishOptions:
    """Where the release goes on the Hub (repository, tag, branch, or a pull request), and whether it really goes."""

    repo: str = option(REQUIRED, "--repo", help="ORG/NAME on the Hub")
    tag: str | None = option(None, help="tag to create on the commit, e.g. v1.0.0")
    revision: str = option("main", help="branch to commit to; created from main when missing")
    create_pr: bool = option(False, "--create-pr", help="open a pull request instead of committing")
    private: bool = option(False, "--private", help="create the repository private (a new repository only)")
    yes: bool = option(False, "--yes", help="really publish (default: a dry run)")


@app.command()
@with_options
def publish(release: Path = RELEASE, *, options: PublishOptions) -> None:
    """Validate, then push the release in one commit (and tag it). Token: HF_TOKEN or the stored login. Without
    --yes, a dry run: it lists what would be sent, and works offline (then every file is listed)."""
    from builder.release.publish.to_hub import PublishRefused
    from builder.release.publish.to_hub import publish as run_publish

    existing_release(release)  # then publish checks the repo id before its full validate
    try:
        run_publish(
            release,
            options.repo,
            options.tag,
            options.revision,
            options.create_pr,
            options.yes,
            say=lambda line: results.print(line, highlight=False, markup=False, soft_wrap=True),
            private=options.private,
            notice=notice,
        )
    except PublishRefused as e:
        fail(str(e))


guard_commands(app)
