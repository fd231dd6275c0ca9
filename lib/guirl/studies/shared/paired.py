"""Paired comparisons of models as tables and sentences: step SR of ``B`` minus ``A`` on the same
test steps (and training seeds), the same for online Task / Subgoal SR over the same runs and tasks,
each with a 95% bootstrap interval; conclusions worded only from the interval ("resolved" when it
excludes 0), never from a point estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from guirl.config import Config
from guirl.studies.shared.evaluation import paired_gain_table

__all__ = ["PAIRED_COLUMNS", "STEP_METRICS", "paired_table", "online_paired", "conclusions"]

#: Columns of :func:`paired_table` with the default names.
PAIRED_COLUMNS = ("A", "B", "split", "history", "A_SR", "B_SR", "diff", "lo", "hi", "resolved", "verdict")
#: Metrics measured per test step (a sentence says "step SR"); online ones (Task SR) are said as they are.
STEP_METRICS = frozenset({"SR", "TM", "GR", "EM", "Type"})


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


def online_paired(cfg: Config, evals: Mapping[str, Any], pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """``B - A`` of Task SR and Subgoal SR (points) for each ``(A, B)`` of ``pairs`` of online
    evaluations (:class:`~guirl.studies.shared.evaluation.OnlineEvaluation`, by name), paired over
    the same runs and tasks, with a 95% two-way bootstrap interval over runs and tasks
    (:func:`guirl.metrics.paired.paired_difference`, ``eval.bootstrap_samples``). Columns ``A``,
    ``B``, ``metric``, ``A_value`` / ``B_value`` (%) and the difference row. A pair that did not play
    the same runs and tasks is a ``ValueError`` naming both."""
    from guirl.metrics.paired import difference_row, paired_difference, paired_matrix

    rows = []
    for a, b in pairs:
        for metric, value in (("Task SR", "success"), ("Subgoal SR", "subgoal_rate")):
            mats = []
            for name in (a, b):
                eps = [{**e, value: float(e[value])} for e in evals[name].episodes]
                mats.append(paired_matrix(eps, value=value, seed_key="run", step_keys=("task_id",), name=name))
            (ma, ra, ta), (mb, rb, tb) = mats
            if (ra, ta) != (rb, tb):
                raise ValueError(f"online_paired: {a!r} and {b!r} were not played on the same runs and tasks")
            d = paired_difference(ma, mb, n_boot=cfg.eval.bootstrap_samples, seed=cfg.seed)
            rows.append(
                {"A": a, "B": b, "metric": metric, "A_value": 100 * ma.mean(), "B_value": 100 * mb.mean()}
                | difference_row(d)
            )
    return pd.DataFrame(rows)


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def conclusions(table: pd.DataFrame, *, names: tuple[str, str] = ("A", "B")) -> str:
    """One sentence per row of a paired table (:func:`paired_table`, :func:`online_paired`, a
    notebook's table with the same ``diff`` / ``lo`` / ``hi`` / ``verdict`` columns), worded only
    from its interval (``verdict``): "higher" / "lower" when resolved, else "not resolved" with the
    interval; the metric is the row's ``metric`` (step SR when it has none), the place its ``split``
    and ``history``. Rows whose verdict is ``baseline`` (a table's reference row) are left out."""
    a_col, b_col = names
    lines = []
    for r in table.to_dict(orient="records"):
        if r["verdict"] == "baseline":
            continue
        metric = _text(r.get("metric")) or "SR"
        what = f"step {metric}" if metric in STEP_METRICS else metric
        place = " ".join(t for t in (_text(r.get("split")), _text(r.get("history"))) if t)
        where = f" on {place}" if place else ""
        span = f"{r['diff']:+.1f} points, 95% interval [{r['lo']:+.1f}, {r['hi']:+.1f}]"
        if r["verdict"] == "B > A":
            lines.append(f"{r[b_col]} has a higher {what} than {r[a_col]}{where} ({span}).")
        elif r["verdict"] == "B < A":
            lines.append(f"{r[b_col]} has a lower {what} than {r[a_col]}{where} ({span}).")
        else:
            lines.append(f"{r[b_col]} vs {r[a_col]}{where}: not resolved ({span}).")
    return "\n".join(lines)
