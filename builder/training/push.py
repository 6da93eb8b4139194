"""`researchy-subq train --push-to-hub ORG/NAME`: the model's own files to the Hub, and nothing else.

The files sent are the ones `train` wrote into the model folder, listed by name (`TrainingReport.model_files`). A
folder that holds any other file (a user's notes, a gzip of training text) is refused, naming the file: nothing is
uploaded, as `publish` leaves foreign files out of a release. The files sent are first scanned for the training
texts (builder/training/text_scan.py), in the forms builder/training/text_forms.py reads; a file holding more decoded
data than the scan reads is refused too, and the line that reports a clean scan says what the scan cannot see. The upload is one `create_commit` of exactly those files (huggingface_hub's
`CommitOperationAdd` per file); its failures become one line (builder/release/publish/hub_errors.py)."""

from __future__ import annotations

import json
from pathlib import Path

from builder.release.publish.hub_errors import PublishRefused, checked_repo_id, hub_errors
from builder.training.recipe import REPORT
from builder.training.text_forms import DECODED_BYTES, FORMS_NOT_READ, FORMS_READ
from builder.training.text_scan import MIN_WORDS, ScanResult, scan_folder
from builder.training.texts import text_files
from generation.storage.atomic_files import files_under


class TrainingTextFound(PublishRefused):
    """The model folder holds text of a training document: nothing was uploaded."""


class NotReadWhole(PublishRefused):
    """The model folder holds a file with more decoded data than the scan reads: nothing was uploaded."""


class ForeignFile(PublishRefused):
    """The model folder holds a file `train` did not write: nothing was uploaded."""


def check_own_files(folder: Path, files: list[str]) -> None:
    """The folder holds exactly `files`: ForeignFile naming the first other file, or the first one missing."""
    present = files_under(folder)
    foreign = sorted(set(present) - set(files))
    if foreign:
        raise ForeignFile(
            f"{folder / foreign[0]}: not a file `train` wrote"
            + (f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else "")
            + "; the push sends only the model's own files. Nothing was uploaded: move it out of the folder and push "
            "again"
        )
    missing = sorted(set(files) - set(present))
    if missing:
        raise ForeignFile(f"{folder / missing[0]}: `train` wrote it and it is gone; nothing was uploaded: train again")


def check_before_training(folder: Path) -> None:
    """Before a `train --push-to-hub`: the model folder holds nothing but what an earlier `train` wrote there (its
    report's `model_files`), so a foreign file is refused before the long work, not after it."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    try:
        written = json.loads((folder / REPORT).read_text(encoding="utf-8")).get("model_files") or []
    except (OSError, ValueError, AttributeError):
        written = []
    check_own_files(folder, sorted(set(files_under(folder)) & set(written)))


def check_no_training_text(folder: Path, texts: Path, decoded_bytes: int = DECODED_BYTES) -> ScanResult:
    """The scan of `folder` against every text of the `texts` folder; TrainingTextFound naming each file that holds
    one (and the document it came from), each (file, document) once; NotReadWhole naming the files that decode to
    more than `decoded_bytes`."""
    result = scan_folder(folder, text_files(texts), decoded_bytes=decoded_bytes)
    if result.found:
        found = "; ".join(f"{f.file} holds text of {f.docid} ('{f.words}')" for f in result.found)
        raise TrainingTextFound(
            f"{folder}: {found}. Nothing was uploaded: ClueWeb22's licence forbids redistributing its text; remove "
            "it from those files and push again"
        )
    if result.unread:
        raise NotReadWhole(
            f"{folder}: {', '.join(result.unread)}: more than {decoded_bytes:,} bytes of base64 or gzip data once "
            "decoded, the most the scan reads of one file, so it cannot say the rest holds no training text. Nothing "
            "was uploaded: remove that data and push again"
        )
    return result


def push_model(
    folder: Path, texts: Path, repo: str, files: list[str], api=None, private: bool = False, say=print
) -> str:
    """Check the folder holds only `files` (the ones `train` wrote) and none of the training texts, then create the
    model repository (if new) and commit exactly those files; the commit's URL."""
    from huggingface_hub import CommitOperationAdd

    folder = Path(folder)
    checked_repo_id(repo, "--push-to-hub")
    check_own_files(folder, files)
    result = check_no_training_text(folder, texts)
    say(
        f"scanned the {len(files)} files of {folder} that `train` wrote for the {result.texts:,} texts of {texts}, "
        f"{FORMS_READ}: none found ({result.too_short:,} texts under {MIN_WORDS} words not checked); the scan "
        f"cannot see {FORMS_NOT_READ}"
    )
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name)) for name in files]
    with hub_errors(repo, "create the model repository"):
        api.create_repo(repo, repo_type="model", exist_ok=True, private=private)
    with hub_errors(repo, "upload the model's files"):
        commit = api.create_commit(
            repo_id=repo, operations=operations, repo_type="model", commit_message="researchy-subq train"
        )
    return str(getattr(commit, "commit_url", commit))
