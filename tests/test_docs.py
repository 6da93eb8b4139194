"""The documentation a reader follows: the generated reference pages are what the code generates now, and every
relative link between the README and the docs pages (file and #anchor) leads somewhere."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from builder.cli.reference import PAGES, stale_reference, write_reference

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, every character but letters, digits, `_`, `-` and
    spaces removed, each space a `-`, a repeated heading suffixed -1, -2 (github.com/Flet/github-slugger,
    index.js, `slugger` and `BananaSlug.prototype.slug`)."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", FENCE.sub("", text), flags=re.M):
        slug = re.sub(r"\s", "-", re.sub(r"[^A-Za-z0-9_ -]", "", heading.lower().strip()))
        repeats = sum(1 for a in anchors if re.fullmatch(re.escape(slug) + r"(-[0-9])*", a))
        anchors.add(f"{slug}-{repeats}" if repeats else slug)
    return anchors


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` (outside code blocks) whose file or anchor does not exist."""
    text = FENCE.sub("", page.read_text())
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # https:, mailto: -- not ours to check offline
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{page.relative_to(ROOT)}: {target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in heading_anchors(linked.read_text())):
            broken.append(f"{page.relative_to(ROOT)}: {target}: no heading with that anchor")
    return broken


@pytest.mark.subprocess
def test_the_reference_pages_are_what_the_code_generates():
    assert stale_reference(ROOT / "docs" / "reference") == [], "run python scripts/make_reference.py"
    check = subprocess.run(
        [sys.executable, "scripts/make_reference.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert check.returncode == 0, check.stderr


def test_a_stale_reference_page_is_named_and_rewritten(tmp_path):
    assert stale_reference(tmp_path) == [tmp_path / name for name in PAGES]
    assert write_reference(tmp_path) == [tmp_path / name for name in PAGES]
    (tmp_path / "cli.md").write_text("# Command reference\n")
    assert stale_reference(tmp_path) == [tmp_path / "cli.md"]
    assert write_reference(tmp_path) == [tmp_path / "cli.md"] and stale_reference(tmp_path) == []


def test_the_reference_pages_cover_every_command_key_and_column():
    import typer.main

    from builder.cli.main import app
    from generation.profile_reference import section_models
    from generation.schema import columns

    cli = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for name in typer.main.get_command(app).commands:
        assert f"## `researchy-subq {name}" in cli, name
    profiles = (ROOT / "docs" / "reference" / "profiles.md").read_text()
    for section, model in section_models():
        for key in model.model_fields:
            assert f"| `{section + '.' if section else ''}{key}` |" in profiles
    columns_page = (ROOT / "docs" / "reference" / "columns.md").read_text()
    for column in columns("judgments"):
        assert f"| `{column.name}` | " in columns_page


def test_every_link_between_pages_leads_somewhere(doc_pages):
    assert ROOT / "docs" / "README.md" in doc_pages and len(doc_pages) > 10
    assert [broken for page in doc_pages for broken in broken_links(page)] == []


def test_the_link_check_finds_a_missing_page_and_a_missing_anchor(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "a.md").write_text("# A page\n\n## Same, twice\n\n## Same, twice\n\n```bash\n# not a heading\n```\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#a-page) [twice](a.md#same-twice-1) [gone](c.md) [no anchor](a.md#not-a-heading) "
        "[here](#b) [web](https://example.org/x#y)\n\n# B\n"
    )
    assert broken_links(page) == ["b.md: c.md: no such file", "b.md: a.md#not-a-heading: no heading with that anchor"]


def test_every_docs_page_is_reachable_from_the_readme(doc_pages):
    seen, queue = set(), [ROOT / "README.md"]
    while queue:
        page = queue.pop()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        text = FENCE.sub("", page.read_text())
        queue += [
            (page.parent / t.partition("#")[0]).resolve()
            for t in LINK.findall(text)
            if not re.match(r"^[a-z]+:", t) and t.partition("#")[0]
        ]
    assert [p.relative_to(ROOT) for p in doc_pages if p not in seen] == []


UNFOLLOWABLE = re.compile(r"\bseeds/0\d\d\b|\bissues? #?\d+\b", flags=re.I)


def unfollowable_citations(paths) -> list[str]:
    """Citations a reader of the repository cannot open: the maintainers' paper folder (`seeds/00N`, not in the
    repository) and numbers of a tracker that is not public. Papers are cited by title or author, arXiv id and section;
    history belongs in CHANGELOG.md."""
    found = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if UNFOLLOWABLE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    return found


def test_code_docs_and_release_text_cite_what_a_reader_can_open(doc_pages):
    sources = [
        p
        for folder in ("generation", "builder", "scripts", "tests")
        for p in (ROOT / folder).rglob("*")
        if p.suffix in {".py", ".json", ".yaml", ".md"} and p.is_file()
    ]
    assert unfollowable_citations(sources + list(doc_pages)) == []


def test_the_citation_check_finds_a_seed_path_and_an_issue_number(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text("Figure 2 of seeds/" + "000.\nAs issue " + "23 measured.\nJu et al., arXiv:2510.21733, Figure 2.\n")
    assert [f.split(":")[1] for f in unfollowable_citations([page])] == ["1", "2"]
