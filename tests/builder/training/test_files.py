"""`researchy-subq training-files`: each file read by its own reader where it is installed here
(`datasets`, sentence-transformers' trainer with the MiniLM the kit ships), else checked against its reader's source
(BEIR's GenericDataLoader: beir/datasets/data_loader.py; Tevatron: src/tevatron/retriever/dataset.py;
FlagEmbedding: examples/finetune/embedder/README.md "Data format")."""

import csv
import json
import shutil

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from builder.release.layout import config
from builder.release.validate.folder import validate
from builder.training.files import write_training_files
from builder.training.texts import judged_docids, write_texts
from generation.errors import ArgumentError
from generation.profiles.model_paths import MINILM, resolve_model
from generation.profiles.profile import load_profile
from generation.storage.schema import conform
from tests.builder.training.test_texts import SYNTHETIC_RELEASE, copy  # noqa: F401 - test_texts's release (conftest.py builds it) and ClueWeb22 copy
from tests.helpers import assert_one_line_error, cli_one_line

PAPER = load_profile("paper")


@pytest.fixture(scope="module")
def files(tmp_path_factory, release, copy):  # noqa: F811
    root = tmp_path_factory.mktemp("training")
    write_texts(release, copy["root"], root / "texts")
    summary = write_training_files(release, root / "texts", root / "out")
    return {"out": root / "out", "summary": summary, "texts": root / "texts"}


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def hard_negative_rows(release, split):
    return [r for p in config("hard-negatives").files(release, split) for r in pq.read_table(p).to_pylist()]


def test_sentence_transformers_dataset_and_its_id_sidecar(release, copy, files):  # noqa: F811
    out, k = files["out"], PAPER.training.negatives
    texts = {
        r["docid"]: r["text"] for p in files["texts"].glob("texts-*.parquet") for r in pq.read_table(p).to_pylist()
    }
    for split in ("train", "test"):
        loaded = datasets.load_dataset(
            "parquet", data_files=str(out / "sentence-transformers" / f"{split}.parquet"), split="train"
        )
        assert loaded.column_names == ["anchor", "positive", *(f"negative_{i}" for i in range(1, k + 1))]
        ids = pq.read_table(out / "sentence-transformers-ids" / f"{split}.parquet").to_pylist()
        assert len(ids) == len(loaded) == files["summary"].rows[split] > 0
        for row, id_row in zip(loaded, ids):
            assert row["positive"] == texts[id_row["positive_id"]]
            assert [row[f"negative_{i}"] for i in range(1, k + 1)] == [texts[d] for d in id_row["negative_ids"]]
        missing = copy["short"] | copy["empty"]
        expected = [
            r
            for r in hard_negative_rows(release, split)
            if not missing & {*r["positive_document_ids"], *r["negative_document_ids"]}
        ]
        assert [
            (r["query_id"], r["qid"], r["positive_document_ids"][0], r["negative_document_ids"]) for r in expected
        ] == [(r["query_id"], r["qid"], r["positive_id"], r["negative_ids"]) for r in ids]
        assert files["summary"].left_out[split] == len(hard_negative_rows(release, split)) - len(expected)


@pytest.mark.slow
def test_sentence_transformer_trainer_takes_the_dataset_as_it_is(files, tmp_path):
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    train = datasets.Dataset.from_parquet(str(files["out"] / "sentence-transformers" / "train.parquet")).select(
        range(8)
    )
    model = SentenceTransformer(str(resolve_model(MINILM)), device="cpu")
    model.max_seq_length = 32
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "model"),
        max_steps=1,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=train, loss=MultipleNegativesRankingLoss(model)
    )
    assert trainer.train().global_step == 1


def test_flagembedding_lines_carry_levels_as_scores(release, files):
    rows = jsonl(files["out"] / "flagembedding" / "train.jsonl")
    assert rows and all(set(r) == {"query", "pos", "neg", "pos_scores", "neg_scores"} for r in rows)
    for r in rows:
        assert len(r["pos"]) == len(r["pos_scores"]) == 1 and len(r["neg"]) == len(r["neg_scores"]) == 3
        assert r["pos_scores"][0] >= PAPER.complexity.answer_level
        assert max(r["neg_scores"]) <= PAPER.training.negative_level


