"""Co-EPG training-data quality: purity and diversity of the distilled data (Co-EPG Sec. 5.7, Fig. 6).

Co-EPG (Zhao et al., AAAI 2026, arXiv 2511.10705) rebuilds its training data at every iteration
(data enhancement, Sec. 4.2) and tracks two numbers over the iterations (Sec. 5.7):

* **purity** = the share of plans the grounding models execute successfully (a plan is verified
  when the grounders land on its target), in ``[0, 1]``: :func:`purity`;
* **diversity** = the average number of generated plans per task: :func:`plans_per_task`.
  The paper counts generated plans (``distinct=False``, default); ``distinct=True`` counts each
  task's distinct plan texts instead (the paper does not say whether repeats count).

:func:`diversity` returns the paper's ``plans_per_task`` together with descriptors of the data
set that are not the paper's metric (kept from before the paper text was available, COEPG-37 in
``docs/fidelity/coepg.md``): ``n_distinct`` ``(instruction template, action type, target
element)`` triples, ``distinct_ratio = n_distinct / n`` and the action-type entropy
``action_entropy_bits = -sum_a p_a log2 p_a``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["DataSample", "action_entropy_bits", "diversity", "plans_per_task", "purity"]


@dataclass(frozen=True)
class DataSample:
    """One generated plan of the data set: its task, its text and whether it was verified.

    ``template`` (instruction template id), ``action_type`` and ``target`` (target element id,
    ``""`` for actions without one) feed the descriptors of :func:`diversity`; ``task`` and
    ``plan`` feed :func:`plans_per_task` (``task`` empty: the template stands for the task)."""

    template: str
    action_type: str
    target: str
    verified: bool
    task: str = ""
    plan: str = ""

    @property
    def task_key(self) -> str:
        return self.task or self.template


def purity(verified: Sequence[bool] | Iterable[DataSample]) -> float:
    """Co-EPG Sec. 5.7 purity: share of verified plans in ``[0, 1]``; ``nan`` for an empty set."""
    flags = [s.verified if isinstance(s, DataSample) else bool(s) for s in verified]
    return sum(flags) / len(flags) if flags else float("nan")


def plans_per_task(samples: Iterable[DataSample | tuple[str, str]], *, distinct: bool = False) -> float:
    """Co-EPG Sec. 5.7 diversity: generated plans divided by tasks (``nan`` when empty).

    ``samples``: :class:`DataSample` records or ``(task, plan)`` pairs. ``distinct=True`` counts a
    plan text once per task."""
    per_task: dict[str, list[str]] = defaultdict(list)
    for s in samples:
        task, plan = (s.task_key, s.plan) if isinstance(s, DataSample) else (str(s[0]), str(s[1]))
        per_task[task].append(plan)
    if not per_task:
        return float("nan")
    counts = [len(set(p)) if distinct else len(p) for p in per_task.values()]
    return sum(counts) / len(counts)


def action_entropy_bits(action_types: Iterable[str]) -> float:
    """Shannon entropy (bits) of the action-type distribution; 0.0 for one type or none."""
    c = Counter(action_types)
    n = sum(c.values())
    if n == 0:
        return 0.0
    return max(0.0, -sum((k / n) * math.log2(k / n) for k in c.values()))


def diversity(samples: Sequence[DataSample]) -> dict[str, float | int]:
    """``plans_per_task`` (the paper's diversity) and the descriptors ``n``, ``n_distinct``
    triples, ``distinct_ratio`` (``nan`` when empty) and ``action_entropy_bits``."""
    n = len(samples)
    distinct = len({(s.template, s.action_type, s.target) for s in samples})
    return {
        "plans_per_task": plans_per_task(samples),
        "n": n,
        "n_distinct": distinct,
        "distinct_ratio": distinct / n if n else float("nan"),
        "action_entropy_bits": action_entropy_bits(s.action_type for s in samples),
    }
