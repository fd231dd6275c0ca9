"""AndroidLong online metrics: Subgoal SR, Task SR, and mean/std over runs (seeds).

The online evaluator (MiniGUI or an emulator checker) decides, per task, which of the
task's annotated subgoals were reached and whether the task succeeded; these functions
only aggregate those booleans.

* **Subgoal SR** – per task, completed subgoals / total subgoals; averaged over tasks
  (macro: every task weighs 1 whatever its number of subgoals).
* **Task SR** – share of tasks the evaluator marks successful.
* Each run (seed) gives one value of each; :func:`mean_std` reports mean and standard
  deviation across runs (``ddof=0`` by default, i.e. ``numpy.std``; pass ``ddof=1`` for
  the sample standard deviation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TaskOutcome:
    """One task of one run: which subgoals were reached and whether the task succeeded."""

    task_id: str
    subgoals: tuple[bool, ...]
    success: bool

    def __post_init__(self) -> None:
        if len(self.subgoals) == 0:
            raise ValueError(f"task {self.task_id!r}: needs at least one subgoal (annotate subgoals in the episode)")


def subgoal_sr(tasks: Sequence[TaskOutcome]) -> float:
    """Mean over tasks of completed/total subgoals, in ``[0, 1]``; ``nan`` for no tasks."""
    if not tasks:
        return float("nan")
    return sum(sum(t.subgoals) / len(t.subgoals) for t in tasks) / len(tasks)


def task_sr(tasks: Sequence[TaskOutcome]) -> float:
    """Share of successful tasks, in ``[0, 1]``; ``nan`` for no tasks."""
    if not tasks:
        return float("nan")
    return sum(bool(t.success) for t in tasks) / len(tasks)


def mean_std(values: Sequence[float], ddof: int = 0) -> tuple[float, float]:
    """Mean and standard deviation of per-run values. One run gives std 0 with ``ddof=0``
    and ``nan`` with ``ddof=1``; no runs give ``(nan, nan)``."""
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    m = sum(values) / n
    if n - ddof <= 0:
        return m, float("nan")
    var = sum((v - m) ** 2 for v in values) / (n - ddof)
    return m, math.sqrt(var)


def summarize_runs(runs: Sequence[Sequence[TaskOutcome]], ddof: int = 0) -> dict[str, float | int]:
    """Subgoal SR and Task SR of every run, then their mean and std across runs.

    Returns ``subgoal_sr_mean``, ``subgoal_sr_std``, ``task_sr_mean``, ``task_sr_std``,
    ``n_runs`` and ``n_tasks`` (tasks per run; runs must cover the same task ids).
    """
    if runs:
        ids0 = sorted(t.task_id for t in runs[0])
        for i, r in enumerate(runs[1:], start=1):
            if sorted(t.task_id for t in r) != ids0:
                raise ValueError(f"run {i} covers different task ids than run 0; evaluate every seed on the same tasks")
    sg = [subgoal_sr(r) for r in runs]
    ts = [task_sr(r) for r in runs]
    sg_m, sg_s = mean_std(sg, ddof)
    ts_m, ts_s = mean_std(ts, ddof)
    return {
        "subgoal_sr_mean": sg_m,
        "subgoal_sr_std": sg_s,
        "task_sr_mean": ts_m,
        "task_sr_std": ts_s,
        "n_runs": len(runs),
        "n_tasks": len(runs[0]) if runs else 0,
    }
