"""`researchy-subq train`: fine-tune a sentence-transformers bi-encoder on a release's `hard-negatives` config with
the texts from the user's own copy, then measure base vs fine-tuned on dev and test.

The trainer is sentence-transformers' own (`SentenceTransformerTrainer`, MultipleNegativesRankingLoss over
(anchor, positive, negative_1..k) rows, sbert.net "Training Overview"); the kit adds only its batch sampler
(builder/training/sampler.py), passed through `SentenceTransformerTrainingArguments.batch_sampler`. Checkpoints go
to OUT/checkpoints and a re-run resumes from the last one (transformers' `resume_from_checkpoint`)."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from builder.analysis.evaluate import judgment_files
from builder.release.layout import present_splits
from builder.training.files import build_lookup, lookup, texts_folder_for, write_training_files
from builder.training.measure import measure_split
from builder.training.sampler import (
    FalseNegativeCount,
    FalseNegativeGuard,
    as_batches,
    count_false_negatives,
    row_documents,
    sequential_batches,
)
from generation.profiles import Profile
from generation.storage import prepare_output_folder

TRAIN_SPLIT = "train"
EVAL_SPLITS = ("dev", "test")


@dataclass
class TrainingRows:
    """The trainer's dataset (texts only: the collator tokenizes every column it is given) and, row for row, the
    ids the sampler needs; rows left out because the user's copy lacks one of their documents."""

    dataset: object  # datasets.Dataset: anchor, positive, negative_1..k
    guard: FalseNegativeGuard
    left_out: int = 0


@dataclass
class TrainingReport:
    rows: int
    left_out: int
    false_negatives: dict[str, FalseNegativeCount]
    seconds: float
    steps: int
    scores: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # split -> model -> metric -> value

    def as_json(self) -> dict:
        return {
            "rows": self.rows,
            "left_out": self.left_out,
            "seconds": round(self.seconds, 1),
            "steps": self.steps,
            "false_negatives": {
                name: {
                    "share": c.share,
                    "false_negatives": c.false_negatives,
                    "negatives": c.negatives,
                    "rows_hit": c.rows_hit,
                    "rows": c.rows,
                    "batches": c.batches,
                }
                for name, c in self.false_negatives.items()
            },
            "scores": self.scores,
        }


def judged_positives(release: Path, split: str, answer_level: int) -> dict[str, frozenset[str]]:
    """subq_id -> every document judged >= answer_level for it (all of them, not only those with a row)."""
    table = ds.dataset(judgment_files(release, split), format="parquet").to_table(
        columns=["subq_id", "docid"], filter=pc.field("level") >= answer_level
    )
    positives: dict[str, set[str]] = {}
    for subq, doc in zip(table["subq_id"].to_pylist(), table["docid"].to_pylist()):
        positives.setdefault(subq, set()).add(doc)
    return {subq: frozenset(docs) for subq, docs in positives.items()}


def training_rows(release: Path, files: Path, answer_level: int) -> TrainingRows:
    """The train split's rows as `researchy-subq training-files` wrote them under `files` (builder/training/files.py:
    the (anchor, positive, negative_1..k) texts and, row for row, their ids), with the sampler's guard."""
    from datasets import Dataset

    texts = files / "sentence-transformers" / f"{TRAIN_SPLIT}.parquet"
    ids = pq.read_table(files / "sentence-transformers-ids" / f"{TRAIN_SPLIT}.parquet")
    guard = row_documents(
        ids["query_id"].to_pylist(),
        [[p, *n] for p, n in zip(ids["positive_id"].to_pylist(), ids["negative_ids"].to_pylist())],
        judged_positives(release, TRAIN_SPLIT, answer_level),
    )
    return TrainingRows(Dataset.from_parquet(str(texts)), guard)


def false_negative_report(rows: TrainingRows, batch_size: int, seed: int) -> dict[str, FalseNegativeCount]:
    """The false negatives of one epoch's batches under file order, sentence-transformers' default (random) and
    NO_DUPLICATES samplers, and the kit's."""
    import torch
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler
    from torch.utils.data import BatchSampler, RandomSampler

    generator = torch.Generator().manual_seed(seed)
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
        "judged positives kept out (ours)": as_batches(
            rows.guard.batch_sampler(
                rows.dataset, batch_size=batch_size, drop_last=False, generator=torch.Generator(), seed=seed
            )
        ),
    }
    return {name: count_false_negatives(batches, rows.guard) for name, batches in orders.items()}


def fine_tune(rows: TrainingRows, profile: Profile, out: Path):
    """sentence-transformers' trainer over the rows with the kit's sampler; the model saved to `out`."""
    import torch
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers.trainer_utils import get_last_checkpoint

    from generation.models import resolve_model

    settings = profile.train
    model = SentenceTransformer(str(resolve_model(settings.model)))
    model.max_seq_length = settings.max_seq_length
    checkpoints = out / "checkpoints"
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
        save_strategy="steps",
        save_steps=200,
        save_total_limit=1,
        logging_steps=10,
        report_to="none",
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=rows.dataset, loss=MultipleNegativesRankingLoss(model)
    )
    last = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    with contextlib.redirect_stdout(sys.stderr):  # the trainer prints its loss lines: progress, not results
        trainer.train(resume_from_checkpoint=last)
    model.save(str(out))
    return model, trainer.state.global_step


def train_and_measure(
    release: Path, texts: Path, profile: Profile, out: Path, progress: Callable[[str], None] = lambda message: None
) -> TrainingReport:
    """training-files under OUT/training-files, their false-negative report, base scores, fine-tuning, fine-tuned
    scores; the report also written to OUT/training_report.json."""
    from sentence_transformers import SentenceTransformer

    from generation.models import resolve_model

    settings, answer_level = profile.train, profile.complexity.answer_level
    prepare_output_folder(out)  # before the long work: no file written through a link, none left by a killed run
    files = out / "training-files"
    progress(f"writing the trainers' files (researchy-subq training-files) -> {files}")
    written = write_training_files(release, texts, files)
    rows = training_rows(release, files, answer_level)
    if not len(rows.dataset):
        raise ValueError(f"{release}: no hard-negatives row of the train split has all its documents' texts in {texts}")
    rows.left_out = written.left_out[TRAIN_SPLIT]
    counts = false_negative_report(rows, settings.batch_size, settings.seed)
    db = build_lookup(texts_folder_for(release, texts), files, whole=False)
    lookup_texts = functools.partial(lookup, db)
    splits = [s for s in EVAL_SPLITS if s in present_splits(release)]
    scores: dict[str, dict[str, dict[str, float]]] = {s: {} for s in splits}
    base = SentenceTransformer(str(resolve_model(settings.model)))
    base.max_seq_length = settings.max_seq_length
    for split in splits:
        progress(f"measuring the base model on {split}")
        scores[split]["base"] = measure_split(base, release, split, lookup_texts, answer_level, settings.depth)
    progress(f"fine-tuning {settings.model} on {len(rows.dataset):,} rows")
    started = time.perf_counter()
    tuned, steps = fine_tune(rows, profile, out)
    seconds = time.perf_counter() - started
    for split in splits:
        progress(f"measuring the fine-tuned model on {split}")
        scores[split]["fine-tuned"] = measure_split(tuned, release, split, lookup_texts, answer_level, settings.depth)
    db.close()
    report = TrainingReport(len(rows.dataset), rows.left_out, counts, seconds, steps, scores)
    (out / "training_report.json").write_text(json.dumps(report.as_json(), indent=1))
    return report
