"""The release's typed contract: what manifest.json holds, what the card is rendered from, and what each config
declares. `assemble/` writes through these models, `validate/`, `publish/` and `builder/training/` read through
them, and `manifest.schema.json` (the manifest's JSON schema, in every release and in docs/reference/) lets a
user's own tools read a release. Every field has a description, which the schema and docs/reference/manifest.md
state.

Every model forbids keys it does not name (`extra="forbid"`): a key added by hand, or by a newer kit, is an error
that names it, not a value silently ignored. Fields are declared in the order the manifest lists them; the file
itself is written with sorted keys (assemble/data_files.py `write_json`).

A file is read in pydantic's strict mode, as JSON (`model_validate_json(..., strict=True)`): "4486" is not a count
and true is not 1, as the release's own JSON schema says. Strict JSON input still reads what JSON cannot spell
otherwise (an array for a tuple) and an integer for a float, so every manifest the kit writes reads back
(https://docs.pydantic.dev/latest/concepts/strict_mode/, and its conversion table)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from builder.pilot.contract import PilotEntry
from builder.release.layout import MANIFEST
from generation.errors import first_problem
from generation.labels.account import OtherTextAccount  # the import's own account, written by import-labels
from generation.profiles.profile import Profile, TrainingConfigsSettings
from generation.storage.schema import SPLITS

MANIFEST_SCHEMA = "manifest.schema.json"  # beside manifest.json: its JSON schema (`manifest_schema()`)
# the schema's file in the kit's repository, written by scripts/make_reference.py
SCHEMA_IN_REPOSITORY = "docs/reference/" + MANIFEST_SCHEMA

# the schema module's splits, as a type: to pydantic the Literal of SPLITS, to mypy (which cannot build a Literal from
# a tuple) a string
if TYPE_CHECKING:
    Split = str
else:
    Split = Literal[SPLITS]


class Contract(BaseModel):
    model_config = ConfigDict(extra="forbid")


def absent(description: str) -> Any:
    """An optional field that is left out of the file, not written as null, when it has no value."""
    return Field(default=None, exclude_if=lambda value: value is None, description=description)


class FileEntry(Contract):
    """One data file (a Parquet file or a TREC qrels file) as the manifest lists it."""

    bytes: int = Field(ge=0, description="size on disk")
    sha256: str = Field(description="sha256 of the file's bytes, lower-case hex")
    rows: int = Field(ge=0, description="rows (a Parquet file's footer) or lines (a TREC qrels file)")


class Models(Contract):
    """The models that made the labels, as the card names them."""

    reranker: str | None = Field(description="the reranker and its backend; null for imported labels (no pool made)")
    judge: str = Field(description="every judge the judgment records name, '; '-joined (or the profile's model)")
    judge_precision: str | None = absent("fp8 or the judge's dtype; absent for imported labels")


class PromptRef(Contract):
    """The judge's prompt, by id and hash (the card holds its text)."""

    id: str = Field(description="the prompt's id in generation/judging/prompts.py")
    sha256: str = Field(description="sha256 of the prompt's template")


class LevelRow(Contract):
    """One row of the paper's Table 1: a level (or 'Other', the unparsed) and its judgments."""

    level: str = Field(description="'5' down to '0', then 'Other'")
    count: int = Field(description="the split's judgments at this level")
    per_subquestion: float = Field(
        description="count / the split's sub-questions, to 2 places ('Other': 4), as the paper's Table 1 gives it"
    )


class PerSubquestion(Contract):
    """Judgments per sub-question."""

    mean: float = Field(description="the split's judgments / its sub-questions, to 2 places")
    min: int = Field(description="the fewest judgments of a judged sub-question")
    max: int = Field(description="the most judgments of a sub-question")


class Clicked(Contract):
    """How many of the split's clicked documents were judged."""

    in_questions: int = Field(description="clicked documents listed by the split's questions")
    judged: int = Field(description="of them, those judged at least once")
    coverage: float = Field(description="judged / in_questions, to 4 places; 0 when no document is clicked")


class ComplexityStats(Contract):
    """The split's retrieval-complexity figures (assemble/complexity.py `summary`); only `questions` when none was
    judged."""

    questions: int = Field(description="questions with at least one judged sub-question")
    answerable_share: float | None = absent("questions some document answers completely")
    mean_subquestions_answerable: float | None = absent("mean share of a question's sub-questions answered")
    completeness_quartiles: list[float] | None = absent("completeness at the 25th, 50th and 75th percentile")
    retrieval_complex_share: float | None = absent("questions neither answerable nor complete enough")


class ProvenanceShare(Contract):
    """Shares of a split's judgments by where their document came from (a rank counts inside the pool's top-k). The
    first three overlap; the four `_only`/`_and_` shares partition the judgments."""

    bm25: float = Field(description="in BM25's top-k")
    rerank: float = Field(description="in the reranker's top-k")
    clicked: float = Field(description="a clicked document of the question")
    bm25_only: float = Field(description="in BM25's top-k, not the reranker's")
    rerank_only: float = Field(description="in the reranker's top-k, not BM25's")
    bm25_and_rerank: float = Field(description="in both top-k lists")
    clicked_only: float = Field(description="clicked, in neither top-k list")


