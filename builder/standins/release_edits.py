"""Editing a built release in place, then RE-SEALING it as a careless merge script or hand fix would: checksums,
sizes and row counts in the manifest, the statistics in the manifest and the card, the YAML's counts and sizes and the
plot made consistent with the edited data again. release_faults.py builds its corruptions from these."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from builder.release.contract import parse_manifest, read_manifest
from builder.release.layout import MANIFEST


def data_file(release: Path, folder: str, split: str = "train") -> Path:
    return sorted((release / "data" / folder).glob(f"{split}-*.parquet"))[0]


def rewrite(path: Path, change) -> None:
    """The file with `change` applied, written again by the release's own writer (footer counts included)."""
    from builder.release.layout import open_parquet_writer

    table = change(pq.read_table(path))
    with open_parquet_writer(path, table.schema) as writer:
        writer.write_table(table)


def set_column(table: pa.Table, name: str, values) -> pa.Table:
    """`table` with column `name` replaced, its field (type, nullability, description) kept."""
    field = table.schema.field(name)
    return table.set_column(table.schema.get_field_index(name), field, values.cast(field.type))


def set_first(table: pa.Table, name: str, value, kind=None) -> pa.Table:
    """`table` with the first value of column `name` replaced."""
    rest = table[name].combine_chunks().slice(1)
    return set_column(table, name, pa.concat_arrays([pa.array([value], kind or rest.type), rest]))


def set_where(table: pa.Table, name: str, mask, value) -> pa.Table:
    """`table` with column `name` set to `value` on the first row where `mask` holds."""
    row = pc.index(mask, True).as_py()
    values = table[name].to_pylist()
    values[row] = value
    return set_column(table, name, pa.array(values, table.schema.field(name).type))


def reseal(release: Path, plot: bool = True) -> None:
    """Makes everything but the semantics consistent with the data again: the manifest's statistics, rows and
    file entries, the card's statistics section, configs table and YAML, and (with `plot`) the level plot."""
    from huggingface_hub import DatasetCard

    from builder.release.assemble.card import PRETTY_NAME, card_data
    from builder.release.assemble.data_files import file_manifest, write_json
    from builder.release.card_text import STATS_BEGIN, STATS_END, config_rows, plot_levels, stats_markdown
    from builder.release.layout import CONFIGS
    from builder.release.validate.folder import validate
    from generation.storage.schema import features

    report = validate(release, load=False)  # what the data gives, whatever it fails
    manifest = read_manifest(release)
    splits = manifest.splits
    stats = {split: s.model_dump() for split, s in report.stats.items()}
    resealed = {**manifest.as_json(), "stats": stats, "rows": report.rows, "files": file_manifest(release)}
    write_json(release / MANIFEST, parse_manifest(resealed).as_json())
    card = DatasetCard.load(release / "README.md")
    body = card.text
    start, end = body.index(STATS_BEGIN), body.index(STATS_END) + len(STATS_END)
    body = body[:start] + stats_markdown(report.stats) + body[end:]
    for entry in config_rows(report.rows, splits):
        body = re.sub(
            rf"^\| `{re.escape(entry['name'])}` \| [^|]* \|",
            f"| `{entry['name']}` | {entry['rows']} |",
            body,
            count=1,
            flags=re.M,
        )
    card.text = body
    card.data = card_data(report.rows, splits, PRETTY_NAME, release, {c.table: features(c.table) for c in CONFIGS})
    card.save(release / "README.md")
    if plot:
        plot_levels(release, report.stats)


def sealed(corrupt, plot: bool = True):
    def apply(release: Path) -> None:
        corrupt(release)
        reseal(release, plot)

    return apply


def edit_card(release: Path, old: str, new: str, count: int = 1) -> None:
    text = (release / "README.md").read_text()
    if old not in text:
        raise ValueError(f"{old!r} is not in {release / 'README.md'}")
    (release / "README.md").write_text(text.replace(old, new, count))


def queries_rows(release: Path) -> int:
    return read_manifest(release).rows["queries"]["train"]


def prompt_hash_everywhere(release: Path, new: str) -> None:
    manifest = read_manifest(release)
    assert manifest.prompt is not None, "a release the kit judged names its prompt"
    old = manifest.prompt.sha256
    changed = manifest.model_copy(update={"prompt": manifest.prompt.model_copy(update={"sha256": new})})
    (release / MANIFEST).write_text(json.dumps(changed.as_json(), default=str))
    edit_card(release, old, new, count=-1)


def plot_of_other_counts(release: Path, keep_counts_chunk: bool) -> None:
    """The plot of other statistics (level 5 and 0 swapped); with `keep_counts_chunk`, its text chunk still
    states the true counts, so only its pixels are wrong."""
    from PIL import Image, PngImagePlugin

    from builder.release.card_text import PLOT, plot_levels

    stats = read_manifest(release).stats
    with Image.open(release / PLOT) as image:
        chunks = dict(getattr(image, "text", {}))  # a PNG's text chunks
    for s in stats.values():
        s.table1[0].count, s.table1[5].count = s.table1[5].count, s.table1[0].count
    plot_levels(release, stats)
    if keep_counts_chunk:
        info = PngImagePlugin.PngInfo()
        for key, value in chunks.items():
            info.add_text(key, value)
        with Image.open(release / PLOT) as image:
            image.load()
            image.save(release / PLOT, pnginfo=info)


def other_url_hash(t: pa.Table) -> pa.Table:
    return set_first(t, "url_hash", "0" * 32)


def first_list(table: pa.Table, name: str, change) -> list:
    return change(table[name][0].as_py())


def edit_manifest(release: Path, change) -> None:
    manifest = json.loads((release / MANIFEST).read_text())
    change(manifest)
    (release / MANIFEST).write_text(json.dumps(manifest))
