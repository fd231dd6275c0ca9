"""AgentCPM-GUI compact JSON action (e.g. ``{"thought":"...","POINT":[729,69]}``).

Conventions, all from AgentCPM-GUI ``eval/utils/schema/schema_for_extraction.json`` and
``eval/utils/evaluator.py::ActionEvaluator.action_map``:

* Keys: ``thought``, ``POINT`` ([x, y] integers in [0, 1000], x first), ``to`` (up/down/left/right
  or a Location), ``duration`` (ms, default 200), ``PRESS`` (HOME/BACK/ENTER/APPSELECT),
  ``TYPE``, ``STATUS`` (continue/start/finish/satisfied/impossible/interrupt/need_feedback),
  ``DEEP_LINK``, ``CLEAR``. ``additionalProperties: false`` -> unknown keys fail.
* ``STATUS`` finish / satisfied -> terminate success; impossible / interrupt / need_feedback ->
  terminate fail (the evaluator counts all five as "stop"; the original word is kept in
  ``extra["status_raw"]``).
* ``POINT`` alone (or with ``duration`` <= 200) -> click; ``POINT`` + ``duration`` > 200 -> long
  press; ``POINT`` + ``to`` -> scroll. ``to`` is the **finger** direction (the evaluator derives
  the ground-truth direction from touch -> lift, and AgentCPM-GUI reverses UI-TARS' content
  direction to obtain it). ``duration`` alone -> wait.
* ``APPSELECT`` is the recent-apps button -> canonical key ``recent``.
* ``DEEP_LINK`` / ``CLEAR`` have no canonical counterpart -> failure.
* Output is compact (``separators=(",", ":")``), as in AgentCPM-GUI ``compact_json_dumps``.

Formatting: long press without a duration writes 1000 ms and a direction-only scroll writes
``POINT`` = [500, 500] (the defaults AgentCPM-GUI's converters use for other families); a wait
without duration writes 200 ms; click/long press durations <= 200 cannot be a long press, so
``format`` raises for them. Round-trip tolerance: 0.5/1000 per axis.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    fmt_point,
    number,
    point_in,
    scroll_from_points,
    text_arg,
)
from guirl.actions.types import Action, ActionType, ParseResult

#: AgentCPM-GUI schema default ``duration`` (ms); a POINT with a longer duration is a long press.
DEFAULT_DURATION_MS = 200
#: Duration AgentCPM-GUI's converters give a long press that has none (``run_predict_*``).
LONG_PRESS_DEFAULT_MS = 1000

_KEYS = ("thought", "POINT", "to", "duration", "PRESS", "TYPE", "STATUS", "DEEP_LINK", "CLEAR")
_PRESS = {"BACK": "back", "HOME": "home", "ENTER": "enter", "APPSELECT": "recent"}
_PRESS_OUT = {v: k for k, v in _PRESS.items()}
_STOP = {
    "finish": "success",
    "satisfied": "success",
    "impossible": "fail",
    "interrupt": "fail",
    "need_feedback": "fail",
}
_STOP_OUT = {"success": "finish", "fail": "impossible"}


def _extract_object(text: str) -> Any:
    s = text.strip()
    if s.startswith("```"):
        s = re.sub(r"^```(?:json)?\s*|\s*```$", "", s)
    i, j = s.find("{"), s.rfind("}")
    if i < 0 or j < i:
        raise FormatFail("no JSON object in output")
    try:
        return json.loads(s[i : j + 1])
    except json.JSONDecodeError as e:
        raise FormatFail(f"malformed JSON: {e.msg} at char {e.pos}") from None


class AgentCPMFormat(ActionFormat):
    name = "agentcpm"
    coord_kind = "thousand"
    convention = "finger"
    has_thought = True
    types = frozenset(
        {
            ActionType.CLICK,
            ActionType.LONG_PRESS,
            ActionType.SCROLL,
            ActionType.TYPE,
            ActionType.PRESS,
            ActionType.WAIT,
            ActionType.TERMINATE,
        }
    )

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        d = _extract_object(text)
        if not isinstance(d, dict):
            raise FormatFail("output must be a JSON object")
        unknown = sorted(set(d) - set(_KEYS))
        if unknown:
            raise FormatFail(f"unknown key(s) {unknown}; schema allows {list(_KEYS)}")
        thought = d.get("thought")
        if thought is not None and not isinstance(thought, str):
            raise FormatFail("'thought' must be a string")
        space = ctx.space("thousand")
        status = d.get("STATUS", "continue")
        if not isinstance(status, str):
            raise FormatFail(f"STATUS must be a string, got {status!r}")
        duration = None
        if "duration" in d:
            dur = number(d["duration"], "duration")
            if dur < 0:
                raise FormatFail(f"duration must be >= 0 ms, got {d['duration']!r}")
            duration = int(round(dur))
        for k in ("DEEP_LINK", "CLEAR"):
            if k in d:
                raise FormatFail(f"{k} has no canonical action")
        if status in _STOP:
            a = Action(ActionType.TERMINATE, status=_STOP[status], extra={"status_raw": status})  # type: ignore[arg-type]
        elif status not in ("continue", "start"):
            raise FormatFail(f"unknown STATUS {status!r}")
        elif "TYPE" in d:
            a = Action(ActionType.TYPE, text=text_arg(d["TYPE"], "TYPE"))
        elif "PRESS" in d:
            p = d["PRESS"]
            if not isinstance(p, str) or p.upper() not in _PRESS:
                raise FormatFail(f"PRESS must be one of {list(_PRESS)}, got {p!r}")
            a = Action(ActionType.PRESS, key=_PRESS[p.upper()])  # type: ignore[arg-type]
        elif "POINT" in d:
            pt = point_in(space, d["POINT"], "POINT")
            if "to" in d:
                to = d["to"]
                if isinstance(to, str):
                    a = Action(ActionType.SCROLL, point=pt, direction=check_direction(to), convention="finger")  # type: ignore[arg-type]
                else:
                    a = scroll_from_points(pt, point_in(space, to, "to"), "finger", "POINT -> to")
            elif duration is not None and duration > DEFAULT_DURATION_MS:
                a = Action(ActionType.LONG_PRESS, point=pt, duration_ms=duration)
            else:
                a = Action(ActionType.CLICK, point=pt)
        elif "to" in d:
            raise FormatFail("'to' needs POINT (schema: to requires POINT)")
        elif duration is not None:
            a = Action(ActionType.WAIT, duration_ms=duration)
        else:
            raise FormatFail("no action key (POINT, PRESS, TYPE, duration or a stop STATUS)")
        return self._ok(a, text, thought)

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        a = self._fill(action)
        space = ctx.space("thousand")
        d: dict[str, Any] = {}
        if thought is not None:
            d["thought"] = thought
        t = a.type
        if t is ActionType.CLICK:
            d["POINT"] = fmt_point(space, a.point)  # type: ignore[arg-type]
        elif t is ActionType.LONG_PRESS:
            d["POINT"] = fmt_point(space, a.point)  # type: ignore[arg-type]
            d["duration"] = a.duration_ms
        elif t is ActionType.SCROLL:
            d["POINT"] = fmt_point(space, a.point)  # type: ignore[arg-type]
            d["to"] = fmt_point(space, a.point2) if a.point2 is not None else a.direction
        elif t is ActionType.TYPE:
            d["TYPE"] = a.text
        elif t is ActionType.PRESS:
            d["PRESS"] = _PRESS_OUT[a.key]  # type: ignore[index]
        elif t is ActionType.WAIT:
            d["duration"] = a.duration_ms
        elif t is ActionType.TERMINATE:
            d["STATUS"] = _STOP_OUT[a.status]  # type: ignore[index]
        return json.dumps(d, separators=(",", ":"), ensure_ascii=False)

    def _unsupported(self, action: Action) -> str | None:
        if (
            action.type is ActionType.LONG_PRESS
            and action.duration_ms is not None
            and action.duration_ms <= DEFAULT_DURATION_MS
        ):
            return (
                f"format 'agentcpm' cannot express a 'long_press' action with duration {action.duration_ms} ms "
                f"(a POINT with duration <= {DEFAULT_DURATION_MS} ms is a click)"
            )
        return None

    def _fill(self, a: Action) -> Action:
        if a.type is ActionType.LONG_PRESS and a.duration_ms is None:
            return replace(a, duration_ms=LONG_PRESS_DEFAULT_MS)
        if a.type is ActionType.SCROLL and a.point is None:
            return replace(a, point=(0.5, 0.5), point2=None)
        if a.type is ActionType.WAIT and a.duration_ms is None:
            return replace(a, duration_ms=DEFAULT_DURATION_MS)
        return a

    def _project(self, action: Action, ctx: FormatContext) -> Action:
        return self._fill(super()._project(action, ctx))
