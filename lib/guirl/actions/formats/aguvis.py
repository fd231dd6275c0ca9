"""Aguvis pyautogui / mobile code actions with normalised [0, 1] coordinates.

Conventions (sources): Aguvis ``src/aguvis/constants.py`` function list and the mapping in
AgentCPM-GUI ``eval/run_predict_aguvis.py::mapping_actions`` (the action is the last line of
the output): ``pyautogui.click(x=0.5, y=0.3)``, ``pyautogui.write(message='...')``,
``pyautogui.scroll(page=n)`` / ``pyautogui.hscroll(page=n)``, ``pyautogui.press('enter')``,
``mobile.swipe(from_coord=[x, y], to_coord=[x, y])``, ``mobile.home()``, ``mobile.back()``,
``mobile.long_press(x=, y=)``, ``mobile.open_app(app_name='')``, ``mobile.wait(seconds=)``,
``mobile.terminate(status='success'|'failure')``, ``answer(text)``.

* Coordinates: floats in [0, 1], written with 4 decimals.
* ``scroll(page=v)``: mouse-wheel semantics, i.e. **content** convention: ``v > 0`` -> up,
  ``v < 0`` -> down; ``hscroll``: ``v > 0`` -> right, ``v < 0`` -> left. (AgentCPM-GUI maps
  ``v > 0`` to its finger ``to: "up"`` without reversal; see :mod:`guirl.methods.agentcpm.mapping`.)
  ``mobile.swipe`` is a finger gesture.
* ``mobile.wait(seconds=s)`` -> duration ``s*1000`` ms.
* A "Thought: ..." line before the code is returned as the thought.

Round-trip tolerance: 0.5e-4 per axis.
"""

from __future__ import annotations

import re

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    fmt_num,
    number,
    point_in,
    py_call,
    py_str,
    scroll_from_points,
    text_arg,
)
from guirl.actions.types import Action, ActionType, ParseResult

_CALL_START = re.compile(r"^(pyautogui\.|mobile\.|answer\()")
_STATUS = {"success": "success", "failure": "fail", "fail": "fail"}


def _arg(args: list, kw: dict, name: str, pos: int = 0):
    if name in kw:
        return kw[name]
    if len(args) > pos:
        return args[pos]
    raise FormatFail(f"missing argument {name!r}")


