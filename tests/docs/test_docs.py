"""The documentation a reader follows: the generated reference pages are what the code generates now, every
relative link between the README and the docs pages (file and #anchor) leads somewhere, every repository path a page
names exists, and every page keeps its sentences short."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from builder.cli.reference import PAGES, stale_reference, write_reference

ROOT = Path(__file__).resolve().parents[2]
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
    from generation.profiles.reference import section_models
    from generation.storage.schema import columns

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
    from builder.release.contract import manifest_schema

    manifest_page, schema = (ROOT / "docs" / "reference" / "manifest.md").read_text(), manifest_schema()
    for name, record in {"manifest.json": schema, **schema["$defs"]}.items():  # each record's table, every field
        table = manifest_page.split(f"\n## `{name}`\n", 1)[1].split("\n## ", 1)[0]
        assert [f for f in record["properties"] if f"\n| `{f}` | " not in table] == [], name


def test_every_link_between_pages_leads_somewhere(doc_pages):
    assert ROOT / "docs" / "README.md" in doc_pages and len(doc_pages) > 10
    assert [broken for page in doc_pages for broken in broken_links(page)] == []


def test_every_link_of_the_changelog_leads_somewhere():
    """CHANGELOG.md's links into the docs (file and #anchor) follow the text when a page is split or a section moves."""
    assert broken_links(ROOT / "CHANGELOG.md") == []


# A hand-written page a person reads through; one that grows past it is split into pages by task. The generated
# reference pages (docs/reference/) are tables a reader searches, not pages read through.
MOST_PAGE_LINES = 420


def long_pages(pages) -> list[str]:
    """The hand-written pages over MOST_PAGE_LINES lines, with their line counts."""
    return [
        f"{page.relative_to(ROOT)}: {lines} lines"
        for page in pages
        if "reference" not in page.relative_to(ROOT).parts
        and (lines := len(page.read_text().splitlines())) > MOST_PAGE_LINES
    ]


def test_every_hand_written_page_is_short_enough_to_finish(doc_pages):
    assert long_pages(doc_pages) == []


def test_the_page_length_check_names_a_long_page_and_skips_the_reference(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "docs" / "reference").mkdir(parents=True)
    long, generated, short = tmp_path / "docs" / "long.md", tmp_path / "docs" / "reference" / "x.md", tmp_path / "a.md"
    for page, lines in ((long, MOST_PAGE_LINES + 1), (generated, 3 * MOST_PAGE_LINES), (short, MOST_PAGE_LINES)):
        page.write_text("line\n" * lines)
    assert long_pages([long, generated, short]) == [f"docs/long.md: {MOST_PAGE_LINES + 1} lines"]


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


# The sentence budget: prose only (code blocks, tables, headings and HTML comments skipped), a paragraph or a list
# item a block of its own, an inline code span one word, a link its text. A crude splitter: a sentence ends at . ! or ?
# followed by white space and a capital letter, quote or bracket ("e.g. the" and "2.6 s" do not end one).
MEDIAN_WORDS, MOST_WORDS = 25, 60
ANY_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", flags=re.S | re.M)
COMMENT = re.compile(r"<!--.*?-->", flags=re.S)
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK_TEXT = re.compile(r"\[([^\]]*)\]\([^)]*\)")
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z*\"'(\[])")


def prose_blocks(text: str) -> list[str]:
    """The page's paragraphs and list items, each joined into one line."""
    blocks, block = [], []
    for line in COMMENT.sub("", ANY_FENCE.sub("\n", text)).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "|")):
            blocks, block = blocks + [" ".join(block)] * bool(block), []
        elif LIST_ITEM.match(line):
            blocks, block = blocks + [" ".join(block)] * bool(block), [LIST_ITEM.sub("", line).strip()]
        else:
            block.append(stripped)
    return blocks + [" ".join(block)] * bool(block)


def sentence_lengths(text: str) -> list[tuple[int, str]]:
    """(words, sentence) for every prose sentence of a page; a word is a token holding a letter or a digit."""
    found = []
    for block in prose_blocks(text):
        for sentence in SENTENCE_END.split(LINK_TEXT.sub(r"\1", CODE_SPAN.sub("X", block))):
            words = sum(1 for token in sentence.split() if re.search(r"[A-Za-z0-9]", token))
            if words:
                found.append((words, sentence))
    return found


def over_budget(page: Path) -> list[str]:
    """What breaks the sentence budget on `page`: a median over MEDIAN_WORDS, each sentence over MOST_WORDS."""
    lengths = sentence_lengths(page.read_text())
    if not lengths:
        return []
    name = page.relative_to(ROOT)
    found = [f"{name}: {words} words: {sentence[:80]}..." for words, sentence in lengths if words > MOST_WORDS]
    median = statistics.median(words for words, _ in lengths)
    return found + [f"{name}: median sentence {median} words (budget {MEDIAN_WORDS})"] * (median > MEDIAN_WORDS)


def test_every_page_keeps_its_sentences_short(doc_pages):
    assert [problem for page in doc_pages for problem in over_budget(page)] == []


