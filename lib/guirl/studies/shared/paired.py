"""Paired comparisons of models as tables and sentences: step SR of ``B`` minus ``A`` on the same
test steps (and training seeds), with a 95% bootstrap interval; conclusions worded only from the
interval ("resolved" when it excludes 0), never from a point estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from guirl.config import Config
from guirl.studies.shared.evaluation import paired_gain_table

__all__ = ["PAIRED_COLUMNS", "paired_table", "conclusions"]

#: Columns of :func:`paired_table` with the default names.
PAIRED_COLUMNS = ("A", "B", "split", "history", "A_SR", "B_SR", "diff", "lo", "hi", "resolved", "verdict")


def paired_table(
    cfg: Config,
    records: Sequence[dict[str, Any]],
    pairs: Sequence[tuple[str, str]],
    *,
    names: tuple[str, str] = ("A", "B"),
    sr_columns: tuple[str, str] = ("A_SR", "B_SR"),
    metric: str = "exact",
) -> pd.DataFrame:
    """Step SR of model ``B`` minus model ``A`` for each ``(A, B)`` of ``pairs`` and each (split,
    history) both have, paired over the records' training seeds and test steps
    (:func:`guirl.studies.shared.evaluation.paired_gain_table`, ``eval.bootstrap_samples``
    resamples). Columns: the two model names (``names``), ``split``, ``history``, their SR in %
    (``sr_columns``), ``diff`` / ``lo`` / ``hi`` (points), ``resolved``, ``verdict``, ``n_seeds``,
    ``n_steps``. No pairs: an empty table with those columns."""
    a_col, b_col = names
    a_sr, b_sr = sr_columns
    columns = [a_col, b_col, "split", "history", a_sr, b_sr, "diff", "lo", "hi", "resolved", "verdict"]
    columns += ["n_seeds", "n_steps"]
    frames = [
        paired_gain_table(cfg, records, baseline=a, model=b, metric=metric)
        .rename(columns={a: a_sr, b: b_sr})
        .assign(**{a_col: a, b_col: b})
        for a, b in pairs
    ]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def conclusions(table: pd.DataFrame, *, names: tuple[str, str] = ("A", "B")) -> str:
    """One sentence per row of :func:`paired_table`, worded only from its interval (``verdict``):
    "higher" / "lower" when resolved, else "not resolved" with the interval."""
    a_col, b_col = names
    lines = []
    for r in table.to_dict(orient="records"):
        where = f"{r['split']} {r['history']}"
        span = f"{r['diff']:+.1f} points, 95% interval [{r['lo']:+.1f}, {r['hi']:+.1f}]"
        if r["verdict"] == "B > A":
            lines.append(f"{r[b_col]} has a higher step SR than {r[a_col]} on {where} ({span}).")
        elif r["verdict"] == "B < A":
            lines.append(f"{r[b_col]} has a lower step SR than {r[a_col]} on {where} ({span}).")
        else:
            lines.append(f"{r[b_col]} vs {r[a_col]} on {where}: not resolved ({span}).")
    return "\n".join(lines)
