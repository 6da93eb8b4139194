"""`researchy-subq train --push-to-hub ORG/NAME`: the model folder to the Hub, only once a scan of every file in it
finds none of the training texts (builder/training/text_scan.py). The upload itself is huggingface_hub's
`create_repo` and `upload_folder`, nothing more; its failures become one line (builder/release/publish/hub_errors.py)."""

from __future__ import annotations

from pathlib import Path

from builder.release.publish.hub_errors import PublishRefused, checked_repo_id, hub_errors
from builder.training.text_scan import MIN_WORDS, ScanResult, scan_folder
from builder.training.texts import text_files


class TrainingTextFound(PublishRefused):
    """The model folder holds text of a training document: nothing was uploaded."""


def check_no_training_text(folder: Path, texts: Path) -> ScanResult:
    """The scan of `folder` against every text of the `texts` folder; TrainingTextFound naming each file that holds
    one (and the document it came from)."""
    result = scan_folder(folder, text_files(texts))
    if not result.clean:
        found = "; ".join(f"{f.file} holds text of {f.docid} ('{f.words}')" for f in result.found)
        raise TrainingTextFound(
            f"{folder}: {found}. Nothing was uploaded: ClueWeb22's licence forbids redistributing its text; remove "
            "it from those files and push again"
        )
    return result


def push_model(folder: Path, texts: Path, repo: str, api=None, private: bool = False, say=print) -> str:
    """Scan, then create the model repository (if new) and upload the folder in one commit; the commit's URL."""
    folder = Path(folder)
    checked_repo_id(repo, "--push-to-hub")
    result = check_no_training_text(folder, texts)
    say(
        f"scanned every file of {folder} for the {result.texts:,} texts of {texts}: none found "
        f"({result.too_short:,} texts under {MIN_WORDS} words not checked)"
    )
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    with hub_errors(repo, "create the model repository"):
        api.create_repo(repo, repo_type="model", exist_ok=True, private=private)
    with hub_errors(repo, "upload the model folder"):
        commit = api.upload_folder(
            repo_id=repo, folder_path=str(folder), repo_type="model", commit_message="researchy-subq train"
        )
    return str(getattr(commit, "commit_url", commit))
