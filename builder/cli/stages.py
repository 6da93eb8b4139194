"""The stage commands of `researchy-subq` (questions ... judge, plan, profiles): thin wrappers over library
functions. `builder.cli.main` puts them beside the release commands; this module never imports `builder`."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table
from rich.text import Text

from builder.cli.support import check_folder_arg, check_writable_file, fail, guard_commands, new_app, positive
from generation.errors import InputError
from generation.profiles import ProfileError, bundled_profiles, load_profile, profile_path
from generation.progress import console, counter
from generation.stages.questions import Decomposition, read_researchy
from generation.shards import Shard, ShardError

app = new_app("Stage commands: questions, corpus, index, retrieve, rerank, pool, judge, plan, profiles.")


@app.command()
def questions(
    input: List[Path] = typer.Option(..., "--input", help="Researchy records: .jsonl, .jsonl.gz or .parquet (repeatable)"),
    out: Path = typer.Option(..., "--out", help="folder for questions.parquet and subquestions.parquet"),
    split: str = typer.Option("train", help="split name stored with each question"),
    decomposition: Decomposition = typer.Option(Decomposition.subquestions, help="which sub-questions to keep"),
    rejects: Optional[Path] = typer.Option(None, help="write malformed records here and go on, instead of stopping"),
) -> None:
    """Read Researchy Questions records into the questions and subquestions tables."""
    for path in input:
        if not path.is_file():
            fail(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    check_writable_file(rejects, "--rejects")
    check_folder_arg(out, "--out")
    try:
        with counter(f"reading {split} questions") as advance:
            summary = read_researchy(input, out, split, decomposition, rejects, progress=advance)
    except InputError as e:
        fail(f"{e}\n(pass --rejects FILE to set malformed records aside and go on)")
    console.print(f"{summary.questions:,} questions, {summary.subquestions:,} sub-questions, "
                  f"{summary.clicked:,} clicked documents -> {out}")
    if rejects is not None:
        console.print(f"{summary.rejected:,} malformed records -> {rejects}")


SHARD = typer.Option(0, "--shard", min=0, help="this worker's shard (0-based); with --num-shards, e.g. a Slurm array rank")
NUM_SHARDS = typer.Option(1, "--num-shards", min=1, help="how many shards the stage is cut into")
PROFILE = typer.Option(..., "--profile", help=f"a bundled profile ({', '.join(bundled_profiles())}) or a YAML "
                                              "file (a .yaml path, or any path with a folder in it)")


def shard_of(index: int, count: int) -> Shard:
    try:
        return Shard(index, count)
    except ShardError as e:
        fail(str(e))


def profile_of(name: str):
    try:
        return load_profile(name)
    except ProfileError as e:
        fail(str(e))


def run_stage(description: str, unit: str, work, total: int | None = None):
    """Runs a stage's library call with a progress bar (errors: see `guard_commands`)."""
    with counter(description, total=total, unit=unit) as advance:
        return work(advance)


def report_skipped(summary) -> None:
    if summary.skipped_shards:
        console.print("shard already complete under this config: skipped (delete its _done record to redo it)")


@app.command()
def corpus(
    input: List[Path] = typer.Option(..., "--input", help="ClueWeb22 txt folders/files (*.json.gz) or JSONL (repeatable)"),
    out: Path = typer.Option(..., "--out", help="folder for the corpus shards and the url-hash map"),
    shard: int = SHARD, num_shards: int = NUM_SHARDS,
    rejects: Optional[Path] = typer.Option(None, help="write each rejected line here, with its reason"),
) -> None:
    """Read ClueWeb22 txt records or JSONL into corpus shards and a URL-hash -> docid map."""
    from generation.stages.corpus import build_corpus, write_url_map

    check_writable_file(rejects, "--rejects")
    check_folder_arg(out, "--out")
    part = shard_of(shard, num_shards)
    summary = run_stage(f"corpus shard {part.label}", "docs",
                        lambda advance: build_corpus(input, out, part, rejects, advance))
    report_skipped(summary)
    rejected = ", ".join(f"{n:,} {reason}" for reason, n in summary.rejected.items()) or "none"
    console.print(f"corpus: {summary.documents:,} documents from {summary.files:,} input files; rejected: {rejected}"
                  f" -> {out}", highlight=False)
    try:
        path, rows = write_url_map(out)
        console.print(f"url-hash map: {rows:,} entries -> {path}")
    except ShardError:
        console.print("url-hash map: waiting for the other corpus shards")


