"""The dataset card (README.md with `configs` and `dataset_info` YAML), its statistics section, the
level plot and manifest.json, all from the numbers computed while building."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from huggingface_hub import DatasetCard, DatasetCardData

from builder.release.assemble.snippets import PAPER_BIBTEX, field_tables, loading_snippets
from builder.release.assemble.training_configs import LIST_ORDER
from builder.release.card_statements import card_statements
from builder.release.card_text import arrow_bytes, config_rows, published_configs, splits_with_rows, stats_markdown
from builder.release.contract import CardContext, ConfigFiles, SplitFiles
from builder.release.layout import DEFAULT_CONFIG
from builder.release.ranking_documents import negatives_by_split, ranking_documents
from generation.storage.atomic_files import replace_file

# Package data (pyproject's package-data), read through importlib.resources so an installed wheel builds releases.
TEMPLATE = ("cards", "dataset_card.md")
LICENSE = "cdla-permissive-2.0"  # Researchy Questions' licence, which the judgments derive from
SOURCE_DATASET = "corbyrosset/researchy_questions"
PRETTY_NAME = "Researchy Questions sub-question judgments"


def template_text() -> str:
    return resources.files("builder.release.assemble").joinpath(*TEMPLATE).read_text(encoding="utf-8")


def card_data(rows: dict, splits: list[str], pretty_name: str, release: Path, features: dict) -> DatasetCardData:
    configs = published_configs(rows, splits)
    data = DatasetCardData(
        language=["en"],
        license=LICENSE,
        pretty_name=pretty_name,
        annotations_creators=["machine-generated"],
        language_creators=["found"],
        multilinguality=["monolingual"],
        source_datasets=[f"extended|{SOURCE_DATASET}"],
        task_categories=["text-retrieval"],
        task_ids=["document-retrieval"],
        tags=[
            "relevance-judgments",
            "llm-as-judge",
            "researchy-questions",
            "clueweb22",
            "sub-questions",
            "beir",
            "mteb",
        ],
        size_categories=[size_category(rows.get("judgments", {}))],
        configs=[
            ConfigFiles(
                config_name=c.name,
                default=True if c.name == DEFAULT_CONFIG else None,
                data_files=[SplitFiles(split=s, path=c.pattern(s)) for s in splits_with_rows(rows, c.name, splits)],
            ).model_dump()
            for c in configs
        ],
    )
    infos = {}
    for c in configs:
        present = splits_with_rows(rows, c.name, splits)
        split_infos = {
            s: SplitInfo(name=s, num_examples=rows[c.name][s], num_bytes=arrow_bytes(c.files(release, s)))
            for s in present
        }
        infos[c.name] = DatasetInfo(
            features=features[c.table],
            splits=SplitDict(split_infos),
            download_size=sum(p.stat().st_size for s in present for p in c.files(release, s)),
            dataset_size=sum(i.num_bytes for i in split_infos.values()),
        )
    DatasetInfosDict(infos).to_dataset_card_data(data)
    return data


def size_category(rows_by_split: dict) -> str:
    n = sum(rows_by_split.values())
    for limit, label in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
        (100_000_000, "10M<n<100M"),
    ):
        if n < limit:
            return label
    return "100M<n<1B"


def render_card(out: Path, rows: dict, stats: dict, splits: list[str], context: CardContext, features: dict) -> Path:
    data = card_data(rows, splits, PRETTY_NAME, Path(out), features)
    published = [c.name for c in published_configs(rows, splits)]
    card = DatasetCard.from_template(
        data,
        template_str=template_text(),
        statistics=stats_markdown(stats),
        configs=config_rows(rows, splits),
        splits=splits,
        fields=field_tables(published),
        snippets=loading_snippets(context.repo, published, splits, context.binary_threshold, ranking_documents(out)),
        statements=card_statements(
            LIST_ORDER,
            context.training,
            negatives_by_split(out),
            {s: rows.get("unparsed", {}).get(s, 0) for s in splits},
        ),
        license_name=LICENSE,
        source_dataset=SOURCE_DATASET,
        paper_bibtex=PAPER_BIBTEX,
        **dict(context),  # the fields as they are (the profile stays a Profile for the template)
    )
    return replace_file(out, "README.md", card.save)
