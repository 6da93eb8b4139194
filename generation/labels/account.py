"""An import's account of itself: the `imported` of each judgment shard's completion record. `import-labels`
writes it (generation/stages/import_labels.py `ImportLabelsStage.account`) and `build-release` sums it into the
manifest (builder/release/assemble/imported.py), both through `ImportAccount`, so the record read is the record
written. It is read strictly (`read_account`): "27" is not a count, true is not 1.

The models live here, not in builder/release/contract.py, because generation/ imports nothing of builder/;
the release's contract imports `OtherTextAccount` from here for the manifest's `imported`."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass

from generation.errors import InputError, first_problem

STRICT = ConfigDict(extra="forbid")  # a key the model does not name is refused, naming it


@dataclass(config=STRICT)  # a dataclass, not a BaseModel: the import adds to its counts once a line
class FileCounts:
    """One labels file as a shard read it (generation/labels/importer.py counts it line by line)."""

    name: str = Field(description="the file's name")
    path: str = Field(description="the file as `import-labels` was given it")
    sha256: str = Field(description="sha256 of the file's bytes, lower-case hex")
    bytes: int = Field(ge=0, description="size on disk")
    lines: int = Field(default=0, ge=0, description="non-blank lines in the file")
    rows: int = Field(default=0, ge=0, description="judgments this shard wrote from it")
    duplicates: int = Field(default=0, ge=0, description="lines repeating an earlier line exactly (kept once)")
    rejected: int = Field(default=0, ge=0, description="lines set aside to the rejects file")


class OtherTextAccount(BaseModel):
    """The authors' clicked-pass defect as the import reconstructed it (generation/labels/authors_pass.py)."""

    model_config = STRICT

    missing_clicked_documents: int = Field(description="clicked documents the corpus lacks")
    documents: int = Field(description="(question, document) pairs graded on another document's text")
    ratings: int = Field(description="their ratings (status imported_other_text)")
    ratings_without_level: int = Field(description="of them, those without a level (the authors' -1, -2 or 7)")


class ImportAccount(BaseModel):
    """A judgment shard's completion record's `imported`: where its labels came from and what became of them."""

    model_config = STRICT

    format: str = Field(description="the import's --format")
    judge: str = Field(description="the judge name the importer gave (--judge)")
    files: list[FileCounts] = Field(description="the label files, in the order given")
    subquestions: str = Field(description="the questions folder the labels were checked against")
    corpus: str | None = Field(description="the corpus folder document ids were resolved with; null without one")
    parser: str | None = Field(description="openai-batch: the prompt whose parser read the answers; else null")
    rows: int = Field(ge=0, description="judgments this shard wrote")
    duplicates: int = Field(ge=0, description="exact duplicate lines, kept once")
    rejected: dict[str, int] = Field(description="reason -> lines set aside")
    statuses: dict[str, int] = Field(description="status -> judgments")
    levels: dict[str, int] = Field(description="level -> judgments")
    documents: dict[str, int] = Field(description="how each judgment's document id was resolved -> judgments")
    clicked_unknown: int = Field(ge=0, description="judgments with no URL-hash, so no known click")
    incomplete_documents: int = Field(ge=0, description="openai-batch: documents missing sub-questions")
    graded_on_other_text: OtherTextAccount | None = Field(
        default=None, description="null unless crux-ratings with a corpus; absent from records made before it"
    )

    def source(self) -> tuple[str, str, tuple[str, ...]]:
        """What makes two imports the same import: format, judge name and the files' contents (in any order)."""
        return source_identity(self.format, self.judge, self.files)


def source_identity(format: str, judge: str, files: list[FileCounts]) -> tuple[str, str, tuple[str, ...]]:
    return format, judge, tuple(sorted(f.sha256 for f in files))


def read_account(record: str | Path, account: object) -> ImportAccount:
    """A completion record's `imported` (its parsed JSON), read as the file holds it, strictly; an InputError naming
    the record and the key."""
    try:
        return ImportAccount.model_validate_json(json.dumps(account), strict=True)
    except ValidationError as e:
        raise InputError(record, 0, f"imported.{first_problem(e)}: not a record `import-labels` writes") from None
