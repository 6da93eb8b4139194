"""`validate`'s checks of the level shares: the unparsed ('Other') share of the judge's answers under its bound (failed
pairs, requests without an answer, counted apart), and each split's per-level
shares within the bounds of `--expect` (expectations/) or within a tolerance of a previous release's (`--against`);
a split under `min_judgments` is not held to the bounds."""

from __future__ import annotations

from pathlib import Path

from builder.release.contract import Manifest, ManifestError, SplitStats, read_manifest
from builder.release.validate.expectations import load_expectations

DEFAULT_UNPARSED_MAX = 0.01
DEFAULT_TOLERANCE = 0.02
FAILED = "request_failed"  # a request without an answer: generation/storage/schema.py JUDGMENT_STATUSES


def previous_shares(release: Path, check) -> dict[str, dict[str, float]]:
    """split -> level -> share stated by a previous release's manifest; what it lacks is a report line."""
    try:
        previous = read_manifest(release)
    except ManifestError as e:
        check.fail(f"--against {release}: {e}")
        return {}
    return {split: s.level_share for split, s in previous.stats.items()}


def check_failed_pairs(stats: dict[str, SplitStats], manifest: Manifest, report) -> dict[str, int]:
    """split -> its rows of status request_failed: requests that got no answer (the judge's failed pairs, published
    with `build-release --allow-failed-pairs`, or an import's failed requests). A release the kit judged counts them
    in manifest.json (`failed_pairs`), and the data must hold exactly that many."""
    failed = {split: s.counts["status"].get(FAILED, 0) for split, s in stats.items()}
    check = report.check(
        "failed pairs (status request_failed) counted apart from the judge's answers, as manifest.json counts them"
    )
    total, stated = sum(failed.values()), manifest.failed_pairs or 0
    if not manifest.imported and total != stated:
        check.fail(f"{total:,} rows with status {FAILED}, but manifest.json counts {stated:,} failed pairs")
    elif total:
        check.note = (
            f"{total:,} failed pairs (status {FAILED}, published with --allow-failed-pairs): "
            + ", ".join(f"{split} {n:,}" for split, n in failed.items() if n)
            + "; not answers, so not in the unparsed share"
        )
    return failed


def check_shares(
    stats: dict[str, SplitStats], expect: Path | None, against: Path | None, report, manifest: Manifest
) -> None:
    bounds = load_expectations(expect)  # strict: raises ExpectationError on a misspelt key
    failed = check_failed_pairs(stats, manifest, report)
    unparsed = report.check("unparsed ('Other') share under its bound")
    limit = float(bounds.get("unparsed_max", DEFAULT_UNPARSED_MAX))
    for split, s in stats.items():
        other = next(row.count for row in s.table1 if row.level == "Other")
        answers = s.judgments - failed[split]
        share = (other - failed[split]) / answers if answers else 0.0
        if share > limit:
            unparsed.fail(
                f"{split}: {share:.4%} > {limit:.4%} of the judge's answers"
                + (f" ({failed[split]:,} failed pairs counted apart)" if failed[split] else "")
            )
    shares = report.check("per-level shares within the expected bounds or the previous release")
    tolerance = float(bounds.get("tolerance", DEFAULT_TOLERANCE))
    reference = {}
    if against:
        previous = previous_shares(Path(against), shares)
        reference = {
            split: {lv: (v - tolerance, v + tolerance) for lv, v in s.items()} for split, s in previous.items()
        }
        for split in sorted(set(stats) - set(previous)) if not bounds.get("levels") else ():
            shares.fail(
                f"{split}: --against {against} has no {split} split (or no level shares for it): nothing to "
                "compare this split's shares with; give --expect bounds for it"
            )
    too_small = [
        f"{split} ({s.judgments:,} judgments)"
        for split, s in stats.items()
        if s.judgments < bounds.get("min_judgments", 0)
    ]
    for split, s in stats.items():
        if s.judgments < bounds.get("min_judgments", 0):
            continue
        wanted = dict(bounds.get("levels") or {}) or reference.get(split, {})
        for level, (low, high) in wanted.items():
            share = s.level_share.get(str(level), 0.0)
            if not low <= share <= high:
                shares.fail(f"{split}: level {level} share {share:.2%} outside [{low:.2%}, {high:.2%}]")
    if not bounds.get("levels") and not against:
        shares.skip("no bounds given (--expect or --against)")
    elif too_small:
        under = f"under min_judgments {bounds['min_judgments']:,}: {', '.join(too_small)}"
        if len(too_small) == len(stats):
            shares.skip(f"every split is {under}")
        else:
            shares.note = f"not held to the bounds, {under}"
