"""`build-release`: data files, then the card, plot and manifest that describe them."""

from __future__ import annotations

import re
from pathlib import Path

from builder.analysis.agreement import agreement_markdown, read_agreement
from builder.pilot.card_text import judge_precision, pilot_markdown
from builder.release.assemble.agreement_scope import agreement_scope
from builder.release.assemble.card import render_card
from builder.release.assemble.data_files import ReleaseSummary, build_release_data, file_manifest, write_json
from builder.release.assemble.failed_pairs import failed_pairs
from builder.release.assemble.imported import import_record
from builder.release.assemble.lineage import judgment_config_hash, release_profile
from builder.release.assemble.options import ReleaseOptions
from builder.release.assemble.pilot import pilot_for_release
from builder.release.card_text import PLOT, plot_levels
from builder.release.contract import (
    MANIFEST_SCHEMA,
    CardContext,
    CardPrompt,
    ImportRecord,
    Manifest,
    Models,
    PromptRef,
    manifest_schema,
)
from builder.release.layout import CONFIGS, MANIFEST, binary_threshold
from builder.release.training_record import settings_record
from generation import __version__
from generation.errors import InputError
from generation.judging.prompts import get_prompt
from generation.profiles.profile import Profile, load_profile, withhold_endpoint
from generation.stages.judge import named_prompts
from generation.storage.atomic_files import refuse_links
from generation.storage.schema import OTHER_TEXT_STATUS, features


def rubric(prompt_text: str) -> list[tuple[int, str]]:
    """The prompt's guideline lines ("- 5: The context is ...") as (level, text), highest first."""
    return [(int(m[1]), m[2].strip()) for m in re.finditer(r"^- (\d): (.+)$", prompt_text, re.MULTILINE)]


def differences(profile: Profile, imported: ImportRecord | None = None) -> str:
    """Every knob where this release's profile differs from the paper's, then what always differs."""
    paper = load_profile("paper").model_dump()
    ours = profile.model_dump()
    lines = (
        [
            "- The labels were imported, not judged by this kit: the profile's BM25, reranker, pool and judge settings "
            "below describe the profile the import named, not how these labels were made."
        ]
        if imported
        else []
    )
    for section in ("bm25", "rerank", "pool", "judge"):
        for key, value in ours[section].items():
            if paper[section].get(key) != value:
                lines.append(
                    f"- `{section}.{key}`: {value!r} here, {paper[section].get(key)!r} in the `paper` profile."
                )
    lines += [
        "- The paper reports 24,316,320 judgments over 1,288,976 sub-questions: 18.86 per sub-question (it prints "
        "18.87). Its stated "
        "pool (top 20 BM25 + top 20 reranked + clicked documents, each judged for every sub-question of its question) "
        "gives every sub-question at least 20 judgments (the 20 BM25 documents alone), so the average cannot be below "
        "20: the paper's data did not follow its stated rule exactly.",
        '- Parsing follows the authors\' rule (`re.findall(r"\\d|-\\d", output + "-1")[0]`), which gives every output '
        'an integer; the paper\'s 13 "Other" outputs are those off the 0-5 scale. Here such a judgment keeps a null '
        "level and its `status` says why (no_digit, negative, out_of_scale, request_failed).",
        "- Documents are identified by ClueWeb22-ID and URL-hash; the paper does not say which key it used.",
    ]
    return "\n".join(lines)


def refuse_other_prompts(judges: list[str], prompt_id: str, folders: list[Path]) -> None:
    """The judgment records' judges name no prompt but the profile's (one config hash holds one prompt: records that
    name two were edited or merged by hand)."""
    other = sorted(named_prompts(judges) - {prompt_id})
    if other:
        raise InputError(
            ", ".join(map(str, folders)),
            0,
            f"the judgment records name the prompt{'s' if len(other) > 1 else ''} {', '.join(other)} beside "
            f"{prompt_id}, under one config: one release holds one prompt's labels",
        )


