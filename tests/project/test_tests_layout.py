"""The tests' own layout, as docs/architecture.md ("Where a module's tests are") states it: every folder of tests/
mirrors a folder or module of the repository at the same path, or is one of the cross-cutting folders the page's
table lists; no test file sits loose at the top; every folder is a package (two test_x.py in two folders need one)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PAGE = ROOT / "docs" / "architecture.md"


def folders_of(tests: Path = TESTS) -> list[Path]:
    return sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__" and "fixtures" not in p.parts)


def cross_cutting_folders(page: Path = PAGE) -> set[str]:
    """The folders the page's table lists: `| \\`tests/NAME/\\` | what it tests |`."""
    return set(re.findall(r"^\| `tests/([\w/]+)/` \|", page.read_text(), flags=re.M))


def misplaced(root: Path, cross_cutting: set[str]) -> list[str]:
    """Each folder of root/tests that neither mirrors root/PATH (a folder, or a module PATH.py) nor is listed, each
    test file loose at the top, and each folder without an __init__.py."""
    tests = root / "tests"
    found = [f"tests/{p.name}: a test file outside the folders" for p in tests.glob("test_*.py")]
    for folder in folders_of(tests):
        path = folder.relative_to(tests)
        listed = path.parts[0] in cross_cutting
        if not listed and not ((root / path).is_dir() or (root / path).with_suffix(".py").is_file()):
            found.append(f"tests/{path.as_posix()}/: mirrors no {path.as_posix()}/ or .py, and is not in the table")
        if not (folder / "__init__.py").is_file():
            found.append(f"tests/{path.as_posix()}/: no __init__.py")
    return found


def test_every_test_folder_mirrors_a_package_or_is_listed_as_cross_cutting():
    listed = cross_cutting_folders()
    assert listed >= {"end_to_end", "reliability", "docs", "project"}
    assert [name for name in sorted(listed) if not (TESTS / name).is_dir()] == [], "a listed folder that is not there"
    assert misplaced(ROOT, listed) == []


def test_the_layout_check_finds_a_loose_file_a_stray_folder_and_a_missing_package(tmp_path):
    (tmp_path / "generation" / "backends").mkdir(parents=True)
    (tmp_path / "tests" / "generation" / "backends").mkdir(parents=True)
    (tmp_path / "tests" / "generation" / "__init__.py").write_text("")
    (tmp_path / "tests" / "stray").mkdir()
    (tmp_path / "tests" / "stray" / "__init__.py").write_text("")
    (tmp_path / "tests" / "end_to_end").mkdir()
    (tmp_path / "tests" / "end_to_end" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_loose.py").write_text("")
    assert misplaced(tmp_path, {"end_to_end"}) == [
        "tests/test_loose.py: a test file outside the folders",
        "tests/generation/backends/: no __init__.py",
        "tests/stray/: mirrors no stray/ or .py, and is not in the table",
    ]