@app.command()
def index(
    corpus: Path = typer.Option(..., "--corpus", help="folder of corpus shards"),
    index: Path = typer.Option(..., "--index", help="where the Lucene index goes"),
    threads: int = typer.Option(2, "--threads", min=1, help="Anserini indexing threads"),
    memory_mb: int = typer.Option(2048, "--memory-mb", min=256, help="Java heap for Anserini, in MB"),
    profile: str = typer.Option("paper", "--profile", help="the profile whose bm25.stemmer the index uses"),
) -> None:
    """Build the Lucene index with Anserini (the profile's bm25.stemmer, raw JSON stored)."""
    from generation.stages.index import build_index

    stemmer = profile_of(profile).bm25.stemmer
    summary = run_stage("exporting corpus to Anserini", "docs", lambda advance: build_index(
        corpus, index, threads, stemmer=stemmer, memory_mb=memory_mb, progress=advance))
    state = "already built" if summary.skipped else "built"
    console.print(f"index: {summary.documents:,} documents {state} -> {summary.path}")


@app.command()
def retrieve(
    profile: str = PROFILE,
    questions: Path = typer.Option(..., "--questions", help="folder from `researchy-subq questions`"),
    index: Path = typer.Option(..., "--index", help="Lucene index from `researchy-subq index`"),
    out: Path = typer.Option(..., "--out", help="runs folder"),
    threads: Optional[int] = typer.Option(None, min=1, help="search threads (default: the profile's)"),
    shard: int = SHARD, num_shards: int = NUM_SHARDS,
) -> None:
    """BM25 top-k per question with Pyserini's batch search; writes runs shards and TREC run files."""
    from generation.stages.retrieve import retrieve as run_bm25

    config, part = profile_of(profile), shard_of(shard, num_shards)
    check_folder_arg(out, "--out")
    summary = run_stage(f"bm25 shard {part.label}", "queries",
                        lambda advance: run_bm25(config, questions, index, out, part, threads, progress=advance))
    report_skipped(summary)
    console.print(f"bm25: {summary.queries:,} queries, {summary.rows:,} hits "
                  f"(k1={config.bm25.k1}, b={config.bm25.b}, depth {config.bm25.depth}) -> {out}", highlight=False)


def warn_stand_in(role: str, model: str, what: str, real: str) -> None:
    console.print(Text(f"{role}: {model} is a STAND-IN ({what}), not {real}", style="yellow"))


@app.command(name="rerank")
def rerank_command(
    profile: str = PROFILE,
    questions: Path = typer.Option(..., "--questions", help="folder from `researchy-subq questions`"),
    runs: Path = typer.Option(..., "--runs", help="runs folder holding the bm25 run"),
    index: Path = typer.Option(..., "--index", help="Lucene index (document text)"),
    out: Path = typer.Option(..., "--out", help="runs folder for the rerank run (may be --runs)"),
    shard: int = SHARD, num_shards: int = NUM_SHARDS,
) -> None:
    """Rerank each question's top BM25 hits with the profile's reranker."""
    from generation.stages.rerank import rerank

    config, part = profile_of(profile), shard_of(shard, num_shards)
    check_folder_arg(out, "--out")
    if config.rerank.backend == "bi-encoder":
        warn_stand_in("reranker", config.rerank.model, "MiniLM bi-encoder cosine", "Qwen3-Reranker")
    summary = run_stage(f"rerank shard {part.label}", "questions",
                        lambda advance: rerank(config, questions, runs, index, out, part, progress=advance))
    report_skipped(summary)
    console.print(f"rerank: {summary.queries:,} questions, {summary.rows:,} documents scored -> {out}")