def test_beir_folder_as_generic_data_loader_reads_it(release, copy, files):  # noqa: F811
    beir = files["out"] / "beir"
    corpus = {r["_id"]: r for r in jsonl(beir / "corpus.jsonl")}  # GenericDataLoader._load_corpus: _id, title, text
    assert set(corpus) == set(copy["docids"]) - copy["short"] - copy["empty"]
    assert all(set(r) == {"_id", "title", "text"} for r in corpus.values())
    queries = {r["_id"]: r["text"] for r in jsonl(beir / "queries.jsonl")}
    for split in ("train", "test"):
        with open(beir / "qrels" / f"{split}.tsv") as f:  # _load_qrels: csv over tabs, header skipped, int score
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
            assert next(reader) == ["query-id", "corpus-id", "score"]
            qrels = [(q, d, int(s)) for q, d, s in reader]
        release_qrels = [
            tuple(r.values()) for p in config("qrels").files(release, split) for r in pq.read_table(p).to_pylist()
        ]
        assert qrels == release_qrels and {q for q, _, _ in qrels} <= set(queries)


def test_tevatron_corpus_holds_every_document_its_rows_name(files):
    corpus = {r["docid"] for r in jsonl(files["out"] / "tevatron" / "corpus.jsonl")}
    rows = jsonl(files["out"] / "tevatron" / "train.jsonl")
    assert rows and all({*r["positive_document_ids"], *r["negative_document_ids"]} <= corpus for r in rows)
    assert set(rows[0]) >= {"query_id", "query_text", "positive_document_ids", "negative_document_ids", "qid"}


def test_refused_inside_a_release_and_validate_fails_a_release_holding_them(release, files, tmp_path):
    with pytest.raises(ArgumentError, match="inside the release folder"):
        write_training_files(release, files["texts"], release / "training")
    broken = tmp_path / "researchy-subq-judgments"
    shutil.copytree(release, broken)
    shutil.copytree(files["out"] / "flagembedding", broken / "flagembedding")
    shutil.copytree(files["out"] / "sentence-transformers", broken / "st")
    failed = {c.name: c.examples for c in validate(broken, load=False).checks if not c.ok}
    assert len(failed) == 1 and sorted(line.split(":")[0] for line in next(iter(failed.values()))) == [
        "flagembedding/test.jsonl",
        "flagembedding/train.jsonl",
        "st/test.parquet",
        "st/train.parquet",
    ]


