"""CoAT (AITZ) action JSON: ``{"ACTION": "click_element", "ARGS": {"bbox": [x1, y1, x2, y2]}}``.

Conventions (sources): IMNearth/CoAT ``coat/config.yaml`` (``ACTION_SPACE``: ``click_element(bbox=)``
with the box on ``[0, 1000]``, or ``idx=`` of a set-of-marks element; ``scroll(direction=)``;
``input(text=)``; ``press_enter()``, ``press_home()``, ``press_back()``; ``stop(task_status=)`` with
``success`` / ``failure``) and ``coat/agent.py`` (the answer is one JSON object).

* A click predicts an element *box*: the action's point is its centre and the normalised box is
  kept in ``extra["box"]`` (what :class:`guirl.matching.ClickRule` ``box_mode="pred_box"`` reads).
  ``format`` writes the point as a zero-size box when the action has no box.
* ``scroll`` direction: CoAT's prompt defines the words in the **content** sense ("if content is
  moving up, you are scrolling down"); the AITZ annotations the evaluator compares them with
  (``coat_action_desc``) use the **finger** sense. The tolerant reading follows the prompt.

Strict reading, pipelines ``"coat"`` (screen mode ``txt``) and ``"coat_tag"`` (``tag``), as the
released code runs: ``agent.py::json_parser`` (fences stripped; retried with a closing brace
appended), only ``ACTION`` and ``ARGS`` kept (a missing one stores nothing: failure), then
``evaluate.py::ActionEvaluator._parse_action_``: the action is ``input`` or the first of click,
scroll, type, press, stop contained in the lower-cased ``ACTION`` (``scroll_and_click`` is a
click, ``input_text`` nothing); the box is scaled to pixels and rounded (``FormatContext`` gives
the screen size); ``tag`` mode reads a non-zero ``idx`` as the element of the row/column-sorted
screen elements (``FormatContext.elements``); a press key is the text after the first ``_``; a
scroll word is compared as the annotation's finger direction (the words must be equal, so the
strict reading keeps the word as it is).

Round-trip tolerance: 0.5/1000 per axis (the box corners).
"""

from __future__ import annotations

import json
from functools import cmp_to_key
from typing import Any

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    check_direction,
    json_loads,
    number,
    text_arg,
)
from guirl.actions.types import Action, ActionType, ParseResult

_TYPES = ("click", "scroll", "type", "press", "stop")
_KEYS = {"enter": "enter", "home": "home", "back": "back"}


def json_parser(text: str) -> Any:
    """``coat/agent.py::json_parser``: strip a leading/trailing fence, keep what lies between
    fences, then ``json.loads`` (raises ``json.JSONDecodeError``)."""
    s = text
    for fence in ("```json", "```JSON"):
        if s.startswith(fence):
            s = s[7:]
    if s.endswith("```"):
        s = s[:-3]
    for fence in ("```json", "```JSON"):
        if fence in s:
            s = s.split(fence)[1]
    if "```" in s:
        s = s.split("```")[0]
    return json_loads(s)


def stored_prediction(text: str) -> dict[str, Any]:
    """What ``ScreenAgent.predict`` stores: ``{"ACTION", "ARGS"}`` of the parsed answer, retried
    with a closing brace appended; :class:`FormatFail` when nothing would be stored."""
    try:
        try:
            d = json_parser(text)
        except json.JSONDecodeError:
            d = json_parser(text + "}")
    except json.JSONDecodeError as e:
        raise FormatFail(f"not JSON even with a closing brace appended: {e.msg}") from None
    if not isinstance(d, dict) or "ACTION" not in d or "ARGS" not in d:
        raise FormatFail("the answer needs both 'ACTION' and 'ARGS' (nothing is stored otherwise)")
    return {"ACTION": d["ACTION"], "ARGS": d["ARGS"]}


