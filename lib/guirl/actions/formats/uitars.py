"""UI-TARS (1.0) mobile action space: ``Thought: ...\\nAction: click(start_box='(x,y)')``.

Conventions (sources):

* Action space from the UI-TARS mobile prompt (as reproduced in AgentCPM-GUI
  ``eval/run_predict_ui_tars.py``): ``click(start_box='<|box_start|>(x1,y1)<|box_end|>')``,
  ``long_press(start_box=..., time='')``, ``type(content='')``, ``scroll(direction='...')``
  (``start_box`` optional, as in the UI-TARS computer action space), ``open_app(app_name='')``,
  ``press_back()``, ``press_home()``, ``wait()``, ``finished()``. ``press_enter()`` is accepted
  and written because AgentCPM-GUI ``aitw_2_uitars`` uses it in UI-TARS histories.
* Coordinates: UI-TARS-1.0 relative coordinates in [0, 1000] (AgentCPM-GUI ``uitars2minicpm``
  copies them into its [0, 1000] ``POINT`` unchanged). A 4-number box is reduced to its centre.
* ``scroll(direction=...)`` is the **content** direction: AgentCPM-GUI ``uitars2minicpm``
  reverses it ("need reverse direction") to get the finger direction.
* ``long_press(time='...')`` is milliseconds (``uitars2minicpm`` copies it into ``duration``).
* ``finished()`` submits the task "regardless of whether it succeeds or fails" -> terminate
  success; terminate fail cannot be expressed.
* String arguments are Python single-quoted literals (quotes/backslashes escaped).
* The UI-TARS-1.5 spelling (AndroidLong's baseline prompt) is read too:
  ``click(point='<point>x y</point>')``, ``long_press(point=...)``, ``scroll(point=...,
  direction=...)`` and ``drag(start_point=..., end_point=...)`` -- a swipe between two points,
  read as a scroll in the finger direction of start -> end; ``finished(content=...)``. Its points
  are read on the same ``[0, 1000]`` grid (the prompt does not state the space).

Round-trip tolerance: 0.5/1000 per axis.
"""

from __future__ import annotations

import re

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    fmt_num,
    number,
    point_in,
    py_call,
    py_str,
    scroll_from_points,
    text_arg,
    to_float,
)
from guirl.actions.types import Action, ActionType, ParseResult

_BOX = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")


def parse_box(s: object, ctx: FormatContext, what: str = "start_box") -> tuple[float, float]:
    """``'<|box_start|>(x,y)<|box_end|>'`` / ``'(x1,y1,x2,y2)'`` / ``'[x, y]'`` /
    ``'<point>x y</point>'`` in [0, 1000] -> normalised."""
    if not isinstance(s, str):
        raise FormatFail(f"{what} must be a string like '(x,y)', got {s!r}")
    pm = re.fullmatch(r"\s*<point>\s*([-+0-9.eE]+)[\s,]+([-+0-9.eE]+)\s*</point>\s*", s)
    if pm:
        return point_in(ctx.space("thousand"), [to_float(pm.group(1), what), to_float(pm.group(2), what)], what)
    inner = s.replace("<|box_start|>", "").replace("<|box_end|>", "").strip()
    if not re.fullmatch(r"[\(\[][^()\[\]]*[\)\]]", inner):
        raise FormatFail(f"{what} must look like '(x,y)', got {s!r}")
    nums = [float(m) for m in _BOX.findall(inner)]
    return point_in(ctx.space("thousand"), nums, what)


