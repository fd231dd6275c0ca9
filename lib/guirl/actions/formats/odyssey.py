"""OdysseyAgent (GUI-Odyssey) action strings: ``CLICK: (x, y)``, ``SCROLL: UP``, ``TYPE: text``, ...

Conventions (sources): GUI-Odyssey ``data/format_converter.py`` / ``src/eval_mm/evaluate_GUIOdyssey.py``
as reproduced in AgentCPM-GUI ``eval/run_predict_odyssey.py`` (``transform_actions`` and
``mapping_actions``): ``CLICK: (x, y)``, ``LONG_PRESS: (x, y)``, ``SCROLL: UP|DOWN|LEFT|RIGHT``,
``TYPE: text``, ``PRESS_BACK``, ``PRESS_HOME``, ``PRESS_RECENT``, ``COMPLETE``, ``IMPOSSIBLE``.

* Coordinates: integers in [0, 1000] (GUI-Odyssey stores ``[[x, y]]`` in 0-1000).
* ``SCROLL`` direction: **finger** convention -- GUI-Odyssey derives it from the start -> end
  points of the swipe (``get_direction(touch, lift)``), and AgentCPM-GUI passes it to its
  finger-direction ``to`` unchanged.
* ``LONG_PRESS (x, y)`` without the colon (as AgentCPM-GUI writes histories) is accepted.
* No thought; no long-press duration (AgentCPM-GUI assumes 1000 ms); no wait, open-app, enter.

Strict reading (pipeline ``"guiodyssey"``), as ``src/eval_mm/evaluate_GUIOdyssey.py`` reads a
prediction (``simple_decode``): the text is split at ``:``; the action is the stripped part before
the first colon, compared case-sensitively (``CLICK (x, y)`` without the colon is another
action); the argument is the part between the first and the second colon (``TYPE: 10:30`` types
``10``); a point is ``eval``-ed (a tuple or a list of two numbers, floats allowed); a scroll
direction is compared ignoring case; any other action word is a miss.

Round-trip tolerance: 0.5/1000 per axis.
"""

from __future__ import annotations

import ast
import re

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    number,
    point_in,
    to_float,
)
from guirl.actions.types import Action, ActionType, ParseResult

_PT = re.compile(r"^(CLICK|LONG_PRESS):?\s*\(\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\)$")


_KEYS = {"PRESS_BACK": "back", "PRESS_HOME": "home", "PRESS_RECENT": "recent"}


def _as_run(text: str, ctx: FormatContext) -> Action:
    """``simple_decode`` + ``action_matching`` of GUI-Odyssey (module docstring)."""
    parts = text.split(":")
    action = parts[0].strip()
    info = parts[1].strip() if len(parts) > 1 else ""
    if action in ("CLICK", "LONG_PRESS"):
        try:
            v = ast.literal_eval(info)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            raise FormatFail(f"point {info!r} does not evaluate (the evaluator scores it 'invalid')") from None
        if not isinstance(v, (tuple, list)) or len(v) != 2:
            raise FormatFail(f"point {info!r} is not two numbers ('invalid')")
        p = point_in(ctx.space("thousand"), [number(c, "point") for c in v])
        return Action(ActionType.CLICK if action == "CLICK" else ActionType.LONG_PRESS, point=p)
    if action == "SCROLL":
        return Action(ActionType.SCROLL, direction=check_direction(info), convention="finger")  # type: ignore[arg-type]
    if action == "TYPE":
        return Action(ActionType.TYPE, text=info)
    if action in _KEYS:
        return Action(ActionType.PRESS, key=_KEYS[action])  # type: ignore[arg-type]
    if action in ("COMPLETE", "IMPOSSIBLE"):
        return Action(ActionType.TERMINATE, status="success" if action == "COMPLETE" else "fail")
    raise FormatFail(f"action {action!r} is no GUI-Odyssey action ('action_fail')")


class OdysseyFormat(ActionFormat):
    name = "odyssey"
    coord_kind = "thousand"
    convention = "finger"
    has_thought = False
    types = frozenset(
        {
            ActionType.CLICK,
            ActionType.LONG_PRESS,
            ActionType.SCROLL,
            ActionType.TYPE,
            ActionType.PRESS,
            ActionType.TERMINATE,
        }
    )
    keeps = {ActionType.LONG_PRESS: frozenset({"point"}), ActionType.SCROLL: frozenset({"direction", "convention"})}

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.PRESS and action.key == "enter":
            return "format 'odyssey' cannot express a 'press' action with key 'enter'"
        return None

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        if ctx.reading("guiodyssey", ("guiodyssey",)) is not None:
            return self._ok(_as_run(text, ctx), text)
        s = text.strip()
        if not s:
            raise FormatFail("empty output")
        m = _PT.match(s)
        if m:
            p = point_in(ctx.space("thousand"), [to_float(m.group(2), "point"), to_float(m.group(3), "point")])
            t = ActionType.CLICK if m.group(1) == "CLICK" else ActionType.LONG_PRESS
            return self._ok(Action(t, point=p), text)
        if s.startswith(("CLICK", "LONG_PRESS")):
            raise FormatFail(f"point action needs '(x, y)', got {s[:60]!r}")
        if s.startswith("SCROLL"):
            d = s[len("SCROLL") :].lstrip(":").strip()
            return self._ok(Action(ActionType.SCROLL, direction=check_direction(d), convention="finger"), text)  # type: ignore[arg-type]
        if s.startswith("TYPE:"):
            return self._ok(Action(ActionType.TYPE, text=s[len("TYPE:") :].strip()), text)
        keys = {"PRESS_BACK": "back", "PRESS_HOME": "home", "PRESS_RECENT": "recent"}
        if s in keys:
            return self._ok(Action(ActionType.PRESS, key=keys[s]), text)  # type: ignore[arg-type]
        if s == "COMPLETE":
            return self._ok(Action(ActionType.TERMINATE, status="success"), text)
        if s == "IMPOSSIBLE":
            return self._ok(Action(ActionType.TERMINATE, status="fail"), text)
        raise FormatFail(f"unknown Odyssey action {s[:60]!r}")

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        sp = ctx.space("thousand")
        a, t = action, action.type
        if t in (ActionType.CLICK, ActionType.LONG_PRESS):
            x, y = sp.from_norm(a.point)  # type: ignore[arg-type]
            return f"{'CLICK' if t is ActionType.CLICK else 'LONG_PRESS'}: ({x}, {y})"
        if t is ActionType.SCROLL:
            return f"SCROLL: {a.direction.upper()}"  # type: ignore[union-attr]
        if t is ActionType.TYPE:
            return f"TYPE: {a.text}"
        if t is ActionType.PRESS:
            return f"PRESS_{a.key.upper()}"  # type: ignore[union-attr]
        return "COMPLETE" if a.status == "success" else "IMPOSSIBLE"
