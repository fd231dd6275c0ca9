"""Qwen2.5-VL ``mobile_use`` vocabulary: CCPO / UI-S1 ``<action>{json}</action>`` and the plain
Qwen2.5-VL ``<tool_call>`` wrapper.

Conventions (sources):

* Arguments of the ``mobile_use`` tool (qwen-agent ``MobileUse`` tool description, as used by
  AgentCPM-GUI ``eval/utils/qwen_mobile_tool.py`` and UI-S1; CCPO App. A.9): ``action`` in key,
  click, long_press, swipe, type, answer, system_button, open, wait, terminate. ``key`` sends an
  Android key code (``text``): KEYCODE_BACK / HOME / ENTER / APP_SWITCH (and the bare names) are
  the canonical keys; any other code fails with its name. The tolerant reading also takes the
  words of CCPO's other test files (GUI-Odyssey's ``SCROLL`` / ``PRESS_HOME`` / ``PRESS_BACK`` /
  ``PRESS_RECENT`` / ``COMPLETE`` / ``IMPOSSIBLE``, Mind2Web's ``hover`` / ``select`` / ``enter``);
  their coordinates are read in this format's space (the evaluators' own readings are the strict
  pipelines); ``coordinate`` / ``coordinate2`` ``[x, y]``; ``text`` for type / answer / open;
  ``time`` in **seconds** for long_press and wait; ``button`` in Back / Home / Menu / Enter;
  ``status`` in success / failure.
* Coordinates are absolute pixels of the image Qwen2.5-VL saw after ``smart_resize`` (UI-S1
  ``evaluation/qwenvl_utils.py::evaluate_android_control_action`` divides by the resized size;
  AgentCPM-GUI ``qwen2_5_2_minicpm`` divides by ``resized_width/height``). ``FormatContext``
  supplies the resized size or min/max pixels (UI-S1 uses ``max_pixels = 12800*28*28``).
* ``swipe`` is a finger gesture: ``coordinate -> coordinate2`` gives the finger direction
  (dominant axis, tie -> vertical, as AgentCPM-GUI ``qwen2_5_2_minicpm``); a ``direction`` field
  (used by some UI-S1 / GUI-Owl prompts) is read as a finger direction too.
* ``Menu`` is the recent-apps / background menu button -> canonical key ``recent``.
* Out-of-screen coordinate -> failure ``"point outside the screen"``.

Round-trip tolerance: half a resized pixel per axis, ``0.5 / min(W_r, H_r)``.
"""

from __future__ import annotations

import json
from typing import Any

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
    tag,
    text_arg,
)
from guirl.actions.formats.mobile_use_pipelines import PIPELINES, READERS
from guirl.actions.types import Action, ActionType, ParseResult

_BUTTONS = {"back": "back", "home": "home", "enter": "enter", "menu": "recent"}
_BUTTON_OUT = {"back": "Back", "home": "Home", "enter": "Enter", "recent": "Menu"}
_STATUS = {"success": "success", "failure": "fail", "fail": "fail"}
_STATUS_OUT = {"success": "success", "fail": "failure"}
_KEYCODES = {
    "KEYCODE_BACK": "back",
    "KEYCODE_HOME": "home",
    "KEYCODE_ENTER": "enter",
    "KEYCODE_APP_SWITCH": "recent",
    "BACK": "back",
    "HOME": "home",
    "ENTER": "enter",
    "APP_SWITCH": "recent",
}
_ODYSSEY_WORDS = {
    "press_home": Action(ActionType.PRESS, key="home"),
    "press_back": Action(ActionType.PRESS, key="back"),
    "press_recent": Action(ActionType.PRESS, key="recent"),
    "complete": Action(ActionType.TERMINATE, status="success"),
    "impossible": Action(ActionType.TERMINATE, status="fail"),
}

MOBILE_USE_TYPES = frozenset(
    {
        ActionType.CLICK,
        ActionType.LONG_PRESS,
        ActionType.SCROLL,
        ActionType.TYPE,
        ActionType.PRESS,
        ActionType.OPEN_APP,
        ActionType.WAIT,
        ActionType.TERMINATE,
        ActionType.ANSWER,
    }
)


def _seconds_to_ms(v: Any, what: str) -> int:
    s = number(v, what)
    if s < 0:
        raise FormatFail(f"{what} must be >= 0 seconds, got {v!r}")
    return int(round(s * 1000))


