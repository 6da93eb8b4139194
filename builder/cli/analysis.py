"""Analysis commands of `researchy-subq`: agreement, simulate, evaluate. Arguments are checked before any
work: an empty selection, a budget or alpha outside (0, 1], a cut-off of 0 are usage errors, not numbers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import typer

from builder.cli.pilot import pilot
from builder.cli.reports import JSON_HELP, emit_json
from builder.cli.support import (
    RELEASE,
    check_writable_file,
    existing_release,
    fail,
    guard_commands,
    new_app,
    policy_names,
    positive,
    with_options,
)
from builder.command_options import REQUIRED, option
from generation.bandits.policies import NEEDS_EMBEDDINGS
from generation.progress import console, counter
from generation.progress import results as results_console
from generation.storage.atomic_files import write_text_atomic

app = new_app("Analysis commands: agreement, simulate, evaluate, pilot.")


@dataclass(frozen=True, kw_only=True)
class AgreementOptions:
    """The two label sets, how each maps onto a shared scale, the runs to order, and where the result goes."""

    judgments: Path = option(REQUIRED, "--judgments", help="labels A: judgment shards, a release, or a TREC qrels file")
    against: Path = option(REQUIRED, "--against", help="labels B: the same kinds")
    map_a: str | None = option(None, help="scale mapping for A, e.g. 0:0,1:0,2:1,3:2,4:3,5:3")
    map_b: str | None = option(None, help="scale mapping for B")
    binary_at: int | None = option(None, min=1, help="after mapping, grade >= T counts as relevant (1)")
    runs: Path | None = option(None, help="folder of TREC runs: Kendall tau of the system orderings")
    resamples: int = option(1000, min=0, help="bootstrap resamples for the 95% intervals (0: none)")
    json_out: Path | None = option(
        None, "--json", output="file", help=JSON_HELP + " (`build-release --agreement` reads the file)"
    )


@app.command()
@with_options
def agreement(options: AgreementOptions) -> None:
    """Agreement between two label sets: kappa, weighted kappa, Krippendorff's alpha, correlations, ..."""
    from builder.analysis.agreement import agreement as measure
    from builder.analysis.labels import parse_mapping
    from builder.cli.reports import print_agreement

    judgments, against, runs, json_out = options.judgments, options.against, options.runs, options.json_out
    check_writable_file(json_out, "--json")
    for path in (judgments, against):
        if not path.exists():
            fail(f"{path}: no such file or folder")
    if runs is not None and not runs.is_dir():
        fail(f"{runs}: no such folder (--runs takes a folder of TREC run files)")
    try:
        mappings = parse_mapping(options.map_a), parse_mapping(options.map_b)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--map-a/--map-b") from None
    run_files = sorted(p for p in runs.glob("*") if p.is_file()) if runs else None
    if runs is not None and not run_files:
        fail(f"{runs}: holds no run files")
    result = measure(judgments, against, *mappings, options.binary_at, run_files, options.resamples)
    if result["coverage"]["both"] == 0:
        fail(f"no (query, document) pair is labelled in both {judgments} and {against}: nothing to compare")
    if not emit_json(result, json_out):
        print_agreement(result)


def parse_list(text: str, option: str, kind=str) -> list:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise typer.BadParameter("empty list", param_hint=option)
    try:
        values = [kind(x) for x in items]
    except ValueError:
        raise typer.BadParameter(
            f"expected comma-separated {kind.__name__} values, got {text!r}", param_hint=option
        ) from None
    if len(set(values)) != len(values):
        raise typer.BadParameter(f"a value is listed twice in {text!r}", param_hint=option)
    return values


def parse_budgets(text: str) -> list[float]:
    budgets = parse_list(text, "--budgets", float)
    for b in budgets:
        positive("--budgets", b, upper=1)
    return budgets


def parse_policies(text: str) -> list[str]:
    chosen, known = parse_list(text, "--policies"), policy_names()
    unknown = [p for p in chosen if p not in known]
    if unknown:
        raise typer.BadParameter(
            f"unknown policies {', '.join(unknown)}; known: {', '.join(known)}", param_hint="--policies"
        )
    return chosen


@dataclass(frozen=True, kw_only=True)
class SimulateOptions:
    """The policies and budgets to simulate, how often and on what, and where the results go."""

    policies: str = option(
        ",".join(p for p in policy_names() if p not in NEEDS_EMBEDDINGS),
        help=f"comma-separated, of: {', '.join(policy_names())} (the last three need --index)",
    )
    budgets: str = option(
        "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0", help="comma-separated shares of the pairs, each in (0, 1]"
    )
    repeats: int = option(20, min=1, help="seeded repeats per policy and budget")
    threshold: int = option(4, min=0, max=5, help="relevant = level >= threshold")
    split: str = option("train", help="the release split to simulate on")
    hierarchical: bool = option(False, help="headers as parent arms, bullets as children (section 3.5)")
    index: Path | None = option(None, help="Lucene index: document texts for the diversity policies")
    limit: int | None = option(None, min=1, help="simulate on the first N questions only")
    out: Path | None = option(None, "--out", output="folder", help="folder for simulation.json and simulation.png")
    json_out: Path | None = option(None, "--json", output="file", help=JSON_HELP)


