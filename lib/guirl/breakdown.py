"""Print where the time of a whole ``make reproduce`` went (``make profile``).

    python -m guirl.breakdown [--profile tiny] [--top 20]

Reads every ``runs/<profile>/<notebook>.timing.json`` that :mod:`guirl.runner` wrote
(:mod:`guirl.timing`) and prints three tables: seconds per notebook and category (``other``: the
kernel's time in no measured phase: kernel start-up, tables, bootstraps, plots), the notebooks'
wall times, and the ``--top`` items (notebook, category, label) over all notebooks, largest first.
Stages trained side by side each count their own seconds, so a notebook's categories can sum to
more than its wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guirl.paths import runs_dir
from guirl.timing import CATEGORIES

__all__ = ["load_breakdowns", "format_report", "main"]

TIMING_GLOB = "*.timing.json"


def load_breakdowns(folder: Path) -> dict[str, dict[str, Any]]:
    """``{notebook: breakdown}`` of the ``*.timing.json`` files in ``folder``, in notebook order;
    a file that does not parse raises ``ValueError`` naming it."""
    out = {}
    for path in sorted(folder.glob(TIMING_GLOB)):
        try:
            data = json.loads(path.read_text())
        except ValueError as err:
            raise ValueError(f"{path}: not a timing file ({err}); delete it or rerun its notebook") from None
        out[str(data.get("notebook", path.name.removesuffix(".timing.json")))] = data
    return out


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def format_report(breakdowns: dict[str, dict[str, Any]], top: int = 20) -> str:
    """The three tables of the module doc as text."""
    cats = [c for c in [*CATEGORIES, "other"] if any(c in b.get("categories", {}) for b in breakdowns.values())]
    rows = []
    totals = dict.fromkeys(cats, 0.0)
    wall_total = 0.0
    for nb, b in breakdowns.items():
        c = b.get("categories", {})
        for k in cats:
            totals[k] += float(c.get(k, 0.0))
        wall_total += float(b.get("wall_s", 0.0))
        rows.append([nb, f"{b.get('wall_s', 0.0):.0f}", *(f"{c.get(k, 0.0):.0f}" for k in cats)])
    rows.append(["all", f"{wall_total:.0f}", *(f"{totals[k]:.0f}" for k in cats)])
    parts = ["seconds per notebook and category (wall: the runner's time of the notebook)"]
    parts.append(_table(["notebook", "wall", *cats], rows))
    items = [
        (float(it["seconds"]), nb, it["category"], it.get("label", ""), int(it.get("count", 0)))
        for nb, b in breakdowns.items()
        for it in b.get("items", [])
    ]
    items += [
        (float(b["categories"]["other"]), nb, "other", "", 0)
        for nb, b in breakdowns.items()
        if "other" in b.get("categories", {})
    ]
    items.sort(key=lambda t: -t[0])
    share = lambda s: f"{100 * s / wall_total:.1f}" if wall_total else "-"  # noqa: E731
    parts.append("")
    parts.append(f"top {top} items of {wall_total:.0f} s of notebook wall time")
    parts.append(
        _table(
            ["notebook", "category", "label", "seconds", "% of wall", "count"],
            [[nb, c, lab or "-", f"{s:.0f}", share(s), str(n)] for s, nb, c, lab, n in items[:top]],
        )
    )
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (0: printed; 1: no timing files)."""
    ap = argparse.ArgumentParser(prog="python -m guirl.breakdown", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="tiny", help="runs/<PROFILE>/ (default: tiny)")
    ap.add_argument("--top", type=int, default=20, help="items in the last table (default: 20)")
    args = ap.parse_args(argv)
    folder = runs_dir(args.profile)
    found = load_breakdowns(folder) if folder.is_dir() else {}
    if not found:
        print(f"no {TIMING_GLOB} under {folder}: run notebooks first (make reproduce)", file=sys.stderr)
        return 1
    print(format_report(found, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