@app.command()
def pool(
    profile: str = PROFILE,
    questions: Path = typer.Option(..., "--questions", help="folder from `researchy-subq questions`"),
    runs: Path = typer.Option(..., "--runs", help="runs folder holding the bm25 and rerank runs"),
    corpus: Path = typer.Option(..., "--corpus", help="corpus folder (its URL-hash map finds clicked documents)"),
    out: Path = typer.Option(..., "--out", help="folder for the candidate shards"),
    shard: int = SHARD, num_shards: int = NUM_SHARDS,
) -> None:
    """Candidate pool per question by the profile's rule, with provenance; reports missing clicked documents."""
    from generation.stages.pool import build_pool

    config, part = profile_of(profile), shard_of(shard, num_shards)
    check_folder_arg(out, "--out")
    summary = run_stage(f"pool shard {part.label}", "questions",
                        lambda advance: build_pool(config, questions, runs, corpus, out, part, progress=advance))
    report_skipped(summary)
    sources = ", ".join(f"{n:,} {s}" for s, n in summary.by_source.items())
    console.print(f"pool ({config.pool.rule}): {summary.candidates:,} candidates for {summary.questions:,} questions "
                  f"({sources}); clicked documents missing from the corpus: {summary.clicked_missing:,} of "
                  f"{summary.clicked_total:,} -> {out}", highlight=False)


def policy_names() -> list[str]:
    from generation.bandits.policies import POLICIES

    return list(POLICIES)


Policy = Enum("Policy", {name: name for name in policy_names()}, type=str)  # so -h lists the choices


@app.command()
def judge(
    profile: str = PROFILE,
    subquestions: Path = typer.Option(..., "--subquestions", help="folder from `researchy-subq questions`"),
    candidates: Path = typer.Option(..., "--candidates", help="folder of candidate pool shards"),
    index: Path = typer.Option(..., "--index", help="Lucene index (document text)"),
    out: Path = typer.Option(..., "--out", help="folder for the judgment shards"),
    shard: int = SHARD, num_shards: int = NUM_SHARDS,
    budget: Optional[float] = typer.Option(None, help="judge only this share (0, 1] of the pairs, chosen by --policy"),
    policy: Policy = typer.Option("topk-bernoulli", help="bandit policy for --budget (see `simulate`)"),
) -> None:
    """Grade every (sub-question x candidate) pair, or a budget of them chosen by a bandit; resumable."""
    from generation.stages.judge import run_judge

    config, part = profile_of(profile), shard_of(shard, num_shards)
    check_folder_arg(out, "--out")
    if budget is not None:
        positive("--budget", budget, upper=1)
        return judge_on_budget(config, subquestions, candidates, index, out, part, budget, policy.value)
    if config.judge.backend == "bi-encoder":
        warn_stand_in("judge", config.judge.model, "MiniLM bi-encoder cosine cut into levels",
                      "the paper's Llama-3.3-70B judge")
    summary = run_stage(f"judge shard {part.label}", "pairs",
                        lambda advance: run_judge(config, subquestions, candidates, index, out, part, progress=advance))
    report_skipped(summary)
    if summary.chunks_done_before:
        console.print(f"resumed: {summary.chunks_done_before} chunks were already judged")
    levels = ", ".join(f"{level}: {summary.levels[level]:,}" for level in sorted(summary.levels, reverse=True))
    console.print(f"judge [{summary.judge}]: {summary.pairs:,} pairs ({summary.judged_now:,} judged now); "
                  f"levels {levels or '-'}; unparsed (Other): {summary.unparsed:,}"
                  + (f" ({statuses})" if (statuses := ", ".join(
                      f"{k} {v:,}" for k, v in sorted(summary.statuses.items()) if k != "ok")) else "")
                  + (f"; non-verbatim extracts: {summary.not_verbatim:,}" if config.judge.prompt == "r3a" else "")
                  + f"; contexts cut by tokens: {summary.cut_by_tokens:,} -> {out}", highlight=False, markup=False)


