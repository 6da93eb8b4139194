"""`researchy-subq train`: fine-tune a sentence-transformers bi-encoder on a release's `hard-negatives` config with
the texts from the user's own copy, choose the model on dev, measure it once on test.

The trainer is sentence-transformers' own (`SentenceTransformerTrainer`, MultipleNegativesRankingLoss over
(anchor, positive, negative_1..k) rows, sbert.net "Training Overview"); the kit adds its batch sampler
(builder/training/sampler.py, through `SentenceTransformerTrainingArguments.batch_sampler`) and its graded dev
evaluator (builder/training/evaluator.py): the trainer evaluates dev `train.evaluations` times, saves a checkpoint
each time, and loads the best by dev nDCG@10 at the end (transformers' `load_best_model_at_end` with
`metric_for_best_model`). The model folder holds the model and its card only; the training files and checkpoints
go to a work folder beside it (a re-run resumes from its last checkpoint)."""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.layout import config, present_splits
from builder.release.no_text import refuse_release_target
from builder.training.evaluator import KEYS, PRIMARY, GradedRetrievalEvaluator, metric_for_best_model
from builder.training.files import build_lookup, lookup, texts_folder_for, write_training_files
from builder.training.measure import METRICS, RankingSet, measure_splits
from builder.training.model_card import (
    add_section,
    card_data,
    comparison,
    provenance,
    usage_from_folder,
    without_training_text,
)
from builder.training.sampler import (
    FalseNegativeGuard,
    InBatchCount,
    as_batches,
    build_guard,
    count_in_batch,
    sequential_batches,
)
from builder.training.texts import release_context_words, text_files
from generation.errors import ArgumentError
from generation.profiles.profile import Profile
from generation.storage.atomic_files import files_under, prepare_output_folder, replace_file, write_text_atomic

if TYPE_CHECKING:
    from datasets import Dataset

TRAIN_SPLIT, DEV_SPLIT, TEST_SPLIT = "train", "dev", "test"
REPORT = "training_report.json"


@dataclass
class TrainingRows:
    """The trainer's dataset (texts only: the collator tokenizes every column it is given) and, row for row, the
    ids the sampler needs; rows left out because the user's copy lacks one of their documents."""

    dataset: Dataset  # anchor, positive, negative_1..k
    guard: FalseNegativeGuard
    left_out: int = 0


@dataclass
class TrainingReport:
    base_model: str
    ranking: str  # RankingSet.kind
    rows: int
    left_out: int
    in_batch: dict[str, InBatchCount]
    seconds: float
    steps: int
    dev: dict = field(default_factory=dict)  # base, checkpoints (step -> metrics), chosen (its step and metrics)
    test: dict = field(default_factory=dict)  # base (for reference) and chosen, measured once after the choice
    model_files: list[str] = field(default_factory=list)  # what train wrote into OUT: all `--push-to-hub` sends

    def as_json(self) -> dict:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 1)
        out["in_batch"] = {
            name: {**asdict(c), "rows_per_batch": round(c.rows_per_batch, 2)} for name, c in self.in_batch.items()
        }
        return out


def work_folder(out: Path, work: Path | None) -> Path:
    """Where the training files and checkpoints go: `work`, or OUT-work beside the model folder; never inside it."""
    work = Path(work) if work is not None else out.with_name(f"{out.name}-work")
    if work.resolve() == out.resolve() or out.resolve() in work.resolve().parents:
        raise ArgumentError(f"--work {work} is inside the model folder {out}: texts and checkpoints stay out of it")
    return work


def training_rows(release: Path, files: Path, profile: Profile) -> TrainingRows:
    """The train split's rows as `researchy-subq training-files` wrote them under `files` (builder/training/files.py:
    the (anchor, positive, negative_1..k) texts and, row for row, their ids), with the sampler's guard: each anchor's
    judged documents from the release's `graded-lists`."""
    from datasets import Dataset

    release, files = Path(release), Path(files)
    texts = files / "sentence-transformers" / f"{TRAIN_SPLIT}.parquet"
    ids = pq.read_table(files / "sentence-transformers-ids" / f"{TRAIN_SPLIT}.parquet")
    graded = pq.read_table(config("graded-lists").files(release, TRAIN_SPLIT), columns=["query_id", "docids", "labels"])
    guard = build_guard(
        ids,
        graded,
        profile.complexity.answer_level,
        profile.training.negative_level,
        between_out=profile.train.between_out,
    )
    return TrainingRows(Dataset.from_parquet(str(texts)), guard)


