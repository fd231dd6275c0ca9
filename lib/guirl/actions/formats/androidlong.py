"""AndroidLong (AndroidLab / AutoGLM-style) ``do(...)`` / ``finish(...)`` calls.

Conventions (sources): AndroidLab's action space (THUDM/Android-Lab ``templates``;
``do(action="Tap", element=[x1, y1, x2, y2])``, ``do(action="Type", text="...")``,
``do(action="Swipe", element=..., direction="up")``, ``do(action="Long Press", element=...)``,
``do(action="Back")``, ``do(action="Home")``, ``do(action="Wait")``, ``do(action="Launch", app="...")``,
``finish(message="...")``) and the AutoGLM variants (``element=[x, y]``, ``do(action="Swipe",
start=[..], end=[..])``, ``do(action="Enter")``, ``do(action="Wait", duration="2 seconds")``).
An optional ``<think>..</think><answer>..</answer>`` wrapper (AutoGLM) is accepted.

* Units: ``element`` in **screen pixels** of the original screenshot (AndroidLab bounds); a
  4-number box (the form AndroidLong's prompt asks for: top-left and bottom-right of one of the
  screen's elements) is reduced to its centre and kept, normalised, in ``extra["box"]``.
  ``format`` writes the box form ``element=[x1, y1, x2, y2]`` when the action carries
  ``extra["box"]`` (the element's normalised box), else the point form ``element=[x, y]``.
* ``Swipe`` takes an optional ``dist`` (``long`` / ``medium`` / ``short``), kept in
  ``extra["dist"]`` and written back.
* ``Swipe`` direction: **finger** convention (a swipe gesture); ``start``/``end`` give it from
  the points.
* ``finish(message=...)`` -> terminate success (message in ``extra["message"]``); terminate fail
  and answer cannot be expressed.

Round-trip tolerance: half a screen pixel per axis.
"""

from __future__ import annotations

import re

from guirl.actions.formats._base import (
    OUTSIDE,
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    fmt_num,
    number,
    point_in,
    py_call,
    py_dstr,
    scroll_from_points,
    tag,
    text_arg,
)
from guirl.actions.types import Action, ActionType, ParseResult

_WAIT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(?:s|sec|secs|second|seconds)?\s*$")


