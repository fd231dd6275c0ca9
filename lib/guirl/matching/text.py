"""Text comparisons of the public evaluators, on strings already normalised by the rule.

:func:`normalize` applies a :class:`~guirl.matching.TextRule`'s ``normalize`` option; the other
functions compare the normalised strings exactly as the original code does (no further case or
white-space handling), so that a case-sensitive evaluator stays case-sensitive:

* :func:`contains` -- containment either way (Python's ``in``);
* :func:`set_f1` -- F1 of the sets of white-space tokens (``calculate_f1_score`` of GUI-R1, CES,
  CCPO, SeeClick's Mind2Web loop);
* :func:`edit_similarity` -- ``1 - levenshtein / max(len)`` (GUI-Odyssey's ``text_matching``);
* :func:`indel_ratio` -- python-Levenshtein's ``ratio`` (CoAT, AgentCPM-GUI's ``text_dist``).

The older helpers of :mod:`guirl.textmatch` (token F1 on ``\\w+`` tokens, ANLS, phrases) are
used for the rule kinds that predate these.
"""

from __future__ import annotations

from guirl.textmatch import levenshtein, normalize_text

__all__ = ["normalize", "contains", "set_f1", "edit_similarity", "indel_ratio"]


def normalize(s: str, how: str) -> str:
    """``"collapse"`` (lower, strip, single spaces), ``"lower_strip"``, ``"strip"`` or ``"none"``."""
    if how == "collapse":
        return normalize_text(s)
    if how == "lower_strip":
        return s.lower().strip()
    if how == "strip":
        return s.strip()
    if how == "none":
        return s
    raise ValueError(f"unknown text normalisation {how!r}")


def contains(a: str, b: str, *, empty_contained: bool) -> bool:
    """``a in b or b in a``; with ``empty_contained=False`` an empty string matches only an empty one."""
    if not empty_contained and (not a or not b):
        return a == b
    return a in b or b in a


def set_f1(pred: str, gt: str, *, single_token_contains: bool = False, strip_brackets: bool = False) -> float:
    """F1 of the sets of white-space separated tokens, in ``[0, 1]``.

    Two empty strings score 0 (the public ``calculate_f1_score`` divides neither precision nor
    recall by zero and returns 0). ``single_token_contains``: two one-token strings of which one
    contains the other score 1 (GUI-R1). ``strip_brackets``: ``[`` and ``]`` are removed first.
    """
    if strip_brackets:
        pred = pred.replace("[", "").replace("]", "")
        gt = gt.replace("[", "").replace("]", "")
    p, g = set(pred.split()), set(gt.split())
    if single_token_contains and len(p) == 1 and len(g) == 1:
        (a,), (b,) = tuple(p), tuple(g)
        if a in b or b in a:
            return 1.0
    common = len(p & g)
    precision = common / len(p) if p else 0.0
    recall = common / len(g) if g else 0.0
    if precision + recall == 0:
        return 0.0
    return 2 * (precision * recall) / (precision + recall)


def edit_similarity(a: str, b: str) -> float:
    """``1 - levenshtein(a, b) / max(len(a), len(b))``; two empty strings score 1."""
    n = max(len(a), len(b))
    return 1.0 - (0.0 if n == 0 else float(levenshtein(a, b)) / float(n))


def indel_ratio(a: str, b: str) -> float:
    """python-Levenshtein's ``ratio``: ``1 - indel_distance / (len(a) + len(b))`` (1 for two
    empty strings); insertions and deletions cost 1, a substitution 2."""
    if not a and not b:
        return 1.0
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if ca == cb else max(prev[j], cur[j - 1]))
        prev = cur
    lcs = prev[-1]
    total = len(a) + len(b)
    return 1.0 - (total - 2 * lcs) / total  # rapidfuzz's Indel.normalized_similarity
