"""Check every row of the paper-results registry against the papers' text files.

Usage::

    .venv/bin/python scripts/check_paper_numbers.py PAPERS_DIR [--registry DIR] [--paper NAME]

``PAPERS_DIR`` holds the plain-text papers named in the registry's ``paper_file`` column
(``docs/papers.md``). For every row of :func:`guirl.papers.paper_results` the script reads line
``line`` (1-based) of ``paper_file`` and checks that ``value`` occurs on it as a whole number
token: not preceded by a digit or a decimal point and not followed by a digit or by a decimal
point and a digit (so ``58.4`` does not match inside ``58.41`` and ``2`` not inside ``2.42``).
Prints one line per failing row and a per-paper summary; exits 1 when a row fails (2 for a
missing paper file or a malformed registry), 0 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

from guirl.papers import PaperResultsError, paper_results


def value_on_line(value: str, line: str) -> bool:
    """Whether ``value`` occurs in ``line`` as a whole number token (module docstring)."""
    pat = rf"(?<![\d.]){re.escape(value)}(?!\d|\.\d)"
    return re.search(pat, line) is not None


def check(papers_dir: Path, registry: Path | None = None, paper: str | None = None) -> tuple[int, list[str]]:
    """``(n_rows, failures)``; a failure is ``"<paper_file>:<line>: ..."``."""
    df = paper_results(paper, directory=registry)
    texts: dict[str, list[str]] = {}
    failures: list[str] = []
    for r in df.itertuples(index=False):
        if r.paper_file not in texts:
            path = papers_dir / r.paper_file
            if not path.is_file():
                raise FileNotFoundError(f"{path}: paper text of {r.paper} not found")
            texts[r.paper_file] = path.read_text(encoding="utf-8").split("\n")
        lines = texts[r.paper_file]
        where = f"{r.paper_file}:{r.line}"
        if r.line > len(lines):
            failures.append(f"{where}: {r.paper} {r.table} [{r.row} | {r.column}]: file has only {len(lines)} lines")
        elif not value_on_line(r.value, lines[r.line - 1]):
            failures.append(
                f"{where}: {r.paper} {r.table} [{r.row} | {r.column}]: value {r.value} not on the line "
                f"{lines[r.line - 1][:120]!r}"
            )
    return len(df), failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("papers_dir", type=Path, help="folder with the papers' text files")
    ap.add_argument("--registry", type=Path, default=None, help="folder of <slug>.csv (default: the package's)")
    ap.add_argument("--paper", default=None, help="check one paper (short name or slug)")
    args = ap.parse_args(argv)
    try:
        n, failures = check(args.papers_dir, args.registry, args.paper)
    except (FileNotFoundError, PaperResultsError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    df = paper_results(args.paper, directory=args.registry)
    bad = Counter(f.split(": ", 2)[1].split(" ")[0] for f in failures)
    for f in failures:
        print(f)
    for name, g in df.groupby("paper", sort=False):
        print(f"{name}: {len(g)} rows, {len(g) - bad.get(str(name), 0)} found on their line")
    print(f"total: {n} rows, {n - len(failures)} ok, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