def _node_compare(n1: tuple[float, ...], n2: tuple[float, ...]) -> int:
    """``screen_utils.node_compare`` on ``(left, top, right, bottom)`` pixel boxes."""
    l1, t1, _, b1 = n1
    l2, t2, _, b2 = n2
    if t1 > t2:
        if t1 > (t2 + b2) / 2:
            return 1
    elif t1 < t2:
        if t2 > (t1 + b1) / 2:
            return -1
    if l1 - l2 > 0:
        return 1
    if l1 - l2 < 0:
        return -1
    return 0


def row_col_sort(boxes: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """``screen_utils.row_col_sort``: elements sorted top to bottom, grouped in rows, each row
    left to right (the order CoAT numbers set-of-marks elements in)."""
    if len(boxes) <= 1:
        return list(boxes)
    nodes = sorted(boxes, key=cmp_to_key(_node_compare))
    rows = [[nodes[0]]]
    for node in nodes[1:]:
        cy = (node[1] + node[3]) * 0.5
        line = rows[-1]
        avg = sum((x[1] + x[3]) * 0.5 for x in line) / len(line)
        if node[1] < avg < node[3] and line[-1][1] < cy < line[-1][3]:
            line.append(node)
        else:
            rows.append([node])
    for line in rows:
        line.sort(key=lambda x: x[0])
    return [n for line in rows for n in line]


class CoATFormat(ActionFormat):
    name = "coat"
    coord_kind = "thousand"
    convention = "content"
    has_thought = False
    types = frozenset({ActionType.CLICK, ActionType.SCROLL, ActionType.TYPE, ActionType.PRESS, ActionType.TERMINATE})
    keeps = {ActionType.SCROLL: frozenset({"direction", "convention"})}

    def _unsupported(self, action: Action) -> str | None:
        if action.type is ActionType.PRESS and action.key == "recent":
            return "format 'coat' cannot express a 'press' action with key 'recent'"
        return None

    def _parse(self, text: str, ctx: FormatContext) -> ParseResult:
        pipeline = ctx.reading("coat", ("coat", "coat_tag"))
        if pipeline is not None:
            return self._ok(self._as_run(text, ctx, tag=pipeline == "coat_tag"), text)
        d = stored_prediction(text.strip())
        act = d["ACTION"]
        args = d["ARGS"] if isinstance(d["ARGS"], dict) else {}
        if not isinstance(act, str) or not act.strip():
            raise FormatFail(f"ACTION must name an action, got {act!r}")
        word = act.strip().lower()
        if word in ("click_element", "click"):
            return self._ok(self._click(args, ctx, rounded=False), text)
        if word == "scroll":
            return self._ok(
                Action(ActionType.SCROLL, direction=check_direction(args.get("direction")), convention="content"), text
            )  # type: ignore[arg-type]
        if word in ("input", "type"):
            return self._ok(Action(ActionType.TYPE, text=text_arg(args.get("text"), "text")), text)
        if word in ("press_enter", "press_home", "press_back"):
            return self._ok(Action(ActionType.PRESS, key=_KEYS[word[6:]]), text)  # type: ignore[arg-type]
        if word == "stop":
            return self._ok(
                Action(ActionType.TERMINATE, status="fail" if args.get("task_status") == "failure" else "success"), text
            )
        raise FormatFail(f"unknown CoAT action {act!r}")

    def _click(self, args: dict, ctx: FormatContext, *, rounded: bool, box_px: Any = None) -> Action:
        """A click on a predicted box: ``bbox`` on [0, 1000] (rounded to the screen's pixels when
        ``rounded``, as the evaluator does), or ``box_px`` in pixels."""
        w, h = ctx.width, ctx.height
        if box_px is None:
            bbox = args.get("bbox")
            if bbox is None:
                raise FormatFail("click_element needs bbox")
            if not isinstance(bbox, (list, tuple)) or len(bbox) < 4:
                raise FormatFail(f"bbox must be [x1, y1, x2, y2] on [0, 1000], got {bbox!r}")
            x1, y1, x2, y2 = (number(v, "bbox") for v in bbox[:4])
            if rounded:  # _parse_action_: round(v / 1000 * w) pixels
                box_px = (round(x1 / 1000 * w), round(y1 / 1000 * h), round(x2 / 1000 * w), round(y2 / 1000 * h))
                box = (box_px[0] / w, box_px[1] / h, box_px[2] / w, box_px[3] / h)
            else:
                box = (x1 / 1000, y1 / 1000, x2 / 1000, y2 / 1000)
        else:
            box = (box_px[0] / w, box_px[1] / h, box_px[2] / w, box_px[3] / h)
        if not all(0.0 <= v <= 1.0 for v in box) or box[2] < box[0] or box[3] < box[1]:
            raise FormatFail(f"bbox {list(box)} (normalised) is not a box on the screen")
        centre = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
        return Action(ActionType.CLICK, point=centre, extra={"box": box})

    def _as_run(self, text: str, ctx: FormatContext, *, tag: bool) -> Action:
        d = stored_prediction(text)
        act = d["ACTION"]
        if not isinstance(act, str) or not act:
            raise FormatFail(f"ACTION {act!r} maps to no action type (format miss)")
        low = act.lower()
        kind = "type" if low == "input" else next((t for t in _TYPES if t in low), None)
        if kind is None:
            raise FormatFail(f"ACTION {act!r} maps to no action type (format miss)")
        args = d["ARGS"] if isinstance(d["ARGS"], dict) else {}
        if kind == "click":
            idx = args.get("idx")
            if idx:
                try:
                    idx = int(idx)
                except (TypeError, ValueError):
                    idx = None
            if tag and idx:  # __call__: an idx in range replaces the bbox
                w, h = ctx.width, ctx.height
                nodes = row_col_sort(
                    [(round(b[0] * w), round(b[1] * h), round(b[2] * w), round(b[3] * h)) for b in ctx.elements]
                )
                if 0 <= idx < len(nodes):
                    return self._click(args, ctx, rounded=True, box_px=nodes[idx])
            return self._click(args, ctx, rounded=True)
        if kind == "scroll":
            direction = args.get("direction")
            if direction not in ("up", "down", "left", "right"):
                raise FormatFail(f"direction {direction!r} equals no annotation word")
            return Action(ActionType.SCROLL, direction=direction, convention="finger")  # type: ignore[arg-type]
        if kind == "type":
            t = args.get("text", "")
            return Action(ActionType.TYPE, text=text_arg(t, "text"))
        if kind == "press":
            parts = act.split("_")
            if len(parts) < 2:
                raise FormatFail(f"{act!r} has no key after '_' (the evaluator raises)")
            key = parts[1].lower()
            if key not in _KEYS:
                raise FormatFail(f"press key {key!r} is none of enter, home, back")
            return Action(ActionType.PRESS, key=_KEYS[key])  # type: ignore[arg-type]
        return Action(ActionType.TERMINATE, status="fail" if args.get("task_status") == "failure" else "success")

    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str:
        t = action.type
        if t is ActionType.CLICK:
            x, y = ctx.space("thousand").from_norm(action.point)  # type: ignore[arg-type]
            d: dict[str, Any] = {"ACTION": "click_element", "ARGS": {"bbox": [x, y, x, y]}}
        elif t is ActionType.SCROLL:
            d = {"ACTION": "scroll", "ARGS": {"direction": action.direction}}
        elif t is ActionType.TYPE:
            d = {"ACTION": "input", "ARGS": {"text": action.text}}
        elif t is ActionType.PRESS:
            d = {"ACTION": f"press_{action.key}", "ARGS": {}}
        else:
            d = {"ACTION": "stop", "ARGS": {"task_status": "success" if action.status == "success" else "failure"}}
        return json.dumps(d, ensure_ascii=False)