class SplitStats(Contract):
    """A split's statistics as the card and `validate` state them (assemble/stats.py `SplitStatsAccumulator`)."""

    judgments: int = Field(description="the split's judgments, graded or not")
    subquestions: int = Field(description="the split's sub-questions (its subquestions table)")
    subquestions_judged: int = Field(description="of them, those with at least one judgment")
    table1: list[LevelRow] = Field(description="the paper's Table 1 recomputed: levels 5 to 0, then Other")
    judgments_per_subquestion: PerSubquestion = Field(description="judgments per sub-question")
    provenance_share: ProvenanceShare = Field(description="shares of the judgments by where their document came from")
    context_cut_by_tokens: int = Field(description="judgments whose context the judge cut further, by tokens")
    counts: dict[str, dict[str, int]] = Field(description="string column -> value -> rows ('null' for a null)")
    clicked: Clicked = Field(description="the split's clicked documents and how many were judged")
    level_share: dict[str, float] = Field(
        description="level ('0' to '5', 'unparsed') -> share of the split's judgments, to 6 places"
    )
    complexity: ComplexityStats = Field(description="the split's retrieval-complexity figures")


class TrainingRecord(TrainingConfigsSettings):
    """`manifest.training`: the profile's training settings the configs were derived with (the profile section's
    own fields, declared once there), and what the derivation gave (builder/release/training_record.py
    `settings_record`)."""

    answer_level: int = Field(description="complexity.answer_level: a positive is judged at least this")
    positives: int = Field(description="judged positives, each with a hard-negatives row")
    short_positives: int = Field(description="positives that all the sources together could not give k negatives")
    negatives_by_source: dict[str, int] = Field(description="negatives filled from each source of fill_order")
    other_questions_sampled: int = Field(description="questions per split sampled for other-question negatives")
    retrieved_unjudged_from: str = Field(description="where questions.retrieved_unjudged came from: runs or none")
    dev_rule: str = Field(description="the dev split's rule, in words")


class ImportedFile(Contract):
    """One labels file of an import, merged over the shards that read it (by sha256)."""

    name: str = Field(description="the file's name")
    sha256: str = Field(description="sha256 of the file's bytes, lower-case hex")
    bytes: int = Field(ge=0, description="size on disk")
    format: str = Field(description="the import's --format")
    lines: int = Field(ge=0, description="non-blank lines in the file")
    rows: int = Field(ge=0, description="judgments taken from it")
    duplicates: int = Field(ge=0, description="exact duplicate lines, kept once")
    rejected: int = Field(ge=0, description="lines set aside to the rejects file")


class ImportRecord(Contract):
    """`manifest.imported`: what `import-labels` recorded, summed over the judgment shards
    (assemble/imported.py `import_record`); `validate` checks the release against it."""

    judges: list[str] = Field(description="the judge names the importer gave")
    formats: list[str] = Field(description="the imports' --format, sorted")
    parsers: list[str] = Field(description="the prompts whose parsers read OpenAI Batch answers")
    files: list[ImportedFile] = Field(description="every labels file, by name (one entry per content: sha256)")
    rows: int = Field(description="judgments imported")
    duplicates: int = Field(description="exact duplicate lines, kept once")
    rejected: dict[str, int] = Field(description="reason -> lines set aside")
    statuses: dict[str, int] = Field(description="status -> judgments, as imported")
    documents: dict[str, int] = Field(description="how each judgment's document id was resolved -> judgments")
    clicked_unknown: int = Field(description="judgments with no URL-hash, so `clicked` is false without being known")
    incomplete_documents: int = Field(description="openai-batch: documents missing sub-questions")
    graded_on_other_text: OtherTextAccount | None = Field(description="null unless crux-ratings with a corpus")
    not_produced_by_the_kit: list[str] = Field(description="what these labels lack that the kit's judge gives")
    left_out: dict[str, int] | None = absent("absent unless --leave-out-other-text: status -> judgments left out")


class Manifest(Contract):
    """manifest.json: what a release holds and how it was made."""

    repo: str = Field(description="the Hub dataset repository the card's snippets name")
    code_version: str = Field(description="the kit's version that built it")
    profile: Profile = Field(description="the profile the judgments were made under (generation/profiles/profile.py)")
    profile_hash: str = Field(description="the profile's config hash")
    models: Models = Field(description="the reranker and judge that made the labels")
    prompt: PromptRef | None = Field(description="the judge's prompt; null for imported labels")
    rows: dict[str, dict[Split, int]] = Field(description="config -> split -> rows")
    stats: dict[Split, SplitStats] = Field(description="split -> the statistics the card states (Table 1 and more)")
    splits: list[Split] = Field(description="the splits the release holds, in order")
    files: dict[str, FileEntry] = Field(description="every data file, by its path in the release")
    training: TrainingRecord = Field(description="the training configs' settings and what they hold")
    shards_revision: str | None = Field(description="where the judgment shards came from (CI: SHARDS_REPO@commit)")
    imported: ImportRecord | None = absent("absent unless imported: the label files, judges and counts of the import")
    pilot: PilotEntry | None = absent(  # the pilot record's models: builder/pilot/contract.py
        "absent unless `build-release --pilot`: the record, and which setting made these"
    )
    failed_pairs: int | None = absent("absent unless published with --allow-failed-pairs: pairs with no level")

    def as_json(self) -> dict[str, Any]:
        """The manifest as written (the optional records absent, not null, when they have no value)."""
        return self.model_dump()


