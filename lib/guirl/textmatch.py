"""Text similarity primitives behind the text rules of :mod:`guirl.matching`.

Normalisation, token F1, containment, Levenshtein distance and ratio, ANLS, and contiguous word
phrases. Which primitive a protocol or a reward uses, with which threshold, is data
(:class:`guirl.matching.TextRule`); this module only computes. All functions are pure and total:
empty strings are handled explicitly.
"""

from __future__ import annotations

import re
from collections import Counter

_TOKEN = re.compile(r"\w+", re.UNICODE)
_WORD = re.compile(r"[a-z0-9]+")


def normalize_text(s: str) -> str:
    """Lower-case, strip, and collapse runs of white space to one space."""
    return " ".join(s.lower().split())


def tokens(s: str) -> list[str]:
    """Word tokens (``\\w+``) of the normalised text."""
    return _TOKEN.findall(normalize_text(s))


def token_f1(pred: str, gt: str) -> float:
    """SQuAD-style token F1 in ``[0, 1]``; 1.0 when both are empty, 0.0 when one is."""
    p, g = tokens(pred), tokens(gt)
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def contains_match(pred: str, gt: str) -> bool:
    """True when either normalised string contains the other (empty matches only empty)."""
    a, b = normalize_text(pred), normalize_text(gt)
    if not a or not b:
        return a == b
    return a in b or b in a


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute each cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i]
        for j, cb in enumerate(b, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def anls(pred: str, gt: str, threshold: float = 0.5) -> float:
    """Average normalised Levenshtein similarity for one pair, in ``[0, 1]``.

    ``1 - lev(p, g) / max(|p|, |g|)`` on normalised strings, set to 0 below ``threshold``
    (the ST-VQA definition, threshold 0.5).
    """
    a, b = normalize_text(pred), normalize_text(gt)
    if not a and not b:
        return 1.0
    sim = 1.0 - levenshtein(a, b) / max(len(a), len(b))
    return sim if sim >= threshold else 0.0


def levenshtein_ratio(a: str, b: str) -> float:
    """``1 - indel_distance / (|a| + |b|)`` on normalised strings (python-Levenshtein's
    ``ratio``: insert/delete cost 1, substitution 2), in ``[0, 1]``; 1.0 for two empty strings."""
    a, b = normalize_text(a), normalize_text(b)
    if not a and not b:
        return 1.0
    # LCS length by dynamic programming; indel distance = |a| + |b| - 2 * LCS.
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if ca == cb else max(prev[j], cur[j - 1]))
        prev = cur
    lcs = prev[-1]
    return 2.0 * lcs / (len(a) + len(b))


def words(s: str) -> list[str]:
    """Lower-cased ASCII letter/digit runs (``[a-z0-9]+``): punctuation and other scripts split words."""
    return _WORD.findall(s.lower())


def phrase_match(text: str, phrase: str) -> bool:
    """True when ``phrase``'s :func:`words` appear contiguously, in order, in ``text``'s.

    "555-1234" is in "Ann's number is 555-1234"; "on" is not in "Location is off". An empty
    phrase is in nothing.
    """
    a, e = words(text), words(phrase)
    if not e:
        return False
    return any(a[i : i + len(e)] == e for i in range(len(a) - len(e) + 1))
