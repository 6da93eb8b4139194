"""The manifest of an OpenAI Batch export (generation/judging/batch_files.py), typed: `--export-batch` writes it
beside the request files, `--import-batch` reads it back, and the results are graded only under the profile and
prompt they were exported with. A key it does not name is refused (`extra="forbid"`), naming the file, and the file is
read strictly: "3" is not a count, true is not 1."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from generation.errors import ArgumentError, InputError, first_problem
from generation.storage.atomic_files import write_text_atomic

MANIFEST = "manifest.json"


class BatchRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestFile(BatchRecord):
    """One request file, as written (it appears under its name only when complete)."""

    name: str
    lines: int = Field(ge=0)
    bytes: int = Field(ge=0)
    sha256: str


class NotExported(BatchRecord):
    """A pair whose prompt cannot fit the token budget: no request line; imported as a failed judgment."""

    custom_id: str
    error: str


class BatchManifest(BatchRecord):
    """What was exported and under which judge (fields in the order the file lists them)."""

    profile_hash: str = Field(description="the judge stage's config hash: results import into this stage only")
    prompt: str = Field(description="the prompt's id")
    prompt_sha256: str
    request_shape: str = Field(description="chat or completions (generation/judging/openai_format.py)")
    url: str = Field(description="the request lines' endpoint")
    model: str
    mode: str = Field(description="the judge's mode: generate or distribution")
    digit_logprobs: str | None = Field(description="how the level digits' logprobs are asked (distribution mode)")
    pairs: int = Field(ge=0, description="request lines written")
    files: list[RequestFile]
    context_cut_by_tokens: list[str] = Field(description="custom_ids whose context was cut to fit the budget")
    not_exported: list[NotExported]

    def write(self, out_dir: Path) -> None:
        write_text_atomic(out_dir / MANIFEST, json.dumps(self.model_dump(), indent=1) + "\n")

    def differences(self, expected: dict[str, str]) -> list[str]:
        return [f"{k} {getattr(self, k)!r} (this run: {v!r})" for k, v in expected.items() if getattr(self, k) != v]


def load_manifest(path: str | Path) -> BatchManifest:
    """The export's manifest: `path` is the file or the folder holding it."""
    path = Path(path)
    path = path / MANIFEST if path.is_dir() else path
    try:
        text = path.read_text(encoding="utf-8")
        json.loads(text)  # not JSON: the parser's own message, with its line and column
        # strictly: "4486" is not a count, true not 1 (https://docs.pydantic.dev/latest/concepts/strict_mode/)
        return BatchManifest.model_validate_json(text, strict=True)
    except ValidationError as error:
        raise InputError(path, 1, f"not a batch manifest ({first_problem(error)})") from None
    except (OSError, ValueError) as error:
        raise InputError(path, 1, f"not a batch manifest ({error})") from None


def check_manifest(manifest: BatchManifest, expected: dict[str, str]) -> None:
    """Results are imported under the profile and prompt they were exported with, or not at all."""
    wrong = manifest.differences(expected)
    if wrong:
        raise ArgumentError("the batch was exported under another judge: " + "; ".join(wrong))