def batchings(rows: TrainingRows, batch_size: int, seed: int) -> dict[str, list[list[int]]]:
    """One epoch's batches under file order, sentence-transformers' default (random) and NO_DUPLICATES samplers,
    and the kit's (with drop_last False, the trainer's default, and True)."""
    import torch
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler
    from torch.utils.data import BatchSampler, RandomSampler

    generator = torch.Generator().manual_seed(seed)

    def ours(drop_last: bool):
        return rows.guard.batch_sampler(
            rows.dataset, batch_size=batch_size, drop_last=drop_last, generator=torch.Generator(), seed=seed
        )

    orders = {
        "file order": sequential_batches(len(rows.guard), batch_size),
        "random (BATCH_SAMPLER)": as_batches(
            BatchSampler(RandomSampler(rows.dataset, generator=generator), batch_size, drop_last=False)
        ),
        "NO_DUPLICATES": as_batches(
            NoDuplicatesBatchSampler(
                rows.dataset, batch_size=batch_size, drop_last=False, generator=torch.Generator(), seed=seed
            )
        ),
        "question apart (ours)": as_batches(ours(False)),
    }
    try:
        orders["question apart (ours), drop_last"] = as_batches(ours(True))
    except ValueError:  # no batch fills: every row left out
        orders["question apart (ours), drop_last"] = []
    return orders


def in_batch_report(rows: TrainingRows, batch_size: int, seed: int) -> dict[str, InBatchCount]:
    return {name: count_in_batch(batches, rows.guard) for name, batches in batchings(rows, batch_size, seed).items()}


def fine_tune(rows: TrainingRows, profile: Profile, model, evaluator, checkpoints: Path):
    """sentence-transformers' trainer over the rows with the kit's sampler, evaluating dev (when there is one) and
    loading the best checkpoint at the end; the trainer once done."""
    import torch
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers.trainer_utils import get_last_checkpoint

    settings = profile.train
    every = 1 / settings.evaluations if settings.evaluations > 1 else 1.0  # a share of the steps (transformers)
    choosing = evaluator is not None
    args = SentenceTransformerTrainingArguments(
        output_dir=str(checkpoints),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps or -1,
        per_device_train_batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_ratio,
        seed=settings.seed,
        data_seed=settings.seed,
        batch_sampler=rows.guard.batch_sampler,
        eval_strategy="steps" if choosing else "no",
        eval_steps=every if choosing else None,
        save_strategy="steps",
        save_steps=every if choosing else 200,
        save_total_limit=1,  # with load_best_model_at_end transformers keeps the best one too
        load_best_model_at_end=choosing,
        metric_for_best_model=metric_for_best_model(evaluator) if choosing else None,
        greater_is_better=True,
        logging_steps=10,
        report_to="none",
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=rows.dataset,
        loss=MultipleNegativesRankingLoss(model),
        evaluator=evaluator,
    )
    without_training_text(model.model_card_data)  # what the trainer's init took from the rows
    last = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    with contextlib.redirect_stdout(sys.stderr):  # the trainer prints its loss lines: progress, not results
        trainer.train(resume_from_checkpoint=last)
    return trainer


def dev_history(trainer, evaluator) -> tuple[list[dict], dict]:
    """Each dev evaluation of the run (step and METRICS, from the trainer's log) and the chosen one."""
    prefix = f"eval_{evaluator.name}_"
    history = [
        {"step": entry["step"], **{m: entry[prefix + KEYS[m]] for m in METRICS}}
        for entry in trainer.state.log_history
        if prefix + KEYS[METRICS[0]] in entry
    ]
    checkpoint = trainer.state.best_model_checkpoint
    step = int(checkpoint.rsplit("-", 1)[1]) if checkpoint else history[-1]["step"]
    return history, next(h for h in reversed(history) if h["step"] == step)


def negatives_by_source(ids: Path) -> dict[str, int]:
    """The trained rows' negatives counted by source (the id sidecar's `negative_sources`), largest first."""
    sources = pq.read_table(ids, columns=["negative_sources"])["negative_sources"]
    counts = {s["values"]: s["counts"] for s in pc.value_counts(pc.list_flatten(sources)).to_pylist()}
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def card_training_logs(log_history: list[dict], evaluator) -> list[dict]:
    """The card's training-log table (sentence-transformers' `training_logs` rows) from the trainer's whole log:
    its callbacks keep only this process's rows, so a resumed run would lose those before the checkpoint it resumed
    from, the chosen one among them."""
    primary = f"{evaluator.name}_{PRIMARY}"
    rows: dict[int, dict] = {}
    for entry in log_history:
        if "loss" not in entry and f"eval_{primary}" not in entry:
            continue
        row = rows.setdefault(entry["step"], {"Epoch": entry.get("epoch"), "Step": entry["step"]})
        if "loss" in entry:
            row["Training Loss"] = entry["loss"]
        if f"eval_{primary}" in entry:
            row[primary] = entry[f"eval_{primary}"]
    return [rows[step] for step in sorted(rows)]