@app.command()
@with_options
def simulate(release: Path = RELEASE, *, options: SimulateOptions) -> None:
    """Offline budgeted judging on a judged release: precision, recall and alpha-nDCG@10 per budget."""
    from builder.analysis.simulate import document_embeddings, load_instances, plot
    from builder.analysis.simulate import simulate as run_simulation
    from builder.cli.reports import print_simulation

    split, repeats, threshold, hierarchical = options.split, options.repeats, options.threshold, options.hierarchical
    out, json_out, index = options.out, options.json_out, options.index
    chosen, shares = parse_policies(options.policies), parse_budgets(options.budgets)
    existing_release(release)
    if out is not None and out.exists() and not out.is_dir():
        fail(f"{out}: is a file; --out takes a folder")
    check_writable_file(json_out, "--json")
    instances = load_instances(release, split, options.limit)
    if not instances:
        fail(f"{release}: no {split} questions with judgments to simulate on")
    embedding = None
    if any(p in NEEDS_EMBEDDINGS for p in chosen):
        if index is None:
            fail(
                f"policies {', '.join(sorted(set(chosen) & NEEDS_EMBEDDINGS))} need --index (document texts for "
                "embeddings)"
            )
        embedding = document_embeddings(index, {d for i in instances for d in i.docs})
    with counter("simulating", total=len(chosen) * repeats, unit="runs") as advance:
        results = run_simulation(
            instances, chosen, shares, repeats, threshold, hierarchical, embedding, progress=advance
        )
    by_policy = {p: {str(b): v for b, v in r.items()} for p, r in results.items()}
    if not emit_json(
        {
            "release": str(release),
            "split": split,
            "questions": len(instances),
            "repeats": repeats,
            "threshold": threshold,
            "hierarchical": hierarchical,
            "policies": by_policy,
        },
        json_out,
    ):
        print_simulation(results, len(instances), repeats, threshold)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "simulation.json", json.dumps(by_policy, indent=1))
        console.print(
            f"-> {out / 'simulation.json'}, {plot(results, out / 'simulation.png')}", highlight=False, markup=False
        )


def parse_metrics(text: str) -> list[str]:
    """alpha-ndcg@K[:ALPHA] or ndcg@K with K >= 1 and ALPHA in (0, 1]; checked here, scored by builder.analysis.evaluate."""
    metrics = parse_list(text, "--metrics")
    for name in metrics:
        metric, _, rest = name.partition("@")
        depth, _, alpha = rest.partition(":")
        if (
            metric not in {"alpha-ndcg", "ndcg"}
            or (metric == "ndcg" and alpha)
            or not depth.isdigit()
            or int(depth) < 1
        ):
            raise typer.BadParameter(
                f"{name!r}: expected alpha-ndcg@K, alpha-ndcg@K:ALPHA or ndcg@K with K >= 1", param_hint="--metrics"
            )
        if alpha:
            try:
                value = float(alpha)
            except ValueError:
                raise typer.BadParameter(f"{name!r}: alpha {alpha!r} is not a number", param_hint="--metrics") from None
            positive("--metrics", value, upper=1)
    return metrics


@dataclass(frozen=True, kw_only=True)
class EvaluateOptions:
    """The run to score, the metrics and their threshold, the questions averaged over, and where the result goes."""

    run: Path = option(REQUIRED, "--run", help="TREC run file whose query ids are question ids")
    metrics: str = option(
        "alpha-ndcg@10,alpha-ndcg@20,ndcg@10",
        help="comma-separated alpha-ndcg@K, alpha-ndcg@K:ALPHA (K >= 1, ALPHA in (0, 1], default 0.5) or ndcg@K",
    )
    threshold: int = option(4, min=0, max=5, help="a sub-question (aspect) is covered at level >= threshold")
    split: str | None = option(None, help="average over this split's questions only (default: all)")
    json_out: Path | None = option(None, "--json", output="file", help=JSON_HELP)


@app.command()
@with_options
def evaluate(release: Path = RELEASE, *, options: EvaluateOptions) -> None:
    """alpha-nDCG (sub-questions as aspects) and nDCG (gain = the document's highest level) of a TREC run,
    averaged over every question of the release (a question missing from the run scores 0)."""
    from builder.analysis.evaluate import evaluate_run
    from builder.analysis.labels import read_trec_run

    run, threshold, split, json_out = options.run, options.threshold, options.split, options.json_out
    names = parse_metrics(options.metrics)
    existing_release(release)
    check_writable_file(json_out, "--json")
    ranking = read_trec_run(run)
    if not ranking:
        fail(f"{run}: holds no ranked documents")
    try:
        results = evaluate_run(ranking, release, names, threshold, split)
    except (ValueError, OSError) as e:
        fail(str(e))
    if emit_json(
        {"release": str(release), "run": str(run), "threshold": threshold, "split": split, **results}, json_out
    ):
        return
    for name, result in results["metrics"].items():
        results_console.print(
            f"{name}: {result['mean']:.4f} over {result['queries']:,} questions ({result['in_run']:,} in the run)",
            highlight=False,
            markup=False,
        )
    if results["ignored_run_queries"]:
        console.print(
            f"{results['ignored_run_queries']:,} run query ids are no question of the release: ignored",
            highlight=False,
            markup=False,
        )


app.command()(pilot)
guard_commands(app)
