"""`import-labels`: labels that exist (the authors' ratings files, another judge's graded qrels, OpenAI Batch results)
-> ordinary judgment shards, so `build-release`, `validate` and `publish` take them as they take the judge's.

It stands beside the pipeline, as the budgeted judge does: it writes what `judge` writes, from files instead of a
model. Its shards carry the config hash `imported-` + the judge stage's under the profile, so neither stage mistakes
the other's shards for its own, and `build-release` finds the profile the same way (builder/release/assemble/lineage.py).
Each completion record says where the labels came from: the files (name, sha256, lines, rows, duplicates), the
format, the judge's name as the user gave it, the statuses and how the document ids were resolved. What the kit
cannot know is null: the ranks and pool `source` (no pool provenance), `raw` where the file has no text, `probs`.
`clicked` is derived from the question's clicked URL-hashes where the document's URL-hash is known.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from generation.errors import InputError
from generation.judging.prompts import get_prompt
from generation.labels.account import FileCounts, ImportAccount, OtherTextAccount, read_account, source_identity
from generation.labels.documents import DocumentKeys
from generation.labels.formats import LabelFormat
from generation.labels.importer import QuestionLists, ShardImport
from generation.profiles.profile import Profile
from generation.stages.base import ProfiledStage, StageSummary
from generation.stages.judge import NAME, JudgeStage
from generation.stages.questions import SUBQUESTIONS_FOLDER
from generation.storage.atomic_files import ParquetSink
from generation.storage.rejects import Rejects
from generation.storage.schema import OTHER_TEXT_STATUS
from generation.storage.shards import DONE_DIR, Shard, ShardError, StageOutput, sha256_file

IMPORTED_PREFIX = "imported-"


@dataclass(slots=True)
class ImportSummary(StageSummary):
    lines: int = 0
    rows: int = 0
    duplicates: int = 0  # exact duplicate lines, kept once
    rejected: Counter[str] = field(default_factory=Counter)  # reason -> lines set aside
    statuses: Counter[str] = field(default_factory=Counter)
    levels: Counter[int] = field(default_factory=Counter)
    documents: Counter[str] = field(default_factory=Counter)  # how each judgment's document id was resolved
    clicked_unknown: int = 0  # judgments with no URL-hash
    incomplete_documents: int = 0  # openai-batch: documents missing sub-questions
    judge: str = ""  # the judge name the importer gave
    format: str = ""
    other_text: dict[str, int] = field(default_factory=dict)  # crux-ratings with --corpus: the clicked-pass defect


class ImportLabelsStage(ProfiledStage[ImportSummary]):
    """Labels made elsewhere (the authors' ratings, graded qrels, OpenAI Batch results) -> judgment shards whose
    completion records name the files they came from."""

    name = "import-labels"
    produces = "`judgments-*.parquet` from the label files given (the records name them)"
    writes = NAME
    reads = (SUBQUESTIONS_FOLDER,)
    sections = JudgeStage.sections
    unit = "lines"
    summary_type = ImportSummary

    def __init__(
        self,
        profile: Profile,
        out: Path,
        subquestions: Path,
        files: list[Path],
        format: str | LabelFormat,
        judge: str,
        corpus: Path | None = None,
        rejects: Path | None = None,
    ):
        super().__init__(profile, out, subquestions=subquestions)
        self.files = [Path(p) for p in files]
        self.kind = LabelFormat(format)
        self.judge_name, self.corpus, self.rejects = judge, corpus, rejects
        self.prompt = get_prompt(profile.judge.prompt)
        self.sources: list[FileCounts] = []

    @classmethod
    def config_hash(cls, profile: Profile | None) -> str:
        return IMPORTED_PREFIX + super().config_hash(profile)

    def new_summary(self, shard: Shard) -> ImportSummary:
        summary = super().new_summary(shard)
        summary.judge, summary.format = self.judge_name, self.kind.value
        return summary

    def prepare(self) -> None:
        """The arguments, the files' checksums, and a folder that holds no other import."""
        if not self.judge_name.strip() or any(c in self.judge_name for c in "\r\n"):
            raise InputError("--judge", 0, f"a judge name on one line is needed, got {self.judge_name!r}")
        if not self.files:
            raise InputError("import-labels", 0, "no label files given")
        if self.kind is LabelFormat.openai_batch and self.prompt.id == "r3a":
            raise InputError(
                "--profile",
                0,
                "r3a's <extract> must be checked against the document text, which an "
                "import does not read: judge r3a pairs with `researchy-subq judge`",
            )
        resolved = [p.resolve() for p in self.files]
        for i, path in enumerate(self.files):
            if not path.is_file():
                raise InputError(path, 0, "no such file" if not path.exists() else "not a file")
            if resolved[i] in resolved[:i]:
                raise InputError(path, 0, "the same label file is given twice")
        self.sources = [FileCounts(p.name, str(p), sha256_file(p), p.stat().st_size) for p in self.files]
        wanted = source_identity(self.kind.value, self.judge_name, self.sources)
        for record in self.output().records():
            if record.extra.get("imported") is None:
                continue
            found = read_account(self.out / DONE_DIR / f"{record.stage}-{record.shard}.json", record.extra["imported"])
            if found.source() != wanted:
                raise ShardError(
                    f"{self.out}: holds labels imported from other files or under another judge name "
                    f"({found.format}, judge {found.judge!r}, {', '.join(f.name for f in found.files)}); this run "
                    f"imports {', '.join(p.name for p in self.files)}: use another --out, or remove those shards"
                )

    def account(self, summary: ImportSummary, other_text: OtherTextAccount | None) -> ImportAccount:
        """The completion record's account of the import (its `imported`), from this shard's counts."""
        return ImportAccount(
            format=self.kind.value,
            judge=self.judge_name,
            files=self.sources,
            subquestions=str(self.inputs["subquestions"]),
            corpus=str(self.corpus) if self.corpus is not None else None,
            parser=self.prompt.id if self.kind is LabelFormat.openai_batch else None,
            rows=summary.rows,
            duplicates=summary.duplicates,
            rejected=dict(summary.rejected),
            statuses=dict(sorted(summary.statuses.items())),
            levels={str(k): v for k, v in sorted(summary.levels.items())},
            documents=dict(sorted(summary.documents.items())),
            clicked_unknown=summary.clicked_unknown,
            incomplete_documents=summary.incomplete_documents,
            graded_on_other_text=other_text,
        )

    def rejects_path(self, shard: Shard) -> Path | None:
        if self.rejects is None or shard.count == 1:
            return self.rejects
        return self.rejects.with_name(f"{self.rejects.stem}-{shard.label}{self.rejects.suffix}")

    def run_shard(self, shard: Shard, output: StageOutput, summary: ImportSummary, progress, executor) -> dict:
        questions = QuestionLists(self.inputs["subquestions"])
        with Rejects(self.rejects_path(shard)) as rejects, ParquetSink(output.path(shard), NAME) as sink:
            work = ShardImport(questions, shard, self.kind, self.prompt, DocumentKeys(self.corpus), rejects)
            checks_authors_pass = self.kind is LabelFormat.crux_ratings and self.corpus is not None
            missing_clicked = work.find_other_texts() if checks_authors_pass else None
            work.run(self.sources, sink, progress)
            empty = next((s for s in self.sources if not s.lines), None)
            if empty is not None:  # refused before the shard is recorded done with nothing from that file
                raise InputError(
                    empty.path,
                    0,
                    "holds no label lines (an empty file, an empty .gz, or blank lines "
                    "only): nothing to import from it",
                )
            summary.rejected.update(rejects.reasons)
        summary.statuses, summary.levels, summary.documents = work.statuses, work.levels, work.documents_by_way
        summary.clicked_unknown = work.clicked_unknown
        other_text = None
        if missing_clicked is not None:  # the authors' clicked-pass defect (generation/labels/authors_pass.py), counted
            other_text = OtherTextAccount(
                missing_clicked_documents=missing_clicked,
                documents=work.other_text_documents,
                ratings=work.statuses.get(OTHER_TEXT_STATUS, 0),
                ratings_without_level=work.other_text_without_level,
            )
            summary.other_text = other_text.model_dump()
        if self.kind is LabelFormat.openai_batch:
            summary.incomplete_documents = work.incomplete_documents()
        summary.lines = sum(s.lines for s in self.sources)
        summary.rows = sum(s.rows for s in self.sources)
        summary.duplicates = sum(s.duplicates for s in self.sources)
        return {"judge": self.judge_name, "imported": self.account(summary, other_text).model_dump()}