def args_to_action(args: Any, ctx: FormatContext, space_kind: str = "resized") -> Action:
    """``mobile_use`` arguments dict -> canonical action (raises :class:`FormatFail`)."""
    if not isinstance(args, dict):
        raise FormatFail(f"arguments must be a JSON object, got {type(args).__name__}")
    if "action" not in args:
        raise FormatFail("missing field 'action'")
    kind = args["action"]
    if not isinstance(kind, str):
        raise FormatFail(f"'action' must be a string, got {kind!r}")
    kind = kind.strip().lower()
    space = ctx.space(space_kind)  # type: ignore[arg-type]

    def coord(key: str) -> tuple[float, float]:
        if key not in args:
            raise FormatFail(f"{kind} needs field {key!r}")
        return point_in(space, args[key], key)

    if kind in _ODYSSEY_WORDS:
        return _ODYSSEY_WORDS[kind]
    if kind == "scroll":  # GUI-Odyssey's word for a swipe
        kind = "swipe"
    if kind == "key":
        code = args.get("text")
        if not isinstance(code, str) or code.strip().upper() not in _KEYCODES:
            raise FormatFail(f"key code {code!r} has no canonical key; known: {sorted(_KEYCODES)}")
        return Action(ActionType.PRESS, key=_KEYCODES[code.strip().upper()])  # type: ignore[arg-type]
    if kind == "hover":
        return Action(ActionType.HOVER, point=coord("coordinate"))
    if kind == "enter":
        p = coord("coordinate") if args.get("coordinate") is not None else None
        return Action(ActionType.PRESS, key="enter", point=p)
    if kind == "select":
        v = args.get("value", args.get("text"))
        return Action(ActionType.SELECT, point=coord("coordinate"), text=text_arg(v, "value"))
    if kind == "click":
        return Action(ActionType.CLICK, point=coord("coordinate"))
    if kind == "long_press":
        ms = _seconds_to_ms(args["time"], "time") if args.get("time") is not None else None
        return Action(ActionType.LONG_PRESS, point=coord("coordinate"), duration_ms=ms)
    if kind == "swipe":
        if args.get("coordinate2") is not None:
            return scroll_from_points(coord("coordinate"), coord("coordinate2"), "finger")
        if args.get("direction") is not None:
            start = coord("coordinate") if args.get("coordinate") is not None else None
            return Action(
                ActionType.SCROLL, point=start, direction=check_direction(args["direction"]), convention="finger"
            )  # type: ignore[arg-type]
        raise FormatFail("swipe needs 'coordinate2' (or 'direction')")
    if kind in ("type", "answer", "open"):
        if "text" not in args:
            raise FormatFail(f"{kind} needs field 'text'")
        t = {"type": ActionType.TYPE, "answer": ActionType.ANSWER, "open": ActionType.OPEN_APP}[kind]
        # a web type acts on an element (Mind2Web): its point, when the answer gives one
        p = coord("coordinate") if kind == "type" and args.get("coordinate") is not None else None
        return Action(t, text=text_arg(args["text"], "text"), point=p)
    if kind == "system_button":
        b = args.get("button")
        if not isinstance(b, str) or b.strip().lower() not in _BUTTONS:
            raise FormatFail(f"button must be one of Back/Home/Menu/Enter, got {b!r}")
        return Action(ActionType.PRESS, key=_BUTTONS[b.strip().lower()])  # type: ignore[arg-type]
    if kind == "wait":
        ms = _seconds_to_ms(args["time"], "time") if args.get("time") is not None else None
        return Action(ActionType.WAIT, duration_ms=ms)
    if kind == "terminate":
        s = args.get("status")
        if not isinstance(s, str) or s.strip().lower() not in _STATUS:
            raise FormatFail(f"terminate status must be success/failure, got {s!r}")
        return Action(ActionType.TERMINATE, status=_STATUS[s.strip().lower()])  # type: ignore[arg-type]
    raise FormatFail(f"unsupported mobile_use action {kind!r}")


