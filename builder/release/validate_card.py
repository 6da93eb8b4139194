"""`validate`'s checks of what the card states beyond its statistics section (compared verbatim in validate.py):

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

from builder.release.card import (
    PLOT,
    PLOT_COUNTS,
    arrow_bytes,
    config_rows,
    plot_counts,
    plot_levels,
    published_configs,
)
from generation.judging.prompts import get_prompt

PROMPT_BLOCK = re.compile(r"The judge prompt \(`(?P<id>[^`]*)`, (?P<source>.*?), sha256 `(?P<sha>[^`]*)`\), "
                          r"verbatim:\n\n```text\n(?P<text>.*?)\n```", re.S)


def check_prompt(body: str, manifest: dict, check) -> None:
    stated = manifest.get("prompt") if isinstance(manifest.get("prompt"), dict) else {}
    block = PROMPT_BLOCK.search(body)
    if manifest.get("imported"):  # imported labels: the kit built no prompt, and the card must not print one
        if block is not None or stated:
            check.fail("README.md or manifest.json states a judge prompt, but the labels were imported (no prompt)")
        check.note = "imported labels: no judge prompt"
        return
    if block is None:
        check.fail("README.md: no verbatim judge prompt block (\"The judge prompt (`ID`, SOURCE, sha256 `HASH`), "
                   "verbatim:\")")
        return
    if (block["id"], block["sha"]) != (stated.get("id"), stated.get("sha256")):
        check.fail(f"README.md prints prompt {block['id']} sha256 {block['sha']}; manifest.json records "
                   f"{stated.get('id')} sha256 {stated.get('sha256')}")
    try:
        prompt = get_prompt(str(stated.get("id")))
    except KeyError:
        check.fail(f"manifest.json: prompt {stated.get('id')!r} is none of the kit's: its text cannot be checked")
        return
    if prompt.sha256 != stated.get("sha256"):
        check.fail(f"manifest.json: sha256 {stated.get('sha256')} is not the kit's prompt {prompt.id} ({prompt.sha256})")
    printed, kit = block["text"], prompt.render("{question}", "{context}")
    if printed != kit:
        line = next((i for i, (a, b) in enumerate(zip(printed.splitlines(), kit.splitlines())) if a != b),
                    min(len(printed.splitlines()), len(kit.splitlines())))
        check.fail(f"README.md: the verbatim prompt is not {prompt.id}'s text (sha256 {prompt.sha256}): first "
                   f"difference at its line {line + 1}")


def check_figures(release: Path, rows: dict, splits: list[str], body: str, data: dict | None, check) -> None:
    for entry in config_rows(rows, splits):
        line = f"| `{entry['name']}` | {entry['rows']} | {entry['description']} |"
        if line not in body:
            stated = next((x for x in body.splitlines() if x.startswith(f"| `{entry['name']}` | ")), None)
            check.fail(f"README.md configs table: {stated!r} where the data gives {line!r}")
    if data is None:
        return
    infos = {i.get("config_name"): i for i in data.get("dataset_info", []) or [] if isinstance(i, dict)}
    for c in published_configs(rows, splits):
        info = infos.get(c.name) or {}
        present = [s for s in splits if rows.get(c.name, {}).get(s, 0)]
        size = sum(p.stat().st_size for s in present for p in c.files(release, s))
        if info.get("download_size") != size:
            check.fail(f"README.md YAML {c.name}: download_size {info.get('download_size')}, its files are {size:,} bytes")
        stated = {s.get("name"): s.get("num_bytes") for s in info.get("splits", []) or [] if isinstance(s, dict)}
        for split in present:
            try:
                recorded = arrow_bytes(c.files(release, split))
            except (OSError, ValueError) as e:  # a footer without the count: reported, the file checks say why
                check.fail(f"{c.name}/{split}: {e}")
                continue
            if stated.get(split) != recorded:
                check.fail(f"README.md YAML {c.name}/{split}: num_bytes {stated.get(split)}, the files' footers give "
                           f"{recorded:,}")


def check_plot(release: Path, stats: dict, check) -> None:
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
        differ = [f"{split} {level}: {(drawn.get(split) or {}).get(level)} drawn, {n:,} in the data"
                  for split, counts in data.items() for level, n in counts.items()
                  if (drawn.get(split) or {}).get(level) != n]
        check.fail(f"{PLOT}: its {PLOT_COUNTS!r} chunk states other counts than the data's: {'; '.join(differ[:3])}"
                   + (f" ({len(differ)} differ)" if len(differ) > 3 else ""))
        return
    if matplotlib.__version__ not in text.get("Software", ""):
        check.note = f"{PLOT} drawn by {text.get('Software')!r}, not this matplotlib {matplotlib.__version__}: " \
                     "its counts were compared, not its pixels"
        return
    with tempfile.TemporaryDirectory() as folder:
        with Image.open(plot_levels(Path(folder), stats)) as image:
            expected = np.asarray(image.convert("RGBA"))
    if expected.shape != pixels.shape or not np.array_equal(expected, pixels):
        check.fail(f"{PLOT}: its pixels are not the plot of its counts (drawn again from the data, they differ)")
