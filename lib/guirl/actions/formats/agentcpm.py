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

Strict reading (``FormatContext(strict=True)``), pipelines:

* ``"agentcpm"`` (default): as AgentCPM-GUI's evaluation runs -- the whole output must be one JSON
  object (``json.loads``: no fences, no prose) valid under ``schema_for_extraction.json``
  (integers, where ``500.0`` counts as an integer as jsonschema says; ``additionalProperties:
  false``; one action key; ``to`` needs ``POINT``; a continue/start status needs an action), then
  read by ``ActionEvaluator.action_map``: a stop status is a stop; TYPE; POINT with the default
  200 ms and no ``to`` a click, with ``to`` a scroll (the direction word, or the cosine-nearest
  direction of POINT -> ``to``, a diagonal tie vertical; a zero-length ``to`` has no direction
  and fails); POINT with a longer duration a long press (``to`` ignored); PRESS; and everything
  else -- DEEP_LINK, CLEAR, a bare duration, a POINT with a duration under 200 -- a stop, read as
  a wait (which the evaluator's stop class merges with terminate).
* ``"agentcpm_paper"``: the same with the paper's vocabulary (AgentCPM-GUI Sec. 2.2): no
  ``APPSELECT`` key and no ``start`` status.

Formatting: long press without a duration writes 1000 ms and a direction-only scroll writes
``POINT`` = [500, 500] (the defaults AgentCPM-GUI's converters use for other families); a wait
without duration writes 200 ms; click/long press durations <= 200 cannot be a long press, so
``format`` raises for them. Round-trip tolerance: 0.5/1000 per axis.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from guirl.actions.coords import CoordSpace
from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    fmt_point,
    json_loads,
    number,
    point_in,
    scroll_from_points,
    strip_fence,
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
CoordSpaceThousand = CoordSpace.thousand()


def _extract_object(text: str) -> Any:
    s = text.strip()
    if s.startswith("```"):
        s = strip_fence(s)
    i, j = s.find("{"), s.rfind("}")
    if i < 0 or j < i:
        raise FormatFail("no JSON object in output")
    try:
        return json_loads(s[i : j + 1])
    except json.JSONDecodeError as e:
        raise FormatFail(f"malformed JSON: {e.msg} at char {e.pos}") from None


_STATUSES = ("continue", "start", "finish", "satisfied", "impossible", "interrupt", "need_feedback")
_ACTION_KEYS = ("POINT", "PRESS", "TYPE", "DEEP_LINK", "CLEAR")


def _schema_int(v: Any) -> bool:
    """jsonschema's ``integer``: an int, or a float with no fractional part (not a bool)."""
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (isinstance(v, float) and v.is_integer())


def _location(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(_schema_int(c) and 0 <= c <= 1000 for c in v)


def schema_error(d: Any, *, paper: bool = False) -> str | None:
    """Why ``d`` fails AgentCPM-GUI's ``schema_for_extraction.json`` (``None``: valid).

    ``paper``: the paper's vocabulary (no ``APPSELECT``, no ``start``).
    """
    if not isinstance(d, dict):
        return "not a JSON object"
    unknown = sorted(set(d) - set(_KEYS))
    if unknown:
        return f"unknown key(s) {unknown} (additionalProperties: false)"
    if "thought" in d and not isinstance(d["thought"], str):
        return "thought must be a string"
    if "POINT" in d and not _location(d["POINT"]):
        return f"POINT {d['POINT']!r} is not [x, y] integers in 0..1000"
    if "to" in d and not (d["to"] in ("up", "down", "left", "right") or _location(d["to"])):
        return f"to {d['to']!r} is neither up/down/left/right nor a Location"
    if "duration" in d and not (_schema_int(d["duration"]) and d["duration"] >= 0):
        return f"duration {d['duration']!r} is not an integer >= 0"
    presses = ("HOME", "BACK", "ENTER") if paper else ("HOME", "BACK", "ENTER", "APPSELECT")
    if "PRESS" in d and d["PRESS"] not in presses:
        return f"PRESS {d['PRESS']!r} not in {list(presses)}"
    if "TYPE" in d and not isinstance(d["TYPE"], str):
        return "TYPE must be a string"
    for k in ("DEEP_LINK", "CLEAR"):
        if k in d and d[k] is not None:
            return f"{k} must be null"
    statuses = tuple(s for s in _STATUSES if not (paper and s == "start"))
    if "STATUS" in d and d["STATUS"] not in statuses:
        return f"STATUS {d['STATUS']!r} not in {list(statuses)}"
    if "to" in d and "POINT" not in d:
        return "to requires POINT"
    if d.get("STATUS", "continue") in ("continue", "start") and not any(k in d for k in (*_ACTION_KEYS, "duration")):
        return "a continue/start status needs an action key or a duration"
    if sum(k in d for k in _ACTION_KEYS) > 1:
        return f"more than one action key of {list(_ACTION_KEYS)}"
    return None


def _cosine_direction(p: tuple[float, float], q: tuple[float, float]) -> str | None:
    """``evaluator.py::_get_direction``: the direction of largest cosine with p -> q, checked in
    the order up, down, left, right (the first maximum wins); ``None`` for a zero vector."""
    vx, vy = q[0] - p[0], q[1] - p[1]
    n = math.sqrt(vx**2 + vy**2)
    if n == 0:
        return None
    best, best_cos = None, -math.inf
    for name, (dx, dy) in (("up", (0, -1)), ("down", (0, 1)), ("left", (-1, 0)), ("right", (1, 0))):
        c = (vx / n * dx + vy / n * dy) / math.sqrt(dx**2 + dy**2)
        if c > best_cos:
            best, best_cos = name, c
    return best


def _as_run(text: str, *, paper: bool) -> Action:
    """The AgentCPM-GUI pipeline's reading (module docstring, strict reading)."""
    try:
        d = json_loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise FormatFail(f"not one JSON object (the pipeline uses json.loads on the whole output): {e}") from None
    why = schema_error(d, paper=paper)
    if why is not None:
        raise FormatFail(f"schema_for_extraction.json rejects it: {why}")
    status = d.get("STATUS", "continue")
    duration = d.get("duration", DEFAULT_DURATION_MS)
    space = CoordSpaceThousand
    if status in _STOP:
        return Action(ActionType.TERMINATE, status=_STOP[status], extra={"status_raw": status})  # type: ignore[arg-type]
    if "TYPE" in d:
        return Action(ActionType.TYPE, text=d["TYPE"])
    if "POINT" in d:
        pt = space.to_norm(*d["POINT"])
        assert pt is not None  # the schema bounds POINT to 0..1000
        if "to" not in d and duration == DEFAULT_DURATION_MS:
            return Action(ActionType.CLICK, point=pt)
        if "to" in d and duration == DEFAULT_DURATION_MS:
            to = d["to"]
            if isinstance(to, str):
                return Action(ActionType.SCROLL, point=pt, direction=to, convention="finger")  # type: ignore[arg-type]
            end = space.to_norm(*to)
            assert end is not None
            direction = _cosine_direction(pt, end)
            if direction is None:
                raise FormatFail("POINT -> to has zero length: the evaluator reads 'no direction'")
            return Action(ActionType.SCROLL, point=pt, point2=end, direction=direction, convention="finger")  # type: ignore[arg-type]
        if duration > DEFAULT_DURATION_MS:
            return Action(ActionType.LONG_PRESS, point=pt, duration_ms=int(duration))
    if "PRESS" in d:
        return Action(ActionType.PRESS, key=_PRESS[d["PRESS"]])  # type: ignore[arg-type]
    # action_map's last branch: every remaining output has a duration (parse_action fills 200)
    return Action(
        ActionType.WAIT, duration_ms=int(duration), extra={"read_as_stop": sorted(set(d) & {*_ACTION_KEYS, "to"})}
    )


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
        pipeline = ctx.reading("agentcpm", ("agentcpm", "agentcpm_paper"))
        if pipeline is not None:
            return self._ok(_as_run(text, paper=pipeline == "agentcpm_paper"), text)
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