def train_and_measure(
    release: Path,
    texts: Path,
    profile: Profile,
    out: Path,
    work: Path | None = None,
    model_id: str | None = None,
    progress: Callable[[str], None] = lambda message: None,
) -> TrainingReport:
    """training-files and checkpoints under the work folder; the false-negative report; base on dev and test;
    fine-tuning with dev evaluations; the chosen model measured on test once, saved with its card to OUT, with
    OUT/training_report.json."""
    from sentence_transformers import SentenceTransformer

    from generation.profiles.model_paths import resolve_model

    out = Path(out)
    settings, answer_level = profile.train, profile.complexity.answer_level
    work = work_folder(out, work)
    for folder in (out, work):
        refuse_release_target(folder, release, "--out" if folder == out else "--work")
        prepare_output_folder(folder)  # before the long work: no write through a link, none left by a killed run
    files = work / "training-files"
    progress(f"writing the trainers' files (researchy-subq training-files) -> {files}")
    written = write_training_files(release, texts, files)
    rows = training_rows(release, files, profile)
    if not len(rows.dataset):
        raise ValueError(f"{release}: no hard-negatives row of the train split has all its documents' texts in {texts}")
    rows.left_out = written.left_out[TRAIN_SPLIT]
    counts = in_batch_report(rows, settings.batch_size, settings.seed)
    db = build_lookup(texts_folder_for(release, texts), files, whole=False)
    ranking = RankingSet(settings.ranking, text_files(texts), functools.partial(lookup, db))
    splits = [s for s in (DEV_SPLIT, TEST_SPLIT) if s in present_splits(release)]
    base_path = resolve_model(settings.model)
    _, manifest = release_context_words(release)

    def load(path):
        model = SentenceTransformer(str(path), model_card_data=card_data(manifest, settings.model, base_path))
        model.max_seq_length = settings.max_seq_length
        return model

    progress(f"measuring the base model on {', '.join(splits)} (ranking: {settings.ranking})")
    base = measure_splits(load(base_path), release, splits, ranking, answer_level, settings.depth)
    dev = (
        GradedRetrievalEvaluator(release, DEV_SPLIT, ranking, answer_level, settings.depth)
        if DEV_SPLIT in splits
        else None
    )
    model = load(base_path)
    if model_id:
        model.model_card_data.set_model_id(model_id)
    progress(f"fine-tuning {settings.model} on {len(rows.dataset):,} rows")
    started = time.perf_counter()
    trainer = fine_tune(rows, profile, model, dev, work / "checkpoints")
    if dev is not None:
        model.model_card_data.training_logs = card_training_logs(trainer.state.log_history, dev)
    seconds = time.perf_counter() - started
    report = TrainingReport(
        settings.model, settings.ranking, len(rows.dataset), rows.left_out, counts, seconds, trainer.state.global_step
    )
    chosen = "no dev split: the model of the last step"
    if dev is not None:
        history, best = dev_history(trainer, dev)
        report.dev = {"base": base[DEV_SPLIT], "checkpoints": history, "chosen": best}
        model.model_card_data.eval_results_dict[dev] = dev.prefix_name_to_metrics(
            {KEYS[m]: best[m] for m in METRICS}, dev.name
        )
        chosen = f"step {best['step']:,} of {report.steps:,}, the best dev nDCG@10 of {len(history)} evaluations"
    if TEST_SPLIT in splits:
        progress("measuring the chosen model on test, once")
        test = GradedRetrievalEvaluator(release, TEST_SPLIT, ranking, answer_level, settings.depth)
        test(model)
        report.test = {"base": base[TEST_SPLIT], "chosen": test.last}
    db.close()
    staged = work / "model"  # saved whole here first, so the model's own files are known by name
    if staged.exists():
        shutil.rmtree(staged)
    model.save(str(staged))
    by_source = negatives_by_source(files / "sentence-transformers-ids" / f"{TRAIN_SPLIT}.parquet")
    card = provenance(manifest, profile, settings.model, base_path, chosen, len(rows.dataset), by_source)
    add_section(staged / "README.md", card + "\n" + comparison(report, settings.model))
    if not model_id:
        usage_from_folder(staged / "README.md", out)
    report.model_files = sorted({*files_under(staged), REPORT})
    write_text_atomic(staged / REPORT, json.dumps(report.as_json(), indent=1) + "\n")
    for name in report.model_files:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        replace_file(out, name, functools.partial(shutil.copyfile, staged / name))
    return report
