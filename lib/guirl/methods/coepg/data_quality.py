"""Co-EPG training-data quality: purity and diversity of a distilled data set.

Co-EPG (Zhao et al., AAAI 2026, arXiv:2511.10705) distils the planner's GRPO rollouts
into training data for the grounding model at every iteration and argues that the data
become both *purer* and *more diverse* across iterations. The exact formulas were not
findable in the public text we could search, so this module implements the following
**assumed, documented** definitions (they are what the repository reports under these
names):

* **purity** = share of training samples whose label is verified correct (by the
  environment / ground truth / the grounding reward), in ``[0, 1]``.
* **diversity** is reported two ways:
  - ``n_distinct``: the number of distinct ``(instruction template, action type,
    target element)`` triples;
  - ``action_entropy_bits``: Shannon entropy (base 2) of the action-type distribution,
    ``H = -sum_a p_a log2 p_a``, in ``[0, log2 K]`` for K action types; plus
    ``distinct_ratio = n_distinct / n``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class DataSample:
    """What purity/diversity need to know about one training sample."""

    template: str  # instruction template id (instruction with slot values removed)
    action_type: str
    target: str  # target element id / label ("" for actions without a target)
    verified: bool  # the label was verified correct


def purity(verified: Sequence[bool] | Iterable[DataSample]) -> float:
    """Share of verified-correct samples in ``[0, 1]``; ``nan`` for an empty set."""
    flags = [s.verified if isinstance(s, DataSample) else bool(s) for s in verified]
    return sum(flags) / len(flags) if flags else float("nan")


def action_entropy_bits(action_types: Iterable[str]) -> float:
    """Shannon entropy (bits) of the action-type distribution; 0.0 for one type or none."""
    c = Counter(action_types)
    n = sum(c.values())
    if n == 0:
        return 0.0
    return max(0.0, -sum((k / n) * math.log2(k / n) for k in c.values()))


def diversity(samples: Sequence[DataSample]) -> dict[str, float | int]:
    """``n``, ``n_distinct`` triples, ``distinct_ratio`` (``nan`` when empty) and
    ``action_entropy_bits`` of a data set."""
    n = len(samples)
    distinct = len({(s.template, s.action_type, s.target) for s in samples})
    return {
        "n": n,
        "n_distinct": distinct,
        "distinct_ratio": distinct / n if n else float("nan"),
        "action_entropy_bits": action_entropy_bits(s.action_type for s in samples),
    }
