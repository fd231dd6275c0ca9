"""SeeClick's Mind2Web action dict: ``{"action_type": 4, "click_point": (0.30,0.30)}``.

Conventions (sources): SeeClick ``agent_tasks/mind2web_test.py::action2step`` writes the
reference actions and the model is trained to answer in the same form:

* ``action_type`` 4 = CLICK (HOVER and ENTER are written as 4 too), 3 = TYPE, 2 = SELECT;
  TYPE and SELECT carry ``"value"``;
* ``click_point`` is ``(x, y)`` normalised to ``[0, 1]`` of the page screenshot (SeeClick writes
  two decimals; this format writes up to four);
* the text is a Python literal (a tuple point, double-quoted strings), read with
  ``ast.literal_eval``.

Strict reading (pipeline ``"seeclick"``, the evaluation loop of ``mind2web_test.py``): the whole
output must be a Python literal dict (no fences, no JSON ``true`` / ``null``); ``action_type``
is read through ``str()`` as the loop's Op.F1 does (``"4"`` scores like 4), ``click_point`` must
be two numbers in ``[0, 1]``, TYPE / SELECT need a string ``value``. The tolerant reading also
accepts fences, prose around the dict and JSON literals.

Round-trip tolerance: 0.5e-4 per axis.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    fmt_point,
    json_loads,
    number,
    point_in,
    strip_fence,
)
from guirl.actions.types import Action, ActionError, ActionType, ParseResult

_CODES = {"4": ActionType.CLICK, "3": ActionType.TYPE, "2": ActionType.SELECT}
_CODE_OUT = {ActionType.CLICK: 4, ActionType.TYPE: 3, ActionType.SELECT: 2}


def _literal(text: str, strict: bool) -> Any:
    s = text.strip() if not strict else text
    if not strict:
        if s.startswith("```"):
            s = strip_fence(s, ("json", "python"))
        i, j = s.find("{"), s.rfind("}")
        if i >= 0 and j > i:
            s = s[i : j + 1]
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        if strict:
            raise FormatFail(f"not a Python literal (the loop uses ast.literal_eval): {text[:80]!r}") from None
    try:
        return json_loads(s)
    except json.JSONDecodeError:
        raise FormatFail(f"not a SeeClick action dict: {text[:80]!r}") from None


class SeeClickFormat(ActionFormat):
    name = "seeclick"
    coord_kind = "normalized"
    convention = "content"
    has_thought = False
    types = frozenset({ActionType.CLICK, ActionType.TYPE, ActionType.SELECT})
    keeps = {ActionType.TYPE: frozenset({"point", "text"})}

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.TYPE and action.point is None:
            return "format 'seeclick' cannot express a 'type' action without a point (the element typed into)"
        return None

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        strict = ctx.reading("seeclick", ("seeclick",)) is not None
        d = _literal(text, strict)
        if not isinstance(d, dict):
            raise FormatFail("output must be a dict")
        if "action_type" not in d:
            raise FormatFail("missing 'action_type'")
        code = str(d["action_type"]) if strict else str(d["action_type"]).strip()
        if code not in _CODES:
            raise FormatFail(f"action_type {d['action_type']!r} is not 4 (click), 3 (type) or 2 (select)")
        if "click_point" not in d:
            raise FormatFail("missing 'click_point'")
        cp = d["click_point"]
        if not isinstance(cp, (list, tuple)) or len(cp) != 2:
            raise FormatFail(f"click_point must be (x, y), got {cp!r}")
        point = point_in(ctx.space("normalized"), [number(c, "click_point") for c in cp], "click_point")
        t = _CODES[code]
        if t is ActionType.CLICK:
            return self._ok(Action(t, point=point), text)
        value = d.get("value")
        if not isinstance(value, str):
            raise FormatFail(f"{t.value} needs a string 'value', got {value!r}")
        try:
            return self._ok(Action(t, point=point, text=value), text)
        except ActionError as e:
            raise FormatFail(str(e)) from None

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        x, y = fmt_point(ctx.space("normalized"), action.point)  # type: ignore[arg-type]
        head = f'{{"action_type": {_CODE_OUT[action.type]}, "click_point": ({x!r},{y!r})'
        if action.type is ActionType.CLICK:
            return head + "}"
        return head + f', "value": {json.dumps(action.text, ensure_ascii=False)}}}'
