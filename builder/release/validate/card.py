"""`validate`'s checks of the dataset card (README.md) against the data and the manifest:

- its YAML parses and declares every config with its exact num_examples and its own files;
- its statistics section is, verbatim, what the data's statistics render to;
- it names the manifest's models, profile and profile hash;
- the judge prompt it prints verbatim is the kit's prompt of the manifest's id, rendered as the card renders it,
  and both the card and the kit give it the sha256 the manifest records (a release of imported labels prints none);
- the rows of its configs table and the YAML's `download_size` / `num_bytes` are the data's;
- `level_distribution.png` carries the counts it draws (a PNG text chunk written by card.plot_levels) and they
  are the data's; its pixels are the plot of the data's statistics, rendered again (when this matplotlib is the
  one that drew it: another version may draw other pixels, then only the counts are compared).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import yaml

from builder.release.card_text import (
    PLOT,
    PLOT_COUNTS,
    STATS_BEGIN,
    STATS_END,
    arrow_bytes,
    config_rows,
    plot_counts,
    plot_levels,
    published_configs,
    stats_markdown,
)
from builder.release.contract import ConfigFiles, ConfigSchema, Manifest, SplitStats, card_entries
from builder.release.layout import CONFIGS
from generation.judging.prompts import get_prompt

PROMPT_BLOCK = re.compile(
    r"The judge prompt \(`(?P<id>[^`]*)`, (?P<source>.*?), sha256 `(?P<sha>[^`]*)`\), "
    r"verbatim:\n\n```text\n(?P<text>.*?)\n```",
    re.S,
)


def read_card(release: Path) -> tuple[dict | None, str, str | None]:
    try:
        text = (release / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, "", f"README.md: cannot read ({e})"
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return None, text, "README.md has no YAML front matter between --- lines"
    head, body = text[4:].split("\n---\n", 1)
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as e:
        return None, body, f"README.md YAML does not parse: {str(e).splitlines()[0]}"
    return (data if isinstance(data, dict) else None), body, None if isinstance(data, dict) else "YAML is not a mapping"


def check_card(
    release: Path, manifest: Manifest, rows: dict, stats: dict[str, SplitStats], splits: list[str], report
) -> dict | None:
    """The card's checks, in the report's order; the card's YAML (None when it has none), for the load check."""
    yaml_check = report.check(
        "README.md YAML parses and declares every config with exact num_examples and its own files"
    )
    data, body, problem = read_card(release)
    if problem:
        yaml_check.fail(problem)
    if data is not None:
        infos, problems = card_entries(ConfigSchema, data.get("dataset_info"))
        files, problems_files = card_entries(ConfigFiles, data.get("configs"))
        for where, line in [*(("dataset_info", p) for p in problems), *(("configs", p) for p in problems_files)]:
            yaml_check.fail(f"README.md YAML {where} {line}")
        declared = {i.config_name: {s.name: s.num_examples for s in i.splits} for i in infos}
        for c in published_configs(rows, splits):
            for split, n in rows[c.name].items():
                if n and declared.get(c.name, {}).get(split) != n:
                    yaml_check.fail(
                        f"{c.name}/{split}: num_examples {declared.get(c.name, {}).get(split)} in the card, "
                        f"{n} in the data"
                    )
        known = {c.name: c for c in CONFIGS}
        for entry in files:
            if entry.config_name not in known:
                yaml_check.fail(f"configs: {entry.config_name!r} is not a config of the layout")
                continue
            for split_files in entry.data_files:
                wanted = known[entry.config_name].pattern(split_files.split)
                if split_files.path != wanted:
                    yaml_check.fail(
                        f"configs: {entry.config_name} points at {split_files.path!r}, its files are {wanted!r}"
                    )
    numbers = report.check("every number in the card's statistics equals the data")
    section = body[body.find(STATS_BEGIN) : body.find(STATS_END) + len(STATS_END)] if STATS_BEGIN in body else ""
    expected = stats_markdown(stats)
    if section != expected:
        for line_card, line_data in zip(section.splitlines() or [""], expected.splitlines()):
            if line_card != line_data:
                numbers.fail(f"card says {line_card!r}, data gives {line_data!r}")
        if len(section.splitlines()) != len(expected.splitlines()):
            numbers.fail(
                f"statistics section has {len(section.splitlines())} lines, expected {len(expected.splitlines())}"
            )
    names = report.check("the card names the manifest's models, profile and profile hash")
    models = manifest.models
    for what, value in (
        ("judge", models.judge),
        ("reranker", models.reranker),
        ("profile", f"Profile `{manifest.profile.name}`"),
        ("profile hash", manifest.profile_hash),
        *((("judge precision", models.judge_precision),) if models.judge_precision is not None else ()),
    ):
        if (not value or str(value) not in body) and not (what == "reranker" and manifest.imported):
            names.fail(f"the card does not state the manifest's {what} {value!r}")
    check_prompt(
        body, manifest, report.check("the card's verbatim judge prompt is the kit's, with the manifest's sha256")
    )
    check_figures(
        release,
        rows,
        splits,
        body,
        data,
        report.check("the card's configs table, download sizes and byte counts equal the data"),
    )
    check_plot(release, stats, report.check(f"{PLOT} draws the data's level counts"))
    return data