class ManifestError(ValueError):
    """manifest.json is missing, not JSON, or not the contract; the message names the file and the first field."""


def manifest_from_json(text: str) -> Manifest:
    """manifest.json's text through the contract, strictly; a ManifestError naming the first field that is wrong."""
    try:
        return Manifest.model_validate_json(text, strict=True)
    except ValidationError as e:
        raise ManifestError(f"{MANIFEST}: {first_problem(e)}") from None


def parse_manifest(data: Any) -> Manifest:
    """A manifest's parsed JSON (a dict) through the contract, read as the file holding it would be."""
    return manifest_from_json(json.dumps(data))


def read_manifest(release: Path) -> Manifest:
    try:
        text = (Path(release) / MANIFEST).read_text(encoding="utf-8")
        json.loads(text)  # not JSON: the parser's own message, with its line and column
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ManifestError(f"{MANIFEST}: {e}") from None
    return manifest_from_json(text)


SCHEMA_URN = "urn:researchy-subq-judgments:manifest-schema:sha256:"


def manifest_schema_id(body: dict[str, Any]) -> str:
    """The schema's `$id`: a URN that names this kit's manifest schema and, by the first 16 hex digits of the sha256
    of its canonical JSON (the `$id` left out), exactly this version of it. It changes only when the schema does; a
    URN, since the kit has no published address to serve the file from."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return SCHEMA_URN + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def manifest_schema() -> dict[str, Any]:
    """The manifest's JSON schema: pydantic's (JSON Schema draft 2020-12), with the `$schema` that names the draft
    and an `$id`, which pydantic leaves to the caller (pydantic/json_schema.py `GenerateJsonSchema.generate`;
    https://docs.pydantic.dev/latest/concepts/json_schema/)."""
    body = {"$schema": GenerateJsonSchema.schema_dialect, **Manifest.model_json_schema()}
    return {"$id": manifest_schema_id(body), **body}


def manifest_json_schema() -> str:
    """The manifest's JSON schema as the release and docs/reference/ hold it."""
    return json.dumps(manifest_schema(), indent=1, sort_keys=True) + "\n"


class CardPrompt(Contract):
    """The judge prompt as the card states it."""

    id: str
    source: str = Field(description="where the prompt's text comes from (the paper, the authors' code...)")
    sha256: str
    max_level: int
    text: str = Field(description="the prompt rendered with {question} and {context} left as placeholders")


class CardContext(Contract):
    """What the card template (assemble/cards/dataset_card.md) is rendered from, beside the data's numbers."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    repo: str
    profile: Profile
    profile_hash: str
    code_version: str
    judge: str
    server_template: bool = Field(description="a served judge wrapped the prompt in its own chat template")
    stand_in: bool = Field(description="a stand-in judge (tests, the demo) made the labels")
    reranker: str | None
    judge_precision: str
    prompt: CardPrompt
    differences: str = Field(description="markdown: where the profile differs from the paper's")
    binary_threshold: int
    imported: ImportRecord | None
    rubric: list[tuple[int, str]]
    agreement: str | None
    pilot: str | None
    pilot_precisions: list[str]
    training: TrainingRecord
    failed_pairs: int


class SplitFiles(Contract):
    split: Split
    path: str = Field(description="a glob under the release, as `load_dataset` resolves it")


class ConfigFiles(Contract):
    """One entry of the card YAML's `configs:`: where a config's files are (huggingface_hub `DatasetCardData`)."""

    config_name: str
    default: bool | None = absent("true for the default config; absent otherwise")
    data_files: list[SplitFiles]


class DeclaredSplit(Contract):
    name: Split
    num_bytes: int
    num_examples: int = Field(description="exact: `load_dataset` checks the rows it reads against it")


class ConfigSchema(Contract):
    """One entry of the card YAML's `dataset_info:`, each config's declared schema as `datasets` writes it
    (`DatasetInfosDict.to_dataset_card_data`): its columns' Features and its splits' sizes."""

    config_name: str
    features: list[dict[str, Any]] = Field(description="the columns' `datasets` Features, in YAML form")
    splits: list[DeclaredSplit]
    download_size: int
    dataset_size: int


def card_entries(model: type[Contract], entries: Any) -> tuple[list, list[str]]:
    """The YAML list `entries` read through `model`: the entries that parse, and one line per entry that does not."""
    parsed, problems = [], []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        try:
            parsed.append(model.model_validate(entry, strict=True))  # YAML's own types: no tuple, no date here
        except ValidationError as e:
            name = entry.get("config_name") if isinstance(entry, dict) else repr(entry)
            problems.append(f"entry {i} ({name}): {first_problem(e)}")
    return parsed, problems