def build_release(options: ReleaseOptions, progress=None) -> tuple[ReleaseSummary, Path]:
    """Builds the release `options` describe; `progress(n)` is told of each n judgments read. Returns the data's
    summary and the card's path."""
    judgments, out, repo, pilot = options.judgments, options.out, options.repo, options.pilot
    refuse_links(
        out, "README.md", PLOT, MANIFEST, MANIFEST_SCHEMA, "data"
    )  # before the long build: no write through a link
    failed = failed_pairs(judgments, options.allow_failed_pairs)
    profile, judges = release_profile(judgments, options.profile)
    profile = withhold_endpoint(profile)
    imported = import_record(judgments)
    if options.leave_out_other_text and not (imported and imported.graded_on_other_text):
        raise InputError(
            "--leave-out-other-text",
            0,
            "no import of these judgments checked the authors' clicked pass "
            "(import-labels --format crux-ratings --corpus): there is nothing to leave out",
        )
    leave_out = (OTHER_TEXT_STATUS,) if options.leave_out_other_text else ()
    agreement = read_agreement(options.agreement) if options.agreement else None  # before the long build
    # what the card needs of generation/ is taken before the judgments are read: from then on the path stays here
    prompt = get_prompt(profile.judge.prompt)
    if not imported:
        refuse_other_prompts(judges, prompt.id, judgments)
    made_by = pilot_for_release(pilot, judgment_config_hash(profile), prompt, bool(imported)) if pilot else None
    table_features = {table: features(table) for table in {c.table for c in CONFIGS}}
    kwargs = {"rows_per_file": options.rows_per_file} if options.rows_per_file else {}
    summary = build_release_data(
        judgments, options.questions, out, profile, progress=progress, leave_out=leave_out, runs=options.runs, **kwargs
    )
    if imported and leave_out:
        imported.left_out = summary.left_out
    judge = "; ".join(judges) or profile.judge.model
    agreement_section = (
        agreement_markdown(agreement, agreement_scope(agreement, judgments, out)) if agreement is not None else None
    )
    splits = list(summary.stats)
    reranker = (
        None
        if imported
        else profile.rerank.model
        + (
            " (stand-in: MiniLM bi-encoder cosine)"
            if profile.rerank.backend == "bi-encoder"
            else f" ({profile.rerank.backend})"
        )
    )
    training = settings_record(profile, summary.training.negatives, summary.training.retrieved)
    context = CardContext(
        repo=repo,
        profile=profile,
        profile_hash=profile.config_hash(),
        code_version=__version__,
        judge=judge,
        server_template=any("request shape chat" in j for j in judges),
        stand_in=any("stand-in" in j for j in judges) or profile.judge.backend == "bi-encoder",
        reranker=reranker,
        judge_precision=judge_precision(profile),
        prompt=CardPrompt(
            id=prompt.id,
            source=prompt.source,
            sha256=prompt.sha256,
            max_level=prompt.max_level,
            text=prompt.render("{question}", "{context}"),
        ),
        differences=differences(profile, imported),
        binary_threshold=binary_threshold(profile),
        imported=imported,
        rubric=rubric(prompt.user),
        agreement=agreement_section,
        pilot=pilot_markdown(made_by) if made_by else None,
        pilot_precisions=sorted({s.precision for s in made_by.record.settings.values()}) if made_by else [],
        training=training,
        failed_pairs=failed,
    )
    plot_levels(out, summary.stats)
    card = render_card(out, summary.rows, summary.stats, splits, context, table_features)
    manifest = Manifest(
        repo=repo,
        code_version=__version__,
        profile=profile,
        profile_hash=profile.config_hash(),
        models=Models(reranker=reranker, judge=judge, judge_precision=None if imported else judge_precision(profile)),
        prompt=None if imported else PromptRef(id=prompt.id, sha256=prompt.sha256),
        rows=summary.rows,
        stats=summary.stats,
        splits=splits,
        files=file_manifest(out),
        training=training,
        shards_revision=options.shards_revision,
        imported=imported,  # absent from the file unless set: an import's record, a pilot's, failed pairs
        pilot=made_by,
        failed_pairs=failed or None,
    )
    write_json(Path(out) / MANIFEST, manifest.as_json())
    write_json(Path(out) / MANIFEST_SCHEMA, manifest_schema())  # the text of manifest_json_schema()
    return summary, card