class AndroidLongFormat(ActionFormat):
    name = "androidlong"
    coord_kind = "pixel"
    convention = "finger"
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
    keeps = {ActionType.LONG_PRESS: frozenset({"point"})}

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.PRESS and action.key == "recent":
            return "format 'androidlong' cannot express a 'press' action with key 'recent'"
        if action.type is ActionType.TERMINATE and action.status != "success":
            return "format 'androidlong' cannot express a 'terminate' action with status 'fail' (finish() only)"
        return None

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        thought = tag(text, "think")
        body = tag(text, "answer")
        src = body if body is not None else text
        starts = [m.start() for m in re.finditer(r"\b(do|finish)\(", src)]
        if not starts:
            raise FormatFail("no do(...) or finish(...) call")
        first = starts[0] if body is not None else starts[-1]
        call = src[first:].strip()
        if body is None and thought is None:
            thought = src[:first].strip() or None
        try:
            name, args, kw = py_call(call)
        except FormatFail:
            end = call.rfind(")")
            name, args, kw = py_call(call[: end + 1]) if end > 0 else py_call(call)
        if args:
            raise FormatFail(f"{name}() takes keyword arguments only")
        sp = ctx.space("pixel")
        if name == "finish":
            msg = kw.get("message", "")
            return self._ok(Action(ActionType.TERMINATE, status="success", extra={"message": msg}), text, thought)
        if name != "do":
            raise FormatFail(f"unknown call {name!r}")
        act = kw.get("action")
        if not isinstance(act, str):
            raise FormatFail(f'do() needs action="...", got {act!r}')
        extra: dict = {}
        if isinstance(kw.get("element"), (list, tuple)) and len(kw["element"]) == 4:
            x1, y1, x2, y2 = (number(v, "element") for v in kw["element"])
            box = (x1 / ctx.width, y1 / ctx.height, x2 / ctx.width, y2 / ctx.height)
            if not all(0.0 <= v <= 1.0 for v in box) or box[2] < box[0] or box[3] < box[1]:
                raise FormatFail(
                    f"{OUTSIDE}: element box {list(kw['element'])} is not a box on the {ctx.width}x{ctx.height} screen"
                )
            extra["box"] = box
        if act in ("Tap", "Long Press"):
            if "element" not in kw:
                raise FormatFail(f"{act} needs element=[x, y] or [x1, y1, x2, y2]")
            p = point_in(sp, kw["element"], "element")
            a = Action(ActionType.CLICK if act == "Tap" else ActionType.LONG_PRESS, point=p, extra=extra)
        elif act == "Type":
            a = Action(ActionType.TYPE, text=text_arg(kw.get("text"), "text"))
        elif act == "Swipe":
            if "start" in kw and "end" in kw:
                a = scroll_from_points(point_in(sp, kw["start"], "start"), point_in(sp, kw["end"], "end"), "finger")
            else:
                start = point_in(sp, kw["element"], "element") if kw.get("element") is not None else None
                if kw.get("dist") is not None:
                    if kw["dist"] not in ("long", "medium", "short"):
                        raise FormatFail(f"Swipe dist must be long, medium or short, got {kw['dist']!r}")
                    extra["dist"] = kw["dist"]
                a = Action(
                    ActionType.SCROLL,
                    point=start,
                    direction=check_direction(kw.get("direction")),
                    convention="finger",
                    extra=extra,
                )  # type: ignore[arg-type]
        elif act in ("Back", "Home", "Enter"):
            a = Action(ActionType.PRESS, key=act.lower())  # type: ignore[arg-type]
        elif act == "Launch":
            a = Action(ActionType.OPEN_APP, text=text_arg(kw.get("app"), "app"))
        elif act == "Wait":
            dur = kw.get("duration")
            ms = None
            if dur is not None:
                m = _WAIT.match(str(dur))
                if not m:
                    raise FormatFail(f"Wait duration must be like '2 seconds', got {dur!r}")
                ms = int(round(number(float(m.group(1)), "wait") * 1000))
            a = Action(ActionType.WAIT, duration_ms=ms)
        else:
            raise FormatFail(f"unsupported do(action={act!r})")
        return self._ok(a, text, thought)

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        sp = ctx.space("pixel")
        a, t = action, action.type

        dist = f', dist="{a.extra["dist"]}"' if a.extra.get("dist") in ("long", "medium", "short") else ""

        def el(p: tuple[float, float], use_box: bool = True) -> str:
            box = a.extra.get("box")
            if use_box and isinstance(box, (list, tuple)) and len(box) == 4:
                x1, y1 = sp.from_norm((box[0], box[1]))
                x2, y2 = sp.from_norm((box[2], box[3]))
                return f"[{x1}, {y1}, {x2}, {y2}]"
            x, y = sp.from_norm(p)
            return f"[{x}, {y}]"

        if t in (ActionType.CLICK, ActionType.LONG_PRESS):
            call = f'do(action="{"Tap" if t is ActionType.CLICK else "Long Press"}", element={el(a.point)})'  # type: ignore[arg-type]
        elif t is ActionType.TYPE:
            call = f'do(action="Type", text={py_dstr(a.text)})'  # type: ignore[arg-type]
        elif t is ActionType.SCROLL:
            if a.point is not None and a.point2 is not None:
                call = f'do(action="Swipe", start={el(a.point, False)}, end={el(a.point2, False)})'
            elif a.point is not None:
                call = f'do(action="Swipe", element={el(a.point)}, direction="{a.direction}"{dist})'
            else:
                call = f'do(action="Swipe", direction="{a.direction}"{dist})'
        elif t is ActionType.PRESS:
            call = f'do(action="{a.key.capitalize()}")'  # type: ignore[union-attr]
        elif t is ActionType.OPEN_APP:
            call = f'do(action="Launch", app={py_dstr(a.text)})'  # type: ignore[arg-type]
        elif t is ActionType.WAIT:
            call = (
                'do(action="Wait")'
                if a.duration_ms is None
                else f'do(action="Wait", duration="{fmt_num(a.duration_ms / 1000)} seconds")'
            )
        else:
            call = 'finish(message="")'
        head = f"<think>{thought}</think>" if thought is not None else ""
        return f"{head}<answer>{call}</answer>"
