"""The repository cites only its own files: no docstring, comment, config or document points at notes
outside the checkout (the project's shared folder), and every ``docs/*.md`` it names exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

# Where citations live: the library, tests, configs, notebooks, docs, the README, and the files that
# install the environment. Paths are relative to the repository root.
SCANNED = ("lib", "tests", "configs", "notebooks", "docs", "scripts", "requirements")
SCANNED_FILES = ("README.md", "Makefile", "environment.yml", "pyproject.toml")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".ipynb", ".txt", ".toml", ".cfg", ""}

# Written in pieces so that this file does not match its own patterns (it is scanned too).
FORBIDDEN = (
    "shared" + "/notes",  # the project's notes folder, outside the repository
    "/work" + "/shared",  # its absolute path
    "../" + "shared",  # its path relative to a checkout
    "stack-facts" + ".md",  # the notes file whose facts moved to docs/stack.md
)
DOC_REF = re.compile(r"\bdocs/([A-Za-z0-9_.-]+\.md)\b")


def tracked_files() -> list[Path]:
    """Files git tracks or would add (untracked but not ignored) under the scanned paths."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *SCANNED, *SCANNED_FILES],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = [REPO / line for line in out.splitlines() if line]
    return [f for f in files if f.is_file() and f.suffix in TEXT_SUFFIXES]


def external_citations(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line of ``text`` that contains a forbidden citation."""
    return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if any(f in line for f in FORBIDDEN)]


@pytest.mark.parametrize(
    "line, bad",
    [
        # (upper case in this file, lowered for the check, so that this file does not match itself)
        ("see ``SHARED/NOTES/STACK-FACTS.MD``".lower(), True),  # the relative notes folder
        ("# /WORK/SHARED/NOTES/DATASET-FORMATS.MD".lower(), True),  # the absolute path
        ("in ../SHARED/PAPERS/ (see its README)".lower(), True),  # relative to a checkout
        ("(see STACK-FACTS.MD)".lower(), True),  # the notes file by name
        ("see ``docs/stack.md``", False),  # a repository file
        ("shared by metrics and rewards", False),  # the word alone is fine
    ],
)
def test_detector(line: str, bad: bool) -> None:
    assert bool(external_citations(line)) is bad


def test_scan_covers_the_library_tests_configs_and_docs() -> None:
    names = {f.relative_to(REPO).as_posix() for f in tracked_files()}
    for expected in ("README.md", "lib/guirl/geometry.py", "tests/conftest.py", "configs/profiles/tiny.yaml"):
        assert expected in names
    assert any(n.startswith("notebooks/") and n.endswith(".ipynb") for n in names)
    assert any(n.startswith("docs/") for n in names)


def test_no_file_cites_notes_outside_the_repository() -> None:
    hits = [
        f"{f.relative_to(REPO)}:{i}: {line}"
        for f in tracked_files()
        for i, line in external_citations(f.read_text(encoding="utf-8", errors="replace"))
    ]
    assert hits == [], "cite a file of this repository (docs/...) instead:\n" + "\n".join(hits)


def test_cited_docs_exist() -> None:
    missing = sorted(
        f"{f.relative_to(REPO)}: docs/{name}"
        for f in tracked_files()
        for name in DOC_REF.findall(f.read_text(encoding="utf-8", errors="replace"))
        if not (REPO / "docs" / name).is_file()
    )
    assert missing == []
