"""CES (Coordinator-Executor-State tracker) outputs.

* ``ces_executor``: the GUI-R1-style executor answer
  ``<think>...</think><answer>[{'action': 'click', 'point': [x, y], 'input_text': 'no input text'}]</answer>``
  -- a Python-literal list of dicts (single quotes). Vocabulary and placeholders from the
  GUI-R1 AndroidControl prompt: actions wait, long_press, click, press_back, press_home, type,
  open_app, scroll, complete (plus ``enter`` from the GUI-R1 web prompt); ``point`` is
  ``[-100, -100]`` when unused; ``input_text`` is ``'no input text'`` when unused, the text for
  type / open_app, and the **content** direction (AndroidControl convention) for scroll.
  ``point`` is in absolute pixels of the image the model saw (Qwen2.5-VL ``smart_resize``;
  GUI-R1 rewards compare it with the ground-truth box scaled by the image size).
  Round-trip tolerance: half a resized pixel per axis.
* ``ces_coordinator`` / ``ces_state_tracker``: ``<think>...</think><answer>...</answer>`` whose
  answer is free text (the Coordinator's next sub-instruction, the State Tracker's compressed
  task state). :func:`parse_think_answer` returns a :class:`TextResult`; it never raises.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    point_in,
    tag,
    text_arg,
)
from guirl.actions.types import Action, ActionType, ParseResult

NO_TEXT = "no input text"
NO_POINT = [-100, -100]

_SIMPLE = {
    "wait": Action(ActionType.WAIT),
    "press_back": Action(ActionType.PRESS, key="back"),
    "press_home": Action(ActionType.PRESS, key="home"),
    "enter": Action(ActionType.PRESS, key="enter"),
    "complete": Action(ActionType.TERMINATE, status="success"),
}


class CESExecutorFormat(ActionFormat):
    name = "ces_executor"
    coord_kind = "resized"
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
        if action.type is ActionType.PRESS and action.key == "recent":
            return "format 'ces_executor' cannot express a 'press' action with key 'recent'"
        if action.type is ActionType.TERMINATE and action.status != "success":
            return "format 'ces_executor' cannot express a 'terminate' action with status 'fail' ('complete' only)"
        if action.type in (ActionType.TYPE, ActionType.OPEN_APP) and action.text == NO_TEXT:
            return f"format 'ces_executor' cannot express text {NO_TEXT!r} (the placeholder for no text)"
        return None

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        body = tag(text, "answer")
        if body is None:
            raise FormatFail("no <answer>...</answer> block")
        try:
            val: Any = ast.literal_eval(body)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            raise FormatFail(f"answer is not a Python literal: {body[:80]!r}") from None
        if isinstance(val, list):
            if not val:
                raise FormatFail("answer list is empty")
            val = val[0]
        if not isinstance(val, dict):
            raise FormatFail("answer must be a dict or a list of dicts")
        kind = val.get("action")
        if not isinstance(kind, str):
            raise FormatFail(f"missing or non-string 'action': {kind!r}")
        kind = kind.strip().lower()
        if kind in _SIMPLE:
            a = _SIMPLE[kind]
        elif kind in ("click", "long_press"):
            if "point" not in val:
                raise FormatFail(f"{kind} needs 'point'")
            p = point_in(ctx.space("resized"), val["point"])
            a = Action(ActionType.CLICK if kind == "click" else ActionType.LONG_PRESS, point=p)
        elif kind in ("type", "open_app"):
            t = text_arg(val.get("input_text"), "input_text")
            if t == NO_TEXT:
                raise FormatFail(f"{kind} needs a specific input_text")
            a = Action(ActionType.TYPE if kind == "type" else ActionType.OPEN_APP, text=t)
        elif kind == "scroll":
            a = Action(ActionType.SCROLL, direction=check_direction(val.get("input_text")), convention="content")  # type: ignore[arg-type]
        else:
            raise FormatFail(f"unsupported executor action {kind!r}")
        return self._ok(a, text, tag(text, "think"))

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        a, t = action, action.type
        point: list[Any] = list(NO_POINT)
        text = NO_TEXT
        if t in (ActionType.CLICK, ActionType.LONG_PRESS):
            kind = t.value
            point = list(ctx.space("resized").from_norm(a.point))  # type: ignore[arg-type]
        elif t in (ActionType.TYPE, ActionType.OPEN_APP):
            kind, text = t.value, a.text  # type: ignore[assignment]
        elif t is ActionType.SCROLL:
            kind, text = "scroll", a.direction  # type: ignore[assignment]
        elif t is ActionType.PRESS:
            kind = "enter" if a.key == "enter" else f"press_{a.key}"
        elif t is ActionType.WAIT:
            kind = "wait"
        else:
            kind = "complete"
        ans = repr([{"action": kind, "point": point, "input_text": text}])
        head = f"<think>{thought}</think>" if thought is not None else ""
        return f"{head}<answer>{ans}</answer>"


@dataclass(frozen=True)
class TextResult:
    """Parsed ``<think>..</think><answer>..</answer>`` text output: ``value`` or a ``reason``."""

    value: str | None
    reason: str = ""
    thought: str | None = None
    raw: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None


def parse_think_answer(text: str, role: str = "ces") -> TextResult:
    """Parse a Coordinator / State Tracker output. Never raises.

    Fails (``value=None``) when there is no ``<answer>`` block or the answer is empty.
    """
    try:
        if not isinstance(text, str):
            return TextResult(None, f"{role}: output must be str, got {type(text).__name__}")
        ans = tag(text, "answer")
        thought = tag(text, "think")
        if ans is None:
            return TextResult(None, f"{role}: no <answer>...</answer> block", thought, text)
        if not ans:
            return TextResult(None, f"{role}: empty <answer>", thought, text)
        return TextResult(ans, "", thought, text)
    except Exception as e:  # noqa: BLE001
        return TextResult(None, f"{role}: unexpected {type(e).__name__}: {e}", None, "")


def parse_ces_coordinator(text: str) -> TextResult:
    """Coordinator output -> the next sub-instruction for the Executor."""
    return parse_think_answer(text, "ces_coordinator")


def parse_ces_state_tracker(text: str) -> TextResult:
    """State Tracker output -> the compressed task state."""
    return parse_think_answer(text, "ces_state_tracker")


def format_think_answer(answer: str, thought: str | None = None) -> str:
    """Inverse of :func:`parse_think_answer` (``answer`` must be non-empty after strip)."""
    if not answer.strip():
        raise ValueError("answer must be non-empty")
    head = f"<think>{thought}</think>" if thought is not None else ""
    return f"{head}<answer>{answer}</answer>"