def judge_on_budget(config, subquestions, candidates, index, out, part, budget, policy) -> None:
    from generation.stages.budgeted import run_budgeted_judge

    try:
        summary = run_stage(f"budgeted judge shard {part.label}", "pairs", lambda advance: run_budgeted_judge(
            config, subquestions, candidates, index, out, budget, policy, part, progress=advance))
    except ValueError as e:
        fail(str(e))
    report_skipped(summary)
    share = summary.judged / summary.full_pairs if summary.full_pairs else 0
    console.print(f"budgeted judge ({policy}, budget {budget:.0%}): judged {summary.judged:,} of {summary.full_pairs:,} "
                  f"pairs ({share:.1%} of what full judging would cost; {summary.judged_now:,} now) for "
                  f"{summary.questions:,} questions; found {summary.relevant:,} relevant pairs (level >= "
                  f"{config.bandit.relevant_level}) over {summary.relevant_documents:,} documents -> {out}",
                  highlight=False, markup=False)


@app.command()
def plan(
    profile: str = PROFILE,
    subquestions: Path = typer.Option(..., "--subquestions", help="folder from `researchy-subq questions`"),
    candidates: Path = typer.Option(..., "--candidates", help="folder of candidate pool shards"),
    index: Path = typer.Option(..., "--index", help="Lucene index (document text)"),
    sample: int = typer.Option(200, min=1, help="pairs whose prompts are tokenized"),
    tokenizer: Optional[str] = typer.Option(None, help="tokenizer to measure with (default: the judge model's)"),
    utilisation: Optional[float] = typer.Option(None, help="share of peak, in (0, 1], for every row instead of the "
                                                "calibration's measured figures"),
    calibration: Optional[Path] = typer.Option(None, help="scripts/bench_gpu.py's calibration file (default: the "
                                               "bundled H100 reference of issue 23)"),
    rerank_tokens: float = typer.Option(2800, min=1, help="reranker tokens per document assumed for the rerank rows"),
    tokens_per_word: Optional[float] = typer.Option(None, help="judge tokens per word of web text assumed for the "
                                                    "paper-scale row (default: 2900/2048, issue 15's figure)"),
) -> None:
    """Count pairs, measure prompt tokens and print the FLOPs and GPU-hours of judging them and of reranking."""
    from generation.judging.calibration import CalibrationError
    from generation.judging.costing import costing_for, plan_table
    from generation.judging.plan import LLAMA3_TOKENS_PER_WORD, measure

    positive("--utilisation", utilisation, upper=1)
    config = profile_of(profile)
    try:
        costing, stand_ins = costing_for(config, calibration, utilisation)
    except CalibrationError as e:
        fail(str(e))
    result = run_stage("measuring prompts", "pairs", lambda advance: measure(
        config, subquestions, candidates, index, sample, tokenizer, tokens_per_word=tokens_per_word or LLAMA3_TOKENS_PER_WORD))
    table, costing_notes = plan_table(result, costing, config.rerank.depth, rerank_tokens)
    for line in result.notes() + stand_ins + costing_notes:
        console.print(line, highlight=False, markup=False)
    console.print(table)


@app.command()
def profiles(name: Optional[str] = typer.Argument(None, help="a bundled profile name or a YAML path")) -> None:
    """List the bundled profiles, or validate and print one."""
    if name is None:
        for bundled in bundled_profiles():
            console.print(f"{bundled:10} {load_profile(bundled).description}", highlight=False, markup=False)
        return
    profile = profile_of(name)
    console.print(f"# {profile_path(name)} (config hash {profile.config_hash()})", highlight=False, markup=False)
    console.print(profile_path(name).read_text(), highlight=False, markup=False)


guard_commands(app)

if __name__ == "__main__":  # `python -m builder.cli.stages` runs the stage commands alone
    app()
