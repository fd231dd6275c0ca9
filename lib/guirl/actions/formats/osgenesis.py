"""OS-Genesis (AndroidControl-style JSON): ``low-level thought: ...\\naction: {"action_type": "click", "x": .., "y": ..}``.

Conventions (sources): AgentCPM-GUI ``eval/run_predict_os_gensis.py::os_gensis_2minicpm``
(finds ``action: `` and decodes the JSON leniently with demjson3) and the AndroidControl action
JSON (``click``/``long_press`` with ``x``, ``y``; ``scroll`` with ``direction``; ``input_text`` /
``type`` with ``text``; ``open_app`` with ``app_name``; ``navigate_home``; ``navigate_back``;
``wait``).

* Coordinates: [0, 1000] -- AgentCPM-GUI copies ``x``/``y`` into its [0, 1000] ``POINT``
  unchanged (OS-Genesis is built on Qwen2-VL relative coordinates).
* ``scroll`` direction: **content** convention (AndroidControl stores the content direction).
* Lenient decoding: strict JSON first, then a Python literal (single quotes).
* ``dismiss`` / ``get_text`` (OS-Genesis extras, with ``x``, ``y``) are read as a click at that
  point (AgentCPM-GUI Table 10: both become ``{"POINT": [x, y]}``); ``extra["action_word"]``
  keeps the word.

Round-trip tolerance: 0.5/1000 per axis.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    json_loads,
    point_in,
    text_arg,
)
from guirl.actions.types import Action, ActionType, ParseResult

_ACTION_OPEN = re.compile(r"action:\s*\{", re.IGNORECASE)


def action_object(text: str) -> tuple[int, str] | None:
    r"""``(start, object text)`` of the ``action: {...}`` of ``text``, or ``None``: the object runs
    from the first ``action: {`` to the last ``}``. What the last match of
    ``re.finditer(r"action:\s*(\{.*\})", text, re.IGNORECASE | re.DOTALL)`` captures (there is at
    most one: the greedy ``.*`` reaches the last ``}``), in linear time."""
    m = _ACTION_OPEN.search(text)
    last = text.rfind("}")
    if m is None or last < m.end():
        return None
    return m.start(), text[m.end() - 1 : last + 1]


def _decode(body: str) -> Any:
    """JSON, else a Python literal (single-quoted dicts), else :class:`FormatFail`."""
    try:
        return json_loads(body)
    except json.JSONDecodeError:
        return _literal(body)


def _literal(body: str) -> Any:
    try:
        return ast.literal_eval(body)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise FormatFail(f"malformed action JSON {body[:80]!r}") from None


class OSGenesisFormat(ActionFormat):
    name = "osgenesis"
    coord_kind = "thousand"
    convention = "content"
    has_thought = True
    types = frozenset(
        {
            ActionType.CLICK,
            ActionType.LONG_PRESS,
            ActionType.SCROLL,
            ActionType.TYPE,
            ActionType.PRESS,
            ActionType.OPEN_APP,
            ActionType.WAIT,
        }
    )
    keeps = {
        ActionType.LONG_PRESS: frozenset({"point"}),
        ActionType.SCROLL: frozenset({"direction", "convention"}),
        ActionType.WAIT: frozenset(),
    }

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.PRESS and action.key not in ("back", "home"):
            return f"format 'osgenesis' cannot express a 'press' action with key {action.key!r}"
        return None

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        found = action_object(text)
        if found is None:
            raise FormatFail("no 'action: {...}' in output")
        head = text[: found[0]].strip()
        thought = re.sub(r"^(low-level\s+)?thought:\s*", "", head, flags=re.IGNORECASE).strip() or None
        d = _decode(found[1])
        if not isinstance(d, dict):
            raise FormatFail("action must be a JSON object")
        kind = d.get("action_type")
        if not isinstance(kind, str):
            raise FormatFail(f"missing or non-string 'action_type': {kind!r}")
        sp = ctx.space("thousand")
        if kind in ("click", "long_press", "dismiss", "get_text"):
            if "x" not in d or "y" not in d:
                raise FormatFail(f"{kind} needs 'x' and 'y'")
            p = point_in(sp, [d["x"], d["y"]])
            extra = {"action_word": kind} if kind in ("dismiss", "get_text") else {}
            a = Action(ActionType.LONG_PRESS if kind == "long_press" else ActionType.CLICK, point=p, extra=extra)
        elif kind in ("type", "input_text"):
            a = Action(ActionType.TYPE, text=text_arg(d.get("text"), "text"))
        elif kind == "scroll":
            a = Action(ActionType.SCROLL, direction=check_direction(d.get("direction")), convention="content")  # type: ignore[arg-type]
        elif kind == "open_app":
            a = Action(ActionType.OPEN_APP, text=text_arg(d.get("app_name"), "app_name"))
        elif kind == "navigate_home":
            a = Action(ActionType.PRESS, key="home")
        elif kind == "navigate_back":
            a = Action(ActionType.PRESS, key="back")
        elif kind == "wait":
            a = Action(ActionType.WAIT)
        else:
            raise FormatFail(f"unsupported action_type {kind!r}")
        return self._ok(a, text, thought)

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        sp = ctx.space("thousand")
        a, t = action, action.type
        d: dict[str, Any]
        if t in (ActionType.CLICK, ActionType.LONG_PRESS):
            x, y = sp.from_norm(a.point)  # type: ignore[arg-type]
            d = {"action_type": t.value, "x": x, "y": y}
        elif t is ActionType.TYPE:
            d = {"action_type": "type", "text": a.text}
        elif t is ActionType.SCROLL:
            d = {"action_type": "scroll", "direction": a.direction}
        elif t is ActionType.OPEN_APP:
            d = {"action_type": "open_app", "app_name": a.text}
        elif t is ActionType.PRESS:
            d = {"action_type": f"navigate_{a.key}"}
        else:
            d = {"action_type": "wait"}
        head = f"low-level thought: {thought}\n" if thought is not None else ""
        return f"{head}action: {json.dumps(d, ensure_ascii=False)}"