def action_to_args(a: Action, ctx: FormatContext, space_kind: str = "resized") -> dict[str, Any]:
    """Canonical action (finger convention for scroll) -> ``mobile_use`` arguments dict."""
    space = ctx.space(space_kind)  # type: ignore[arg-type]
    t = a.type
    if t is ActionType.CLICK:
        return {"action": "click", "coordinate": fmt_point(space, a.point)}  # type: ignore[arg-type]
    if t is ActionType.LONG_PRESS:
        d: dict[str, Any] = {"action": "long_press", "coordinate": fmt_point(space, a.point)}  # type: ignore[arg-type]
        if a.duration_ms is not None:
            d["time"] = _ms_to_seconds(a.duration_ms)
        return d
    if t is ActionType.SCROLL:
        if a.point is not None and a.point2 is not None:
            return {
                "action": "swipe",
                "coordinate": fmt_point(space, a.point),
                "coordinate2": fmt_point(space, a.point2),
            }
        d = {"action": "swipe", "direction": a.direction}
        if a.point is not None:
            d["coordinate"] = fmt_point(space, a.point)
        return d
    if t is ActionType.TYPE:
        if a.point is not None:  # a web type's element (Mind2Web); a phone types into the focused field
            return {"action": "type", "text": a.text, "coordinate": fmt_point(space, a.point)}
        return {"action": "type", "text": a.text}
    if t is ActionType.ANSWER:
        return {"action": "answer", "text": a.text}
    if t is ActionType.OPEN_APP:
        return {"action": "open", "text": a.text}
    if t is ActionType.PRESS:
        return {"action": "system_button", "button": _BUTTON_OUT[a.key]}  # type: ignore[index]
    if t is ActionType.WAIT:
        d = {"action": "wait"}
        if a.duration_ms is not None:
            d["time"] = _ms_to_seconds(a.duration_ms)
        return d
    if t is ActionType.TERMINATE:
        return {"action": "terminate", "status": _STATUS_OUT[a.status]}  # type: ignore[index]
    raise AssertionError(t)  # guarded by ActionFormat.format


def _ms_to_seconds(ms: int) -> float | int:
    s = ms / 1000
    return int(s) if float(s).is_integer() else s


def _json_object(body: str, where: str) -> Any:
    body = body.strip()
    if body.startswith("```"):
        body = strip_fence(body)
    try:
        return json_loads(body)
    except json.JSONDecodeError as e:
        raise FormatFail(f"malformed JSON in {where}: {e.msg} at char {e.pos}") from None


def _thought(text: str) -> str | None:
    for name in ("think", "thinking"):
        t = tag(text, name)
        if t is not None:
            return t
    return None


class CCPOFormat(ActionFormat):
    """CCPO / UI-S1: ``<think>...</think>`` (optional) then ``<action>{mobile_use args}</action>``.

    Strict readings (``FormatContext(strict=True, pipeline=...)``): ``"ccpo_androidcontrol"``
    (default), ``"ccpo_guiodyssey"``, ``"ccpo_mind2web"``, ``"ccpo_aitw"`` and ``"uis1"``: each
    evaluation script's own reading (:mod:`guirl.actions.formats.mobile_use_pipelines`).
    """

    name = "ccpo"
    coord_kind = "resized"
    convention = "finger"
    types = MOBILE_USE_TYPES
    has_thought = True

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        pipeline = ctx.reading("ccpo_androidcontrol", PIPELINES)
        if pipeline is not None:
            return self._ok(READERS[pipeline](text, ctx), text, _thought(text))
        body = tag(text, "action")
        if body is None:
            raise FormatFail("no <action>...</action> block")
        args = _json_object(body, "<action>")
        return self._ok(args_to_action(args, ctx, self.coord_kind), text, _thought(text))

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        body = json.dumps(action_to_args(action, ctx, self.coord_kind), ensure_ascii=False)
        head = f"<think>{thought}</think>\n" if thought is not None else ""
        return f"{head}<action>{body}</action>"


class QwenMobileUseFormat(CCPOFormat):
    """Qwen2.5-VL: optional ``<thinking>...</thinking>`` then
    ``<tool_call>\\n{"name": "mobile_use", "arguments": {...}}\\n</tool_call>``."""

    name = "qwen_mobile_use"

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        body = tag(text, "tool_call")
        if body is None:
            raise FormatFail("no <tool_call>...</tool_call> block")
        call = _json_object(body, "<tool_call>")
        if not isinstance(call, dict):
            raise FormatFail("tool call must be a JSON object")
        if call.get("name") != "mobile_use":
            raise FormatFail(f"tool name must be 'mobile_use', got {call.get('name')!r}")
        if "arguments" not in call:
            raise FormatFail("tool call has no 'arguments'")
        return self._ok(args_to_action(call["arguments"], ctx, self.coord_kind), text, _thought(text))

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        call = {"name": "mobile_use", "arguments": action_to_args(action, ctx, self.coord_kind)}
        head = f"<thinking>\n{thought}\n</thinking>\n" if thought is not None else ""
        return f"{head}<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"
