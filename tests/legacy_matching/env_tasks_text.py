"""Frozen copy of ``text_matches`` of ``lib/guirl/env/tasks.py`` at commit c7e8c23 (before the
matching engine); tests only."""

from __future__ import annotations

import re


def _tokens(s: str | None) -> list[str]:
    return re.findall(r"[a-z0-9]+", (s or "").lower())


def text_matches(answer: str | None, expected: str) -> bool:
    a, e = _tokens(answer), _tokens(expected)
    if not e:
        return False
    return any(a[i : i + len(e)] == e for i in range(len(a) - len(e) + 1))
