"""Summaries of scored predictions: step metrics with bootstrap intervals, online runs.

* :func:`summarize_steps`: TM / GR / SR in percent with 95% bootstrap intervals over prediction
  records (:mod:`guirl.metrics.records`), the CCPO Table 2 columns.
* :func:`summarize_online`: Task SR and Subgoal SR over online runs (mean and std over runs,
  the AndroidLong protocol), from :func:`guirl.rollout.play_online` records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from guirl.metrics.bootstrap import rate_with_ci

__all__ = ["summarize_online", "summarize_steps"]


def summarize_steps(records: Sequence[dict[str, Any]], *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """TM / GR / SR in percent with 95% bootstrap intervals, plus counts.

    Returns ``n``, ``n_counted``, ``n_unparsable``, and for each of ``TM``, ``GR``, ``SR`` the
    rate and its ``_lo`` / ``_hi`` bounds (``nan`` when nothing is scored). GR is over steps
    whose ground truth has a coordinate (``grounding`` not ``None``); SR is over the steps the
    protocol counts (``counted``; a record without the field, as written before it existed, is
    counted), as :func:`guirl.metrics.aggregate_steps` does. Unparsable outputs are wrong everywhere.
    """
    counted = [r for r in records if r.get("counted", True)]
    out: dict[str, Any] = {
        "n": len(records),
        "n_counted": len(counted),
        "n_unparsable": sum(not r["parse_ok"] for r in records),
    }
    columns = {
        "TM": [r["type_match"] for r in records],
        "GR": [r["grounding"] for r in records if r["grounding"] is not None],
        "SR": [r["exact"] for r in counted],
    }
    for name, vals in columns.items():
        mean, lo, hi = rate_with_ci(np.asarray(vals, dtype=float), n_boot=n_boot, seed=seed)
        out[name], out[f"{name}_lo"], out[f"{name}_hi"] = (100 * mean, 100 * lo, 100 * hi)
    return out


def summarize_online(runs: Sequence[Sequence[dict[str, Any]]]) -> dict[str, float]:
    """AndroidLong protocol over runs: Task SR and Subgoal SR (percent), mean and population std
    over runs (an empty run is not counted; no runs: ``nan``), and ``n_runs``."""
    task = [100 * float(np.mean([r["success"] for r in run])) for run in runs if run]
    sub = [100 * float(np.mean([r["subgoal_rate"] for r in run])) for run in runs if run]

    def ms(v: list[float]) -> tuple[float, float]:
        return (float(np.mean(v)), float(np.std(v))) if v else (math.nan, math.nan)

    (t_m, t_s), (s_m, s_s) = ms(task), ms(sub)
    return {"task_sr": t_m, "task_sr_std": t_s, "subgoal_sr": s_m, "subgoal_sr_std": s_s, "n_runs": len(task)}