class AguvisFormat(ActionFormat):
    name = "aguvis"
    coord_kind = "normalized"
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
            ActionType.ANSWER,
        }
    )
    keeps = {ActionType.LONG_PRESS: frozenset({"point"})}

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.PRESS and action.key == "recent":
            return "format 'aguvis' cannot express a 'press' action with key 'recent'"
        return None

    def _project(self, action: Action, ctx: FormatContext) -> Action:
        a = super()._project(action, ctx)
        if a.type is ActionType.SCROLL:
            from dataclasses import replace

            if a.point is not None and a.point2 is not None:
                return a  # mobile.swipe: finger points (convention fixed by ActionFormat.project)
            return replace(a, point=None, point2=None)
        return a

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        code = next((ln for ln in reversed(lines) if _CALL_START.match(ln)), None)
        if code is None:
            raise FormatFail("no pyautogui./mobile./answer( call in output")
        tm = re.search(r"Thought:(.*?)(?=\n|$)", text)
        thought = tm.group(1).strip() if tm else None
        name, args, kw = py_call(code)
        sp = ctx.space("normalized")
        if name in ("pyautogui.click", "mobile.long_press"):
            p = point_in(sp, [_arg(args, kw, "x", 0), _arg(args, kw, "y", 1)])
            a = Action(ActionType.CLICK if name == "pyautogui.click" else ActionType.LONG_PRESS, point=p)
        elif name in ("pyautogui.write", "pyautogui.typewrite"):
            a = Action(ActionType.TYPE, text=text_arg(_arg(args, kw, "message"), "message"))
        elif name in ("pyautogui.scroll", "pyautogui.hscroll"):
            v = number(kw.get("page", kw.get("clicks", args[0] if args else None)), "page")
            if v == 0:
                raise FormatFail("scroll amount is 0")
            if name == "pyautogui.scroll":
                d = "up" if v > 0 else "down"
            else:
                d = "right" if v > 0 else "left"
            a = Action(ActionType.SCROLL, direction=d, convention="content")  # type: ignore[arg-type]
        elif name == "mobile.swipe":
            a = scroll_from_points(
                point_in(sp, _arg(args, kw, "from_coord", 0), "from_coord"),
                point_in(sp, _arg(args, kw, "to_coord", 1), "to_coord"),
                "content",
            )
        elif name == "pyautogui.press":
            k = _arg(args, kw, "keys")
            if k != "enter":
                raise FormatFail(f"unsupported key {k!r} (only 'enter')")
            a = Action(ActionType.PRESS, key="enter")
        elif name in ("mobile.home", "mobile.back"):
            a = Action(ActionType.PRESS, key=name.split(".")[1])  # type: ignore[arg-type]
        elif name == "mobile.open_app":
            a = Action(ActionType.OPEN_APP, text=text_arg(_arg(args, kw, "app_name"), "app_name"))
        elif name == "mobile.wait":
            s = kw.get("seconds", args[0] if args else None)
            ms = None
            if s is not None:
                sec = number(s, "seconds")
                if sec < 0:
                    raise FormatFail("seconds must be >= 0")
                ms = int(round(sec * 1000))
            a = Action(ActionType.WAIT, duration_ms=ms)
        elif name == "mobile.terminate":
            st = _arg(args, kw, "status")
            if not isinstance(st, str) or st not in _STATUS:
                raise FormatFail(f"terminate status must be 'success' or 'failure', got {st!r}")
            a = Action(ActionType.TERMINATE, status=_STATUS[st])  # type: ignore[arg-type]
        elif name == "answer":
            a = Action(ActionType.ANSWER, text=text_arg(_arg(args, kw, "text"), "text"))
        else:
            raise FormatFail(f"unsupported Aguvis call {name!r}")
        return self._ok(a, text, thought)

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        sp = ctx.space("normalized")
        a, t = action, action.type

        def xy(p: tuple[float, float]) -> tuple[str, str]:
            x, y = sp.from_norm(p)
            return f"{x:.4f}", f"{y:.4f}"

        if t in (ActionType.CLICK, ActionType.LONG_PRESS):
            x, y = xy(a.point)  # type: ignore[arg-type]
            fn = "pyautogui.click" if t is ActionType.CLICK else "mobile.long_press"
            code = f"{fn}(x={x}, y={y})"
        elif t is ActionType.TYPE:
            code = f"pyautogui.write(message={py_str(a.text)})"  # type: ignore[arg-type]
        elif t is ActionType.SCROLL:
            if a.point is not None and a.point2 is not None:
                (x1, y1), (x2, y2) = xy(a.point), xy(a.point2)
                code = f"mobile.swipe(from_coord=[{x1}, {y1}], to_coord=[{x2}, {y2}])"
            else:
                fn = "pyautogui.scroll" if a.direction in ("up", "down") else "pyautogui.hscroll"
                code = f"{fn}(page={1 if a.direction in ('up', 'right') else -1})"
        elif t is ActionType.PRESS:
            code = "pyautogui.press('enter')" if a.key == "enter" else f"mobile.{a.key}()"
        elif t is ActionType.OPEN_APP:
            code = f"mobile.open_app(app_name={py_str(a.text)})"  # type: ignore[arg-type]
        elif t is ActionType.WAIT:
            code = "mobile.wait()" if a.duration_ms is None else f"mobile.wait(seconds={fmt_num(a.duration_ms / 1000)})"
        elif t is ActionType.TERMINATE:
            code = f"mobile.terminate(status={py_str('success' if a.status == 'success' else 'failure')})"
        else:
            code = f"answer({py_str(a.text)})"  # type: ignore[arg-type]
        head = f"Thought: {thought}\n" if thought is not None else ""
        return head + code
