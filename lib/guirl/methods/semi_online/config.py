"""The ``semi_online`` section's recipe: CCPO Table 8's reward discount per data set (the section
itself, :class:`guirl.rl.semi_online.SemiOnlineConfig`, lives with the semi-online kernels in
:mod:`guirl.rl`; its defaults are the AndroidControl column)."""

from __future__ import annotations

from typing import Any

__all__ = ["recipe"]

#: CCPO Table 8's reward discount (SO RL) by data source; AITZ, AMEX and MiniGUI take the AC column.
_GAMMA = {"androidcontrol": 0.5, "guiodyssey": 0.3, "mind2web": 0.3}


def recipe(kind: str, data_source: str) -> dict[str, Any]:
    """``paper``: ``semi_online.gamma`` of the data set's column of CCPO Table 8; ``tiny``: the
    section's defaults (the AndroidControl column)."""
    if kind == "tiny":
        return {}
    return {"semi_online.gamma": _GAMMA.get(data_source, _GAMMA["androidcontrol"])}  # CCPO Table 8 reward discount