def check_prompt(body: str, manifest: Manifest, check) -> None:
    stated = manifest.prompt
    stated_id, stated_sha = (stated.id, stated.sha256) if stated is not None else (None, None)
    block = PROMPT_BLOCK.search(body)
    if manifest.imported:  # imported labels: the kit built no prompt, and the card must not print one
        if block is not None or stated:
            check.fail("README.md or manifest.json states a judge prompt, but the labels were imported (no prompt)")
        else:
            check.skip("imported labels: no judge prompt (and none stated in README.md or manifest.json)")
        return
    if block is None:
        check.fail(
            'README.md: no verbatim judge prompt block ("The judge prompt (`ID`, SOURCE, sha256 `HASH`), verbatim:")'
        )
        return
    if (block["id"], block["sha"]) != (stated_id, stated_sha):
        check.fail(
            f"README.md prints prompt {block['id']} sha256 {block['sha']}; manifest.json records "
            f"{stated_id} sha256 {stated_sha}"
        )
    try:
        prompt = get_prompt(str(stated_id))
    except KeyError:
        check.fail(f"manifest.json: prompt {stated_id!r} is none of the kit's: its text cannot be checked")
        return
    if prompt.sha256 != stated_sha:
        check.fail(f"manifest.json: sha256 {stated_sha} is not the kit's prompt {prompt.id} ({prompt.sha256})")
    printed, kit = block["text"], prompt.render("{question}", "{context}")
    if printed != kit:
        line = next(
            (i for i, (a, b) in enumerate(zip(printed.splitlines(), kit.splitlines())) if a != b),
            min(len(printed.splitlines()), len(kit.splitlines())),
        )
        check.fail(
            f"README.md: the verbatim prompt is not {prompt.id}'s text (sha256 {prompt.sha256}): first "
            f"difference at its line {line + 1}"
        )


def check_figures(release: Path, rows: dict, splits: list[str], body: str, data: dict | None, check) -> None:
    for entry in config_rows(rows, splits):
        line = f"| `{entry['name']}` | {entry['rows']} | {entry['description']} |"
        if line not in body:
            stated = next((x for x in body.splitlines() if x.startswith(f"| `{entry['name']}` | ")), None)
            check.fail(f"README.md configs table: {stated!r} where the data gives {line!r}")
    if data is None:
        return
    infos = {i.config_name: i for i in card_entries(ConfigSchema, data.get("dataset_info"))[0]}
    for c in published_configs(rows, splits):
        info = infos.get(c.name)
        present = [s for s in splits if rows.get(c.name, {}).get(s, 0)]
        size = sum(p.stat().st_size for s in present for p in c.files(release, s))
        if info is None or info.download_size != size:
            check.fail(
                f"README.md YAML {c.name}: download_size {info and info.download_size}, its files are {size:,} bytes"
            )
        declared = {s.name: s.num_bytes for s in info.splits} if info is not None else {}
        for split in present:
            try:
                recorded = arrow_bytes(c.files(release, split))
            except (OSError, ValueError) as e:  # a footer without the count: reported, the file checks say why
                check.fail(f"{c.name}/{split}: {e}")
                continue
            if declared.get(split) != recorded:
                check.fail(
                    f"README.md YAML {c.name}/{split}: num_bytes {declared.get(split)}, the files' footers give "
                    f"{recorded:,}"
                )


def check_plot(release: Path, stats: dict[str, SplitStats], check) -> None:
    import matplotlib
    import numpy as np
    from PIL import Image

    path = release / PLOT
    try:
        with Image.open(path) as image:
            text, pixels = dict(getattr(image, "text", {}) or {}), np.asarray(image.convert("RGBA"))
    except (OSError, ValueError) as e:
        check.fail(f"{PLOT}: not a readable PNG ({e})")
        return
    try:
        drawn = json.loads(text.get(PLOT_COUNTS, "null"))
    except json.JSONDecodeError:
        drawn = "unreadable"
    data = plot_counts(stats)
    if drawn != json.loads(json.dumps(data, sort_keys=True)):
        drawn = drawn if isinstance(drawn, dict) else {}
        differ = [
            f"{split} {level}: {(drawn.get(split) or {}).get(level)} drawn, {n:,} in the data"
            for split, counts in data.items()
            for level, n in counts.items()
            if (drawn.get(split) or {}).get(level) != n
        ]
        check.fail(
            f"{PLOT}: its {PLOT_COUNTS!r} chunk states other counts than the data's: {'; '.join(differ[:3])}"
            + (f" ({len(differ)} differ)" if len(differ) > 3 else "")
        )
        return
    if matplotlib.__version__ not in text.get("Software", ""):
        check.note = (
            f"{PLOT} drawn by {text.get('Software')!r}, not this matplotlib {matplotlib.__version__}: "
            "its counts were compared, not its pixels"
        )
        return
    with tempfile.TemporaryDirectory() as folder:
        with Image.open(plot_levels(Path(folder), stats)) as image:
            expected = np.asarray(image.convert("RGBA"))
    if expected.shape != pixels.shape or not np.array_equal(expected, pixels):
        check.fail(f"{PLOT}: its pixels are not the plot of its counts (drawn again from the data, they differ)")