class UITarsFormat(ActionFormat):
    name = "uitars"
    coord_kind = "thousand"
    convention = "content"
    has_thought = True
    types = frozenset(
        {
            ActionType.CLICK,
            ActionType.LONG_PRESS,
            ActionType.TYPE,
            ActionType.SCROLL,
            ActionType.OPEN_APP,
            ActionType.PRESS,
            ActionType.WAIT,
            ActionType.TERMINATE,
        }
    )
    keeps = {ActionType.SCROLL: frozenset({"point", "direction", "convention"}), ActionType.WAIT: frozenset()}

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.PRESS and action.key == "recent":
            return "format 'uitars' cannot express a 'press' action with key 'recent'"
        if action.type is ActionType.TERMINATE and action.status != "success":
            return "format 'uitars' cannot express a 'terminate' action with status 'fail' (finished() only)"
        return None

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        thought = None
        # white space that stops at a newline: the same thought after strip(), in linear time
        m = re.search(r"Thought:(.*?)(?=\n[^\S\n]*(?:Action|Reflection|Action_Summary):|\Z)", text, re.DOTALL)
        if m:
            thought = m.group(1).strip()
        am = re.search(r"^[^\S\n]*Action:", text, re.MULTILINE)  # the same end as ^\s*Action:
        call = (text[am.end() :] if am else text).strip()
        if not call:
            raise FormatFail("empty action")
        name, args, kw = py_call(call)
        if args:
            raise FormatFail(f"{name}() takes keyword arguments only")
        box_kw = "point" if "point" in kw else "start_box"  # UI-TARS-1.5 / 1.0
        if name == "click":
            a = Action(ActionType.CLICK, point=parse_box(kw.get(box_kw), ctx, box_kw))
        elif name == "long_press":
            t = kw.get("time", "")
            ms = None
            if t not in ("", None):
                ms = int(round(number(to_float(t, "time") if isinstance(t, str) else t, "time")))
                if ms < 0:
                    raise FormatFail(f"time must be >= 0 ms, got {t!r}")
            a = Action(ActionType.LONG_PRESS, point=parse_box(kw.get(box_kw), ctx, box_kw), duration_ms=ms)
        elif name == "type":
            a = Action(ActionType.TYPE, text=text_arg(kw.get("content"), "content"))
        elif name == "scroll":
            start = parse_box(kw[box_kw], ctx, box_kw) if kw.get(box_kw) else None
            a = Action(
                ActionType.SCROLL, point=start, direction=check_direction(kw.get("direction")), convention="content"
            )  # type: ignore[arg-type]
        elif name == "drag":
            p = parse_box(kw.get("start_point"), ctx, "start_point")
            q = parse_box(kw.get("end_point"), ctx, "end_point")
            a = scroll_from_points(p, q, "finger", "drag")
        elif name == "open_app":
            a = Action(ActionType.OPEN_APP, text=text_arg(kw.get("app_name"), "app_name"))
        elif name in ("press_back", "press_home", "press_enter"):
            a = Action(ActionType.PRESS, key=name.split("_")[1])  # type: ignore[arg-type]
        elif name == "wait":
            a = Action(ActionType.WAIT)
        elif name == "finished":
            a = Action(ActionType.TERMINATE, status="success", extra={"content": kw.get("content", "")})
        else:
            raise FormatFail(f"unsupported UI-TARS action {name!r}")
        return self._ok(a, text, thought)

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        sp = ctx.space("thousand")

        def box(p: tuple[float, float]) -> str:
            x, y = sp.from_norm(p)
            return py_str(f"<|box_start|>({x},{y})<|box_end|>")

        a, t = action, action.type
        if t is ActionType.CLICK:
            call = f"click(start_box={box(a.point)})"  # type: ignore[arg-type]
        elif t is ActionType.LONG_PRESS:
            tm = py_str(fmt_num(a.duration_ms)) if a.duration_ms is not None else "''"
            call = f"long_press(start_box={box(a.point)}, time={tm})"  # type: ignore[arg-type]
        elif t is ActionType.TYPE:
            call = f"type(content={py_str(a.text)})"  # type: ignore[arg-type]
        elif t is ActionType.SCROLL:
            sb = f"start_box={box(a.point)}, " if a.point is not None else ""
            call = f"scroll({sb}direction={py_str(a.direction)})"  # type: ignore[arg-type]
        elif t is ActionType.OPEN_APP:
            call = f"open_app(app_name={py_str(a.text)})"  # type: ignore[arg-type]
        elif t is ActionType.PRESS:
            call = f"press_{a.key}()"
        elif t is ActionType.WAIT:
            call = "wait()"
        else:
            call = "finished()"
        head = f"Thought: {thought}\n" if thought is not None else ""
        return f"{head}Action: {call}"
