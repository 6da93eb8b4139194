"""Release commands of `researchy-subq`: build-release, validate, publish."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from generation.cli import app, fail, run_stage
from generation.profiles import ProfileError
from generation.progress import console


@app.command(name="build-release")
def build_release_command(
    judgments: List[Path] = typer.Option(..., "--judgments", help="judgment shard folder (repeatable: train, test)"),
    questions: List[Path] = typer.Option(..., "--questions", help="questions folder (repeatable: train, test)"),
    out: Path = typer.Option(Path("researchy-subq-judgments"), "--out",
                             help="the release folder (= the Hub repository; its name is the dataset's name)"),
    profile: str = typer.Option(..., "--profile", help="the profile the judgments were made with"),
    repo: str = typer.Option("ORG/researchy-subq-judgments", help="Hub repository named in the card"),
    rows_per_file: Optional[int] = typer.Option(None, help="rows per Parquet file (default 5,000,000)"),
    agreement_file: Optional[Path] = typer.Option(None, "--agreement", help="JSON from `agreement --json`: a card section"),
    shards_revision: Optional[str] = typer.Option(None, help="where the judgment shards came from (e.g. ORG/SHARDS@commit), "
                                                  "recorded in manifest.json"),
) -> None:
    """Build the release folder: Parquet by config and split, README card, plot and manifest.json."""
    from builder.package import package_release

    try:
        summary, card = run_stage("building release", "judgments", lambda advance: package_release(
            judgments, questions, out, profile, repo, rows_per_file, progress=advance, agreement=agreement_file,
            shards_revision=shards_revision))
    except ProfileError as e:
        fail(str(e))
    for split, stats in summary.stats.items():
        levels = ", ".join(f"{r['level']}: {r['count']:,}" for r in stats["table1"])
        console.print(f"{split}: {stats['judgments']:,} judgments ({levels})", highlight=False)
    console.print(f"release -> {out} (card {card}, {len(summary.files)} Parquet files)")


def print_report(report) -> None:
    table = Table(title=f"validate {report.release}")
    for column in ("", "check", "failures", "examples"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        mark = "[green]ok[/]" if check.ok else "[bold red]FAIL[/]"
        examples = "\n".join(str(e) for e in check.examples) or check.note
        table.add_row(mark, check.name, f"{check.failures:,}" if check.failures else "", examples)
    console.print(table)


@app.command()
def validate(
    release: Path = typer.Argument(..., help="release folder"),
    expect: Optional[Path] = typer.Option(None, help="YAML bounds: levels: {5: [low, high], ...}, unparsed_max, tolerance"),
    against: Optional[Path] = typer.Option(None, help="a previous release: level shares must stay within tolerance"),
    load: bool = typer.Option(True, help="also load every config with datasets.load_dataset"),
) -> None:
    """Check a release folder; exit status 1 if any check fails."""
    from builder.validate import validate as run_validate

    report = run_validate(release, expect, against, load)
    print_report(report)
    failed = [c for c in report.checks if not c.ok]
    if failed:
        fail(f"{len(failed)} of {len(report.checks)} checks failed: " + "; ".join(c.name for c in failed))
    console.print(f"all {len(report.checks)} checks passed")


@app.command()
def publish(
    release: Path = typer.Argument(...),
    repo: str = typer.Option(..., "--repo", help="ORG/NAME on the Hub"),
    tag: Optional[str] = typer.Option(None, help="tag to create on the commit, e.g. v1.0.0"),
    revision: str = typer.Option("main", help="branch to commit to; created from main when missing"),
    create_pr: bool = typer.Option(False, "--create-pr", help="open a pull request instead of committing"),
    private: bool = typer.Option(False, "--private", help="create the repository private (a new repository only)"),
    yes: bool = typer.Option(False, "--yes", help="really publish (default: a dry run)"),
) -> None:
    """Validate, then push the release in one commit (and tag it). Token: HF_TOKEN or the stored login."""
    from builder.publish import PublishRefused, publish as run_publish

    try:
        run_publish(release, repo, tag, revision, create_pr, yes, say=lambda line: console.print(line, highlight=False),
                    private=private)
    except PublishRefused as e:
        fail(str(e))

