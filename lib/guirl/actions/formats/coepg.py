"""Co-EPG planner / grounder outputs.

The Co-EPG planner does not emit coordinates: it writes a grounding query (the plan) plus an
action word and value, ``<plan>...</plan><action>click</action><value>...</value>``; a separate
grounding model turns the plan into a point. Two formats:

* ``coepg_planner``: action words follow the AndroidControl / Multimodal-Mind2Web vocabularies
  Co-EPG evaluates on. The paper's own words (Co-EPG Tables 9 and 10): ``click``, ``long_press``,
  ``input_text`` (value = text), ``scroll`` (value = **content** direction, AndroidControl),
  ``open_app`` (value = app name), ``navigate_back``, ``navigate_home``, ``wait``, ``terminate``
  (the task is over, done or impossible: a terminate whose status the paper leaves undecided,
  read as success with ``extra["status_undecided"]``) and Mind2Web's ``CLICK``, ``TYPE``,
  ``SELECT`` (value = option); plus ``type``, ``complete``, ``press_enter``, ``hover`` and
  ``enter`` as aliases, and ``answer`` (value = the answer text; not in Tables 9-10: MiniGUI's
  information queries end with an answer, which neither benchmark's vocabulary has).
  The paper writes the tags labelled, ``<plan> ELEMENT: ... </plan>``,
  ``<action> ACTION: click </action>``, ``<value> VALUE: cats </value>`` with ``None`` for no
  value: labels are stripped, words read case-insensitively, ``None`` is no value.
  ``<value>`` may be omitted or empty when unused. A type action takes
  ``FormatContext.grounded_point`` when one is given (on Mind2Web it types into the element the
  plan names). Coordinate actions (click, long_press, select) take their point from
  ``FormatContext.grounded_point`` (normalised, from ``coepg_grounder``); without it parsing
  fails with a reason. The plan text is kept in ``ParseResult.thought`` and
  ``action.extra["plan"]``; ``format`` writes ``action.extra["plan"]`` (or the thought).
* ``coepg_grounder``: a point of the Qwen2.5-VL grounding model in absolute pixels of the
  resized image, written ``(x, y)`` (``[x, y]`` and ``{"point_2d": [x, y]}`` are accepted);
  parsed as a click. Round-trip tolerance: half a resized pixel per axis.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    json_loads,
    point_in,
    tag,
    to_float,
)
from guirl.actions.types import Action, ActionError, ActionType, ParseResult

_SIMPLE = {
    "navigate_back": Action(ActionType.PRESS, key="back"),
    "navigate_home": Action(ActionType.PRESS, key="home"),
    "press_enter": Action(ActionType.PRESS, key="enter"),
    "wait": Action(ActionType.WAIT),
    "complete": Action(ActionType.TERMINATE, status="success"),
}
_POINT_TYPES = {
    "click": ActionType.CLICK,
    "long_press": ActionType.LONG_PRESS,
    "select": ActionType.SELECT,
    "hover": ActionType.HOVER,
    "enter": ActionType.PRESS,
}
_TEXT_TYPES = {
    "type": ActionType.TYPE,
    "input_text": ActionType.TYPE,
    "open_app": ActionType.OPEN_APP,
    "answer": ActionType.ANSWER,
}
_LABEL = re.compile(r"^\s*(?:ELEMENT|ACTION|VALUE)\s*:\s*", re.IGNORECASE)


def _unlabel(v: str | None) -> str | None:
    """A tag's content without the paper's ``ELEMENT:`` / ``ACTION:`` / ``VALUE:`` label."""
    return None if v is None else _LABEL.sub("", v, count=1).strip()


class CoEPGPlannerFormat(ActionFormat):
    name = "coepg_planner"
    coord_kind = "normalized"  # points come from ctx.grounded_point, already normalised
    convention = "content"
    has_thought = True
    types = frozenset(
        {
            ActionType.CLICK,
            ActionType.LONG_PRESS,
            ActionType.SELECT,
            ActionType.TYPE,
            ActionType.SCROLL,
            ActionType.OPEN_APP,
            ActionType.PRESS,
            ActionType.WAIT,
            ActionType.TERMINATE,
            ActionType.HOVER,
            ActionType.ANSWER,
        }
    )
    keeps = {
        ActionType.LONG_PRESS: frozenset({"point"}),
        ActionType.SCROLL: frozenset({"direction", "convention"}),
        ActionType.WAIT: frozenset(),
    }

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.PRESS and action.key == "recent":
            return "format 'coepg_planner' cannot express a 'press' action with key 'recent'"
        if action.type is ActionType.TERMINATE and action.status != "success":
            return "format 'coepg_planner' cannot express a 'terminate' action with status 'fail'"
        return None

    def tolerance(self, ctx: FormatContext) -> float:
        return 0.0  # the point is copied from ctx.grounded_point

    def project(self, action: Action, ctx: FormatContext) -> Action:
        a = super().project(action, ctx)
        if a.point is not None and action.point is not None:
            a = replace(a, point=action.point)  # no quantisation: the point is not written
        return a

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        plan = _unlabel(tag(text, "plan"))
        word = _unlabel(tag(text, "action"))
        if word is None:
            raise FormatFail("no <action>...</action> block")
        value = _unlabel(tag(text, "value"))
        if value is not None and value.lower() == "none":
            value = ""
        word = word.lower()
        extra = {"plan": plan} if plan is not None else {}
        if word == "terminate":
            a = Action(ActionType.TERMINATE, status="success", extra={**extra, "status_undecided": True})
        elif word in _SIMPLE:
            a = replace(_SIMPLE[word], extra=extra)
        elif word in _POINT_TYPES:
            if ctx.grounded_point is None:
                raise FormatFail(
                    f"{word} needs a point: ground the plan with the grounding model (coepg_grounder) "
                    "and pass FormatContext(grounded_point=...)"
                )
            if not plan:
                raise FormatFail(f"{word} needs a non-empty <plan> (the grounding query)")
            t = _POINT_TYPES[word]
            if t is ActionType.SELECT and not value:
                raise FormatFail("select needs a <value> (the option)")
            key = "enter" if t is ActionType.PRESS else None
            text_v = value if t is ActionType.SELECT else None
            a = Action(t, point=ctx.grounded_point, text=text_v, key=key, extra=extra)  # type: ignore[arg-type]
        elif word in _TEXT_TYPES:
            if value is None:
                raise FormatFail(f"{word} needs a <value>")
            t = _TEXT_TYPES[word]
            # on the web a type targets an element: the grounded point when the caller has one
            pt = ctx.grounded_point if t is ActionType.TYPE else None
            a = Action(t, text=value, point=pt, extra=extra)
        elif word == "scroll":
            a = Action(ActionType.SCROLL, direction=check_direction(value), convention="content", extra=extra)  # type: ignore[arg-type]
        else:
            raise FormatFail(f"unsupported Co-EPG action {word!r}")
        return self._ok(a, text, plan)

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        a, t = action, action.type
        plan = a.extra.get("plan", thought)
        value = ""
        if t in (ActionType.CLICK, ActionType.LONG_PRESS, ActionType.SELECT, ActionType.HOVER):
            word = {v: k for k, v in _POINT_TYPES.items()}[t]
            if t is ActionType.SELECT:
                value = a.text or ""
            if not plan:
                raise ActionError(f"coepg_planner: a {t.value} action needs a plan (extra['plan'] or thought)")
        elif t in (ActionType.TYPE, ActionType.OPEN_APP, ActionType.ANSWER):
            word, value = t.value, a.text or ""
        elif t is ActionType.SCROLL:
            word, value = "scroll", a.direction or ""
        elif t is ActionType.PRESS:
            word = {"back": "navigate_back", "home": "navigate_home", "enter": "press_enter"}[a.key]  # type: ignore[index]
        elif t is ActionType.WAIT:
            word = "wait"
        else:
            word = "complete"
        head = f"<plan>{plan}</plan>" if plan is not None else ""
        return f"{head}<action>{word}</action><value>{value}</value>"


class CoEPGGrounderFormat(ActionFormat):
    name = "coepg_grounder"
    coord_kind = "resized"
    convention = "finger"
    has_thought = False
    types = frozenset({ActionType.CLICK})

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        s = text.strip()
        sp = ctx.space("resized")
        if s.startswith("{"):
            try:
                d = json_loads(s)
            except json.JSONDecodeError as e:
                raise FormatFail(f"malformed JSON: {e.msg}") from None
            if not isinstance(d, dict) or "point_2d" not in d:
                raise FormatFail('JSON point must be {"point_2d": [x, y]}')
            return self._ok(Action(ActionType.CLICK, point=point_in(sp, d["point_2d"])), text)
        m = re.fullmatch(r"[\(\[]\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*[\)\]]", s)
        if not m:
            raise FormatFail(f"expected a point '(x, y)', got {s[:60]!r}")
        return self._ok(
            Action(
                ActionType.CLICK, point=point_in(sp, [to_float(m.group(1), "point"), to_float(m.group(2), "point")])
            ),
            text,
        )

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        x, y = ctx.space("resized").from_norm(action.point)  # type: ignore[arg-type]
        return f"({x}, {y})"
