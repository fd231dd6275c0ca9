"""OS-Atlas-Pro mobile action space: ``Thoughts: ...\\nActions: CLICK <point>[[x, y]]</point>``.

Conventions (sources): the OS-Atlas-Pro action prompt reproduced in AgentCPM-GUI
``eval/run_predict_os_atlas.py`` -- ``CLICK <point>[[x-axis, y-axis]]</point>``,
``TYPE [input text]``, ``SCROLL [UP|DOWN|LEFT|RIGHT]``, ``LONG_PRESS <point>[[x, y]]</point>``,
``PRESS_BACK``, ``PRESS_HOME``, ``PRESS_RECENT``, ``WAIT``, ``COMPLETE``; plus ``OPEN_APP [name]``
(OS-Atlas AndroidControl action space). The output has "Thoughts:" and "Actions:" sections.

* Coordinates: [0, 1000] (OS-Atlas-Pro on Qwen2-VL relative coordinates; AgentCPM-GUI
  ``os_atlas_2minicpm`` copies them into ``POINT`` unchanged).
* ``SCROLL`` direction: **content** convention (OS-Atlas' mobile data is AndroidControl-derived;
  AgentCPM-GUI reverses it for the AndroidControl-low setting -- see
  :mod:`guirl.methods.agentcpm.mapping` for its exact, setting-dependent rule).
* ``TYPE [text]``: the text is everything between the first ``[`` and the last ``]``.
* No long-press duration; no terminate-fail (``IMPOSSIBLE`` in the prompt is a typo for WAIT).

Round-trip tolerance: 0.5/1000 per axis.
"""

from __future__ import annotations

import re

from guirl.actions.formats._base import ActionFormat, FormatContext, FormatFail, check_direction, point_in, to_float
from guirl.actions.types import Action, ActionType, ParseResult

_KIND = re.compile(r"^(LONG_PRESS|CLICK|TYPE|SCROLL|PRESS_BACK|PRESS_HOME|PRESS_RECENT|COMPLETE|WAIT|OPEN_APP)\b")
_POINT = re.compile(r"^<point>\s*\[\[\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\]\]\s*</point>$")


def _bracket(rest: str, what: str) -> str:
    i, j = rest.find("["), rest.rfind("]")
    if i != 0 or j < i:
        raise FormatFail(f"{what} needs [text], got {rest[:60]!r}")
    return rest[i + 1 : j]


class OSAtlasFormat(ActionFormat):
    name = "osatlas"
    coord_kind = "thousand"
    convention = "content"
    has_thought = True
    types = frozenset(
        {
            ActionType.CLICK,
            ActionType.LONG_PRESS,
            ActionType.TYPE,
            ActionType.SCROLL,
            ActionType.PRESS,
            ActionType.OPEN_APP,
            ActionType.WAIT,
            ActionType.TERMINATE,
        }
    )
    keeps = {
        ActionType.LONG_PRESS: frozenset({"point"}),
        ActionType.SCROLL: frozenset({"direction", "convention"}),
        ActionType.WAIT: frozenset(),
    }

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.PRESS and action.key == "enter":
            return "format 'osatlas' cannot express a 'press' action with key 'enter'"
        if action.type is ActionType.TERMINATE and action.status != "success":
            return "format 'osatlas' cannot express a 'terminate' action with status 'fail' (COMPLETE only)"
        return None

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        m = re.search(r"actions?:", text, re.IGNORECASE)
        thought = None
        if m:
            tm = re.search(r"thoughts?:(.*)", text[: m.start()], re.IGNORECASE | re.DOTALL)
            thought = tm.group(1).strip() if tm else None
            body = text[m.end() :]
        else:
            body = text
        body = body.strip()
        k = _KIND.match(body)
        if not k:
            raise FormatFail(f"unknown OS-Atlas action in {body[:60]!r}")
        kind, rest = k.group(1), body[k.end() :].strip()
        if kind in ("CLICK", "LONG_PRESS"):
            pm = _POINT.match(rest)
            if not pm:
                raise FormatFail(f"{kind} needs <point>[[x, y]]</point>, got {rest[:60]!r}")
            p = point_in(ctx.space("thousand"), [to_float(pm.group(1), "point"), to_float(pm.group(2), "point")])
            a = Action(ActionType.CLICK if kind == "CLICK" else ActionType.LONG_PRESS, point=p)
        elif kind == "TYPE":
            a = Action(ActionType.TYPE, text=_bracket(rest, "TYPE"))
        elif kind == "OPEN_APP":
            a = Action(ActionType.OPEN_APP, text=_bracket(rest, "OPEN_APP"))
        elif kind == "SCROLL":
            a = Action(ActionType.SCROLL, direction=check_direction(_bracket(rest, "SCROLL")), convention="content")  # type: ignore[arg-type]
        elif kind.startswith("PRESS_"):
            a = Action(ActionType.PRESS, key=kind[6:].lower())  # type: ignore[arg-type]
        elif kind == "WAIT":
            a = Action(ActionType.WAIT)
        else:
            a = Action(ActionType.TERMINATE, status="success")
        if kind in ("PRESS_BACK", "PRESS_HOME", "PRESS_RECENT", "WAIT", "COMPLETE") and rest:
            raise FormatFail(f"{kind} takes no argument, got {rest[:60]!r}")
        return self._ok(a, text, thought)

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        sp = ctx.space("thousand")
        a, t = action, action.type
        if t in (ActionType.CLICK, ActionType.LONG_PRESS):
            x, y = sp.from_norm(a.point)  # type: ignore[arg-type]
            out = f"{'CLICK' if t is ActionType.CLICK else 'LONG_PRESS'} <point>[[{x}, {y}]]</point>"
        elif t is ActionType.TYPE:
            out = f"TYPE [{a.text}]"
        elif t is ActionType.OPEN_APP:
            out = f"OPEN_APP [{a.text}]"
        elif t is ActionType.SCROLL:
            out = f"SCROLL [{a.direction.upper()}]"  # type: ignore[union-attr]
        elif t is ActionType.PRESS:
            out = f"PRESS_{a.key.upper()}"  # type: ignore[union-attr]
        elif t is ActionType.WAIT:
            out = "WAIT"
        else:
            out = "COMPLETE"
        head = f"Thoughts: {thought}\n" if thought is not None else ""
        return f"{head}Actions: {out}"
