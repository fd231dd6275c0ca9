"""What a run concludes, and whether two runs conclude the same (host robustness).

Every table a notebook writes through :class:`guirl.report.Report` that marks differences has a
``resolved`` column (or ``<prefix>resolved``) beside its ``lo`` / ``hi`` interval; the sidecar
``<table>.json`` keeps the rows. A **claim** is one such mark: the row's identifying text fields
(model, split, history, A / B, category, ...), and its **verdict** read off the interval:
``"+"`` (``lo > 0``), ``"-"`` (``hi < 0``) or ``"0"`` (unresolved). Two runs of the same commit
(another host, another thread count, ``runtime.threads``) reach the same conclusions when every
claim has the same verdict in both; the numbers themselves may differ.

    python -m guirl.conclusions figures/tiny /elsewhere/figures/tiny

prints the claims whose verdicts differ and a count line; exit status 0 when all agree, 1 when
not, 2 when a folder has no claims.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["CLAIM_COLUMNS", "compare_runs", "main", "resolved_claims", "verdict"]

#: Columns of :func:`resolved_claims`.
CLAIM_COLUMNS = ("notebook", "table", "key", "column", "diff", "lo", "hi", "verdict")
#: Text fields that describe a result rather than identify its row.
_NOT_KEYS = ("verdict", "location", "per_seed", "note", "unit")


def verdict(lo: float, hi: float) -> str:
    """``"+"`` when the interval is above 0, ``"-"`` when below, ``"0"`` when it contains 0."""
    return "+" if lo > 0 else "-" if hi < 0 else "0"


def _key(row: dict[str, Any]) -> str:
    """The row's identifying fields: every text or integer field except verdicts and notes."""
    fields = {
        k: v
        for k, v in row.items()
        if isinstance(v, (str, int))
        and not isinstance(v, bool)
        and not k.startswith(_NOT_KEYS)
        and not k.startswith("n_")
    }
    return json.dumps(fields, sort_keys=True)


def resolved_claims(folder: str | Path) -> pd.DataFrame:
    """Every resolved mark under ``folder`` (a ``figures/<profile>`` folder, or one notebook's),
    one row per (table row, ``resolved`` column): :data:`CLAIM_COLUMNS`; ``diff`` is the
    ``diff`` / ``<prefix>diff`` cell when the table has one (else the interval's midpoint)."""
    rows = []
    for path in sorted(Path(folder).rglob("*.json")):
        try:
            side = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a readable sidecar: {e}") from e
        if not isinstance(side, dict) or side.get("kind") != "table" or not isinstance(side.get("data"), list):
            continue
        for rec in side["data"]:
            for col in [c for c in rec if c.endswith("resolved")]:
                prefix = col[: -len("resolved")]
                lo, hi = rec.get(f"{prefix}lo"), rec.get(f"{prefix}hi")
                if lo is None or hi is None:
                    raise ValueError(f"{path}: column {col!r} has no {prefix}lo / {prefix}hi")
                diff = rec.get(f"{prefix}diff")
                rows.append(
                    {
                        "notebook": side.get("notebook", path.parent.name),
                        "table": side.get("name", path.stem),
                        "key": _key(rec),
                        "column": col,
                        "diff": float(diff) if diff is not None else (float(lo) + float(hi)) / 2,
                        "lo": float(lo),
                        "hi": float(hi),
                        "verdict": verdict(float(lo), float(hi)),
                    }
                )
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))


def compare_runs(a: str | Path, b: str | Path) -> pd.DataFrame:
    """The claims of two runs side by side (outer join on notebook, table, key and column):
    ``verdict_a`` / ``verdict_b`` (``None`` where a run lacks the claim), ``diff_a`` / ``diff_b``
    and ``same`` (both runs have the claim with the same verdict)."""
    ca, cb = resolved_claims(a), resolved_claims(b)
    on = ["notebook", "table", "key", "column"]
    both = ca[[*on, "diff", "verdict"]].merge(cb[[*on, "diff", "verdict"]], on=on, how="outer", suffixes=("_a", "_b"))
    both = both.astype({"verdict_a": object, "verdict_b": object})
    both["same"] = [
        isinstance(x, str) and isinstance(y, str) and x == y for x, y in zip(both["verdict_a"], both["verdict_b"])
    ]
    return both.where(both.notna(), None).sort_values(on, kind="stable").reset_index(drop=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m guirl.conclusions RUN_A RUN_B``: the claims whose verdicts differ between two
    figures folders and a count line; exit 0 when all agree, 1 when not, 2 when a folder has no
    claims."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m guirl.conclusions", description=main.__doc__)
    parser.add_argument("run_a", type=Path, help="figures folder of one run, e.g. figures/tiny")
    parser.add_argument("run_b", type=Path, help="figures folder of the other run")
    args = parser.parse_args(argv)
    for folder in (args.run_a, args.run_b):
        if resolved_claims(folder).empty:
            print(f"{folder}: no table with a 'resolved' column")
            return 2
    cmp = compare_runs(args.run_a, args.run_b)
    differ = cmp[~cmp["same"]]
    with pd.option_context("display.max_colwidth", 120, "display.width", 200):
        if not differ.empty:
            print(differ[["notebook", "table", "key", "verdict_a", "verdict_b", "diff_a", "diff_b"]].to_string())
    marked = ("+", "-")
    resolved = cmp[cmp["verdict_a"].isin(marked) | cmp["verdict_b"].isin(marked)]
    one_run = int((cmp["verdict_a"].isna() | cmp["verdict_b"].isna()).sum())
    print(
        f"{int(cmp['same'].sum())} of {len(cmp)} claims agree; resolved in either run: {len(resolved)}, "
        f"of which {int(resolved['same'].sum())} agree; in one run only: {one_run}"
    )
    return 0 if differ.empty else 1


if __name__ == "__main__":
    raise SystemExit(main())