def test_cli_training_files(release, files, tmp_path):
    from builder.cli.main import app

    result = CliRunner().invoke(
        app,
        [
            "training-files",
            str(release),
            "--texts",
            str(files["texts"]),
            "--out",
            str(tmp_path / "t"),
            "--negatives",
            "2",
            "--format",
            "sentence-transformers",
            "--format",
            "beir",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "2 negatives a row" in result.stdout
    assert sorted(p.name for p in (tmp_path / "t").iterdir() if not p.name.startswith(("_", "."))) == [
        "beir",
        "sentence-transformers",
        "sentence-transformers-ids",
    ]
    assert pq.read_schema(tmp_path / "t" / "sentence-transformers" / "train.parquet").names[-1] == "negative_2"
    wrong = CliRunner().invoke(
        app, ["training-files", str(release), "--texts", str(tmp_path), "--out", str(tmp_path / "u")]
    )
    assert wrong.exit_code == 1 and "not a folder `researchy-subq texts` wrote" in wrong.output
    unknown = CliRunner().invoke(
        app,
        [
            "training-files",
            str(release),
            "--texts",
            str(files["texts"]),
            "--out",
            str(tmp_path / "v"),
            "--format",
            "colbert",
        ],
    )
    assert unknown.exit_code == 1 and "--format colbert: choose from" in unknown.output


@pytest.fixture(scope="module")
def retrieved_release(synthetic_release, tmp_path_factory):
    """The training-configs test's release (built with runs: every source of negatives) and a corpus Parquet copy
    holding every document the judgments and the runs name but one retrieved-unjudged negative of a row."""
    from tests.builder.release.assemble.test_training_configs import SYNTHETIC_RELEASE as TRAINING_RELEASE

    built, inputs = synthetic_release("retrieved", **TRAINING_RELEASE)
    named = pq.read_table(sorted(inputs["runs"].glob("*.parquet")), columns=["docid"])["docid"].to_pylist()
    named += pq.read_table(config("judgments").files(built, "train"), columns=["docid"])["docid"].to_pylist()
    rows = [r for split in ("train", "dev", "test") for r in hard_negative_rows(built, split)]
    lacking = next(
        d for r in rows for d, s in zip(r["negative_document_ids"], r["negative_sources"]) if s == "retrieved_unjudged"
    )
    docids = sorted(set(named) - {lacking})
    corpus = pa.table(
        {
            "docid": docids,
            "url_hash": [f"{i:032X}" for i in range(len(docids))],
            "url": [None] * len(docids),
            "text": [f"text of {d}" for d in docids],
        }
    )
    root = tmp_path_factory.mktemp("retrieved-copy")
    (root / "corpus").mkdir()
    pq.write_table(conform(corpus, "corpus"), root / "corpus" / "corpus-00000-of-00001.parquet")
    return {"release": built, "inputs": inputs, "copy": root / "corpus", "lacking": lacking, "root": root}


def test_texts_bring_the_unjudged_negatives_of_the_rows_and_with_all_retrieved_every_list(retrieved_release):
    built, root = retrieved_release["release"], retrieved_release["root"]
    rows = [r for split in ("train", "dev", "test") for r in hard_negative_rows(built, split)]
    named = {d for r in rows for d in r["negative_document_ids"]} | set(judged_docids(built)["docid"].to_pylist())
    summary = write_texts(built, retrieved_release["copy"], root / "texts")
    assert summary.documents == len(named) and summary.missing == {"not_in_copy": 1}
    listed = {
        d["docid"]
        for split in ("train", "dev", "test")
        for q in pq.read_table(config("questions").files(built, split)).to_pylist()
        for d in q["retrieved_unjudged"]
    }
    assert listed - named, "the lists hold more than the rows use"
    every = write_texts(built, retrieved_release["copy"], root / "all-texts", all_retrieved=True)
    assert every.documents == len(named | listed)


@pytest.mark.parametrize(
    "k,level,order",
    [(3, 1, None), (5, 0, ("retrieved_unjudged", "judged")), (2, 1, ("other_question",))],
)
def test_training_files_rederive_rows_from_the_graded_lists(retrieved_release, tmp_path, k, level, order):
    from tests.builder.release.assemble.test_training_configs import SOURCES, expected_rows

    built, root = retrieved_release["release"], retrieved_release["root"]
    texts = root / "all-texts"
    if not texts.exists():
        write_texts(built, retrieved_release["copy"], texts, all_retrieved=True)
    summary = write_training_files(
        built,
        texts,
        tmp_path / "out",
        negatives=None if order is None else k,
        negative_level=None if order is None else level,
        fill_order=order,
        formats=("sentence-transformers", "flagembedding"),
    )
    for split in ("train", "dev", "test"):
        hard, _, short, positives = expected_rows(built, split, retrieved_release["inputs"], k, level, order or SOURCES)
        ids = pq.read_table(tmp_path / "out" / "sentence-transformers-ids" / f"{split}.parquet").to_pylist()
        got = {(r["query_id"], r["positive_id"]): list(zip(r["negative_ids"], r["negative_sources"])) for r in ids}
        with_texts = {
            key: taken
            for key, taken in hard.items()
            if retrieved_release["lacking"] not in {d for d, _ in taken} | {key[1]}
        }
        assert got == with_texts and len(ids) == len(got) and summary.left_out[split] == len(hard) - len(got)
        if order is None:
            release_rows = hard_negative_rows(built, split)
            assert [(r["query_id"], r["positive_id"], r["negative_ids"], r["negative_sources"]) for r in ids] == [
                (r["query_id"], r["positive_document_ids"][0], r["negative_document_ids"], r["negative_sources"])
                for r in release_rows
                if retrieved_release["lacking"] not in r["negative_document_ids"]
            ]
        lines = jsonl(tmp_path / "out" / "flagembedding" / f"{split}.jsonl")
        scored = [("neg_scores" in line) for line in lines]
        assert scored == [set(r["negative_sources"]) == {"judged"} for r in ids]
    assert summary.counts.positives - summary.counts.short_positives == sum(summary.rows.values()) + sum(
        summary.left_out.values()
    )


def test_training_files_refuses_a_negative_level_at_the_answer_level(retrieved_release, tmp_path):
    built, root = retrieved_release["release"], retrieved_release["root"]
    write_texts(built, retrieved_release["copy"], root / "texts-refusal")
    with pytest.raises(ArgumentError, match="--negative-level 4: must be below the release's answer level 4"):
        write_training_files(built, root / "texts-refusal", tmp_path / "out", negative_level=4)
    with pytest.raises(ArgumentError, match="--fill-order 'judged,bm25'"):
        write_training_files(built, root / "texts-refusal", tmp_path / "out", fill_order=("judged", "bm25"))
    texts_args = ("--texts", root / "texts-refusal")
    for more, fragment in (
        (("--fill-order", ""), "--fill-order '': name each of judged, retrieved_unjudged, other_question"),
        (("--negatives", 1000), "--negatives 1000: every one of the"),
    ):
        code, output = cli_one_line("training-files", built, *texts_args, "--out", tmp_path / "cli", *more)
        assert_one_line_error(code, output, fragment)
    code, output = cli_one_line(
        "training-files", built, *texts_args, "--out", tmp_path / "st", "--format", "sentence-transformers"
    )
    assert code == 0 and "no queries (only --format beir writes them)" in output and "0 queries" not in output


def test_a_release_without_its_training_configs_is_refused_by_training_files_and_train(retrieved_release, tmp_path):
    built, root = retrieved_release["release"], retrieved_release["root"]
    bare = tmp_path / "bare"
    shutil.copytree(built, bare)
    for name in ("graded_lists", "hard_negatives"):
        shutil.rmtree(bare / "data" / name)
    write_texts(built, retrieved_release["copy"], root / "texts-bare")
    for command in ("training-files", "train"):
        out = tmp_path / command
        code, output = cli_one_line(command, bare, "--texts", root / "texts-bare", "--out", out)
        assert_one_line_error(code, output, "no hard-negatives rows to write", "rebuild it with")
        assert not out.exists() or not [p for p in out.rglob("*.parquet")]


def test_training_rows_takes_str_paths(retrieved_release, tmp_path):
    from builder.training.recipe import training_rows

    built, root = retrieved_release["release"], retrieved_release["root"]
    write_texts(built, retrieved_release["copy"], root / "texts-str")
    summary = write_training_files(str(built), str(root / "texts-str"), str(tmp_path / "files"))
    rows = training_rows(str(built), str(tmp_path / "files"), load_profile("paper"))
    assert len(rows.dataset) == summary.rows["train"] > 0


def snapshot(folder):
    """Every file under `folder`: its bytes and modification time, by relative path."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def earlier_run(retrieved_release, tmp_path):
    """A folder holding an earlier good run of training-files (k 2), and the texts it was made from."""
    built, root = retrieved_release["release"], retrieved_release["root"]
    texts = root / "texts-earlier"
    if not texts.exists():
        write_texts(built, retrieved_release["copy"], texts)
    out = tmp_path / "tf"
    write_training_files(built, texts, out, negatives=2)
    return built, texts, out


def test_a_refusal_over_an_earlier_good_run_leaves_every_file_byte_identical(earlier_run, tmp_path):
    built, texts, out = earlier_run
    before = snapshot(out)
    assert pq.read_metadata(out / "sentence-transformers" / "train.parquet").num_rows > 0
    code, output = cli_one_line("training-files", built, "--texts", texts, "--out", out, "--negatives", 1000)
    assert_one_line_error(code, output, "--negatives 1000: every one of the", f"no row was written, and {out} is as")
    assert snapshot(out) == before  # before: train.parquet had 0 rows and tevatron/train.jsonl was empty
    assert [p.name for p in tmp_path.iterdir()] == ["tf"], "the new run's folder beside OUT is removed"


def test_a_new_run_replaces_the_earlier_one_whole_and_carries_its_lookups(earlier_run, tmp_path):
    built, texts, out = earlier_run
    lookups = {p.name: p.stat().st_ino for p in out.glob("_lookup-*.sqlite")}
    assert len(lookups) == 2
    write_training_files(built, texts, out, negatives=3, formats=("beir",))
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.suffix != ".sqlite") == [
        "_document_texts.json",
        "beir/corpus.jsonl",
        "beir/qrels/dev.tsv",
        "beir/qrels/test.tsv",
        "beir/qrels/train.tsv",
        "beir/queries.jsonl",
    ]  # the earlier run's k=2 files are gone with it: OUT holds one run's files
    assert {p.name: p.stat().st_ino for p in out.glob("_lookup-*.sqlite")} == lookups, "built again, not carried"
    assert [p.name for p in tmp_path.iterdir()] == ["tf"]


def test_a_file_training_files_does_not_write_is_refused_before_anything_changes(earlier_run):
    built, texts, out = earlier_run
    (out / "beir").mkdir(exist_ok=True)
    (out / "beir" / "my-notes.txt").write_text("the user's own notes\n")
    before = snapshot(out)
    code, output = cli_one_line("training-files", built, "--texts", texts, "--out", out, "--negatives", 3)
    assert_one_line_error(code, output, f"--out {out}: holds beir/my-notes.txt, not a file `training-files` writes")
    assert snapshot(out) == before
    a_file = out / "beir" / "my-notes.txt"
    code, output = cli_one_line("training-files", built, "--texts", texts, "--out", a_file)
    assert_one_line_error(code, output, f"--out {a_file}: is a file; --out takes a folder")
    assert snapshot(out) == before


def test_an_out_that_is_a_link_the_user_named_is_swapped_where_it_points(earlier_run, tmp_path):
    built, texts, out = earlier_run
    named = tmp_path / "named"
    named.symlink_to(out)
    write_training_files(built, texts, named, negatives=3, formats=("sentence-transformers",))
    assert named.is_symlink() and named.resolve() == out
    assert pq.read_schema(out / "sentence-transformers" / "train.parquet").names[-1] == "negative_3"
    assert not (out / "flagembedding").exists()


def test_rows_a_larger_k_reaches_without_texts_are_counted_apart_with_the_texts_command(retrieved_release, tmp_path):
    """k above the release's reaches retrieved documents `texts` writes only with --all-retrieved: those rows are
    counted apart from the ones whose document the copy lacks, and the summary prints the `texts` run that brings
    them, which, pasted, leaves out only the latter."""
    import shlex

    from builder.cli.main import app
    from tests.builder.release.assemble.test_training_configs import expected_rows

    built, root = retrieved_release["release"], retrieved_release["root"]
    texts = root / "texts-larger-k"
    write_texts(built, retrieved_release["copy"], texts)
    have = set(pq.read_table(sorted(texts.glob("texts-*.parquet")), columns=["docid"])["docid"].to_pylist())
    order = ("retrieved_unjudged", "judged")
    rule = dict(negatives=6, negative_level=0, fill_order=order, formats=("sentence-transformers",))
    summary = write_training_files(built, texts, tmp_path / "k6", **rule)
    copy_lacks = 0  # rows naming the one document the copy lacks
    for split in ("train", "dev", "test"):
        hard = expected_rows(built, split, retrieved_release["inputs"], 6, 0, order)[0]
        documents = [{positive, *(d for d, _ in taken)} for (_, positive), taken in hard.items()]
        lacking = [row - have for row in documents if row - have]
        assert summary.left_out[split] == len(lacking)
        assert summary.not_brought[split] == sum(bool(row - {retrieved_release["lacking"]}) for row in lacking)
        copy_lacks += sum(retrieved_release["lacking"] in row for row in documents)
    not_brought = sum(summary.not_brought.values())
    assert not_brought and copy_lacks
    train = summary.left_out["train"]
    stated = (
        f"{train:,} left out: {train - summary.not_brought['train']:,} for a document your copy lacks, "
        f"{summary.not_brought['train']:,} for a retrieved document `texts` did not write without --all-retrieved"
    )
    assert stated in summary.lines()[0]
    command = summary.lines()[-1].split("`")[1]
    assert summary.lines()[-1].startswith(f"  {not_brought:,} rows left out for want of texts a larger k reaches")
    words = shlex.split(command)
    assert words[:2] == ["researchy-subq", "texts"] and words[-1] == "--all-retrieved"
    ran = CliRunner().invoke(app, words[1:])
    assert ran.exit_code == 0, ran.output
    every = write_training_files(built, words[words.index("--out") + 1], tmp_path / "k6-all", **rule)
    assert sum(every.not_brought.values()) == 0 and every.texts_command == ""
    assert sum(every.left_out.values()) == copy_lacks
    assert not any("want of texts" in line for line in every.lines())