def test_the_sentence_splitter_skips_code_tables_and_headings_and_counts_a_long_sentence(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    long = " ".join(["word"] * 61) + "."
    page = tmp_path / "page.md"
    page.write_text(
        f"# A heading of many words that is no sentence\n\nShort one, e.g. this. See `a long --code span` here.\n\n"
        f"| a | table | row |\n\n```bash\n{long}\n```\n\n- An item\n  that wraps. [A link](x.md) ends it!\n\n{long}\n"
    )
    assert [words for words, _ in sentence_lengths(page.read_text())] == [4, 3, 4, 4, 61]
    assert over_budget(page) == [f"page.md: 61 words: {long[:80]}..."]
    page.write_text((long + "\n\n") * 2 + "Short.\n")
    assert over_budget(page)[-1] == "page.md: median sentence 61 words (budget 25)"


# A repository path a page names: a path under one of the repository's own folders, in a code span or code block, that
# names a folder (a trailing /), a file (a suffix), a glob, or sits in a dot-folder (`.ci/run`) -- so "docs/s" of
# a rate is no path; or one of its top-level files. A glob must match a file; `path::name` must name a function or
# class of that file.
REPO_FOLDERS = ("generation", "builder", "scripts", "tests", "docs", "expectations", ".github", ".ci")
REPO_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(re.escape(f) for f in REPO_FOLDERS)})/[\w./*-]*)(?:::(\w+))?")
ROOT_FILES = ("Makefile", "pyproject.toml", "constraints.txt", "constraints-vllm.txt", "CHANGELOG.md", "README.md")


def named_paths(text: str) -> list[tuple[str, str | None]]:
    """(path, name or None) for every repository path in the page's code spans and code blocks (its links are
    checked by `broken_links`, relative to the page)."""
    spans = [*CODE_SPAN.findall(text), *ANY_FENCE.findall(text)]
    found = [(m.group(1).rstrip("."), m.group(2)) for span in spans for m in REPO_PATH.finditer(span)]
    found = [(path, name) for path, name in found if re.search(r"/$|[.*][^/]*$|^\.", path)]
    found += [(span.strip("`"), None) for span in CODE_SPAN.findall(text) if span.strip("`") in ROOT_FILES]
    return list(dict.fromkeys(found))


def missing_paths(page: Path) -> list[str]:
    """The repository paths `page` names that do not exist (relative to the repository root)."""
    missing = []
    for path, name in named_paths(page.read_text()):
        matches = sorted(ROOT.glob(path)) if "*" in path else [ROOT / path] * (ROOT / path).exists()
        if not matches:
            missing.append(f"{page.relative_to(ROOT)}: {path}: no such file or folder")
        elif name and not re.search(rf"^\s*(?:async def|def|class) {name}\b", matches[0].read_text(), flags=re.M):
            missing.append(f"{page.relative_to(ROOT)}: {path}::{name}: no such function or class")
    return missing


def test_every_repository_path_a_page_names_exists(doc_pages):
    assert [missing for page in doc_pages for missing in missing_paths(page)] == []


def test_no_code_span_wraps_across_lines(doc_pages):
    """The path check and the sentence splitter read a code span on one line; one that wraps would escape both."""
    wrapped = [
        f"{page.relative_to(ROOT)}:{line.strip()[:60]}"
        for page in doc_pages
        for line in ANY_FENCE.sub("", page.read_text()).splitlines()
        if line.count("`") % 2
    ]
    assert wrapped == []


def test_the_path_check_finds_a_missing_file_glob_and_function(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "real.py").write_text("def real_test():\n    pass\n")
    page = tmp_path / "page.md"
    page.write_text(
        "Run `scripts/real.py`, `scripts/gone.py` and `tests/test_*.py`; see `scripts/real.py::real_test`,\n"
        "`scripts/real.py::gone_test`, `work/out`, `scripts/` and `Makefile`.\n\n"
        "```bash\npython scripts/real.py && python scripts/old.py  # 30 docs/s, `.ci/gone`\n```\n"
    )
    assert missing_paths(page) == [
        "page.md: scripts/gone.py: no such file or folder",
        "page.md: tests/test_*.py: no such file or folder",
        "page.md: scripts/real.py::gone_test: no such function or class",
        "page.md: .ci/gone: no such file or folder",
        "page.md: scripts/old.py: no such file or folder",
        "page.md: Makefile: no such file or folder",
    ]


def test_the_readme_cites_the_paper_as_the_release_card_does():
    from builder.release.assemble.snippets import PAPER_BIBTEX

    readme = (ROOT / "README.md").read_text()
    assert f"```bibtex\n{PAPER_BIBTEX}\n```" in readme


def test_the_readme_opens_with_the_two_commands():
    opening = "\n".join((ROOT / "README.md").read_text().splitlines()[:6])
    assert opening == (
        "# researchy-subq-judgments\n\n```bash\n"
        "make demo   # sets up .venv and runs every stage on the bundled sample (CPU, offline)\n"
        "make test   # sets up .venv and runs the tests\n```"
    )
