"""Strict readings of ``<action>{json}</action>`` outputs: how UI-S1's and CCPO's evaluation
scripts read them (``FormatContext(strict=True, pipeline=...)`` of the ``ccpo`` format).

Every reader returns the canonical :class:`~guirl.actions.Action` the script's comparison sees,
or raises :class:`FormatFail` where the script scores the output wrong whatever the ground truth
(an exception, a "wrong format", an action word no ground truth has). Sources, per pipeline:

* ``"uis1"`` -- X-PLUG/MobileAgent ``UI-S1/evaluation/eval_qwenvl.py::process_line``:
  ``x/data/agent/json.py::JsonFormat.parse_response`` (first ``<action>`` block, ``json.loads``; no
  block or bad JSON raises), then ``qwenvl_utils.py::evaluate_android_control_action``: the action
  word must equal the ground truth's exactly (``Click`` is not ``click``); a present
  ``coordinate`` / ``coordinate2`` must be two numbers (``norm_coordinate`` divides them by the
  resized size); a swipe needs nothing else; buttons are compared lower-cased and stripped; a
  missing field the comparison reads raises.
* ``"ccpo_androidcontrol"`` -- ``evaluation/evaluation_AC_AO_sequence_final.py``: first ``<action>``
  block and ``json.loads`` (anything else: an empty prediction); coordinates mapped from the
  resized image to original pixels and rounded (``convert_resize_original_coordinate``); a click
  without a coordinate is read at (-100, -100), i.e. never right; a swipe needs both points;
  system buttons, waits and terminates are compared as whole dicts, so their words and keys must
  be exactly the file's (``Back``, ``time``, ``status``).
* ``"ccpo_guiodyssey"`` -- ``evaluation/evaluation_guio.py``: the action word upper-cased;
  coordinates as ``normalize_action_coordinates(mode='auto')`` leaves them: both within 1000 in
  absolute value -> already on GUI-Odyssey's ``[0, 1000]`` grid, else resized pixels converted to
  it (3 decimals, clipped); a click without a coordinate is read at (0, 0); a scroll needs both
  points (its direction comes from their angle); ``SWIPE`` and ``TERMINATE`` are not its words.
* ``"ccpo_mind2web"`` -- ``evaluation/evaluation_mind2web.py``: coordinates resized -> original
  pixels (rounded); any word but select / type is an operation 4 (a click; hover and enter keep
  their names), a missing or unreadable answer is a click at (0, 0); the value is ``value``, else
  ``text``.
* ``"ccpo_aitw"`` -- ``evaluation/evaluation_AITW_sequence_final_coord.py``: ``<action>`` JSON
  (a Python literal as fallback; ``null`` and an empty answer are wrong formats), else the whole
  answer as JSON; click, swipe (finger up is AITW's "scroll down": its direction from the
  dominant axis, a tie horizontal), type, system_button enter / back / home and terminate;
  everything else is a wrong format; a missing coordinate is read at (0, 0); the click point is
  the coordinate divided by the *original* screen size (``image_resize`` holds it), whatever
  image the model saw.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from guirl.actions.formats._base import FormatContext, FormatFail, between, json_loads, tag
from guirl.actions.types import Action, ActionType

PIPELINES = ("uis1", "ccpo_androidcontrol", "ccpo_guiodyssey", "ccpo_mind2web", "ccpo_aitw")
_DIRECTIONLESS = {"direction_stated": False}


def first_tag(text: str, name: str) -> str | None:
    """``parse_tags``: the stripped content of the first ``<name>...</name>``, or ``None``."""
    return tag(text, name)


def _pair(v: Any, what: str) -> tuple[float, float]:
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)) or len(v) < 2:
        raise FormatFail(f"{what} {v!r} is not [x, y]")
    x, y = v[0], v[1]
    if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
        raise FormatFail(f"{what} {v!r} is not two numbers")
    return float(x), float(y)


def _norm(x: float, y: float, w: float, h: float, what: str) -> tuple[float, float]:
    p = (x / w, y / h)
    if not (0.0 <= p[0] <= 1.0 and 0.0 <= p[1] <= 1.0):
        raise FormatFail(f"point outside the screen: {what} ({x}, {y}) is not inside [0, {w}] x [0, {h}]")
    return p


def _resized(ctx: FormatContext) -> tuple[int, int]:
    sp = ctx.space("resized")
    return sp.width, sp.height


def _to_original(x: float, y: float, ctx: FormatContext) -> tuple[float, float]:
    """``convert_resize_original_coordinate``: resized -> original pixels, rounded."""
    rw, rh = _resized(ctx)
    return float(round(x * ctx.width / rw)), float(round(y * ctx.height / rh))


def _dominant(p: tuple[float, float], q: tuple[float, float], tie: str) -> str:
    dx, dy = q[0] - p[0], q[1] - p[1]
    if tie == "vertical":  # predict_direction
        if abs(dx) > abs(dy):
            return "right" if dx > 0 else "left"
        return "down" if dy > 0 else "up"
    if abs(dy) > abs(dx):  # convert_predict_to_aitw_format
        return "down" if dy > 0 else "up"
    return "right" if dx > 0 else "left"


def _json_dict(body: str | None) -> dict:
    if not body:
        return {}
    try:
        d = json_loads(body)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return d if isinstance(d, dict) else {}


# ----------------------------------------------------------------------------- UI-S1
def read_uis1(text: str, ctx: FormatContext) -> Action:
    body = first_tag(text, "action")
    if body is None:
        raise FormatFail("no <action>...</action> block (parse_response raises)")
    try:
        d = json_loads(body)
    except (json.JSONDecodeError, RecursionError) as e:
        raise FormatFail(f"json.loads fails on the <action> block ({e})") from None
    if not isinstance(d, dict):
        raise FormatFail("the <action> block is not a JSON object")
    rw, rh = _resized(ctx)
    pts = {k: _pair(d[k], k) for k in ("coordinate", "coordinate2") if k in d}  # norm_coordinate
    kind = d.get("action")
    if kind in ("click", "long_press"):
        if "coordinate" not in pts:
            raise FormatFail(f"{kind} without 'coordinate' (KeyError)")
        p = _norm(*pts["coordinate"], rw, rh, "coordinate")
        return Action(ActionType.CLICK if kind == "click" else ActionType.LONG_PRESS, point=p)
    if kind == "swipe":  # any swipe matches a swipe; points kept when readable
        if "coordinate" in pts and "coordinate2" in pts:
            p, q = _norm(*pts["coordinate"], rw, rh, "coordinate"), _norm(*pts["coordinate2"], rw, rh, "coordinate2")
            if p != q:
                return Action(
                    ActionType.SCROLL, point=p, point2=q, direction=_dominant(p, q, "vertical"), convention="finger"
                )  # type: ignore[arg-type]
        return Action(ActionType.SCROLL, direction="down", convention="finger", extra=dict(_DIRECTIONLESS))
    if kind in ("type", "open"):
        t = d.get("text")
        if not isinstance(t, str):
            raise FormatFail(f"{kind} needs a string 'text' (check_text reads it)")
        return Action(ActionType.TYPE if kind == "type" else ActionType.OPEN_APP, text=t)
    if kind == "system_button":
        b = d.get("button")
        if not isinstance(b, str):
            raise FormatFail("system_button needs a string 'button'")
        key = {"back": "back", "home": "home", "enter": "enter", "menu": "recent"}.get(b.lower().strip())
        if key is None:
            raise FormatFail(f"button {b!r} equals no ground-truth button")
        return Action(ActionType.PRESS, key=key)  # type: ignore[arg-type]
    if kind == "wait":
        return Action(ActionType.WAIT)
    if kind == "terminate":
        return Action(ActionType.TERMINATE, status="fail" if d.get("status") == "failure" else "success")
    raise FormatFail(f"action {kind!r} equals no ground-truth action word")


# ----------------------------------------------------------------------------- CCPO AndroidControl
def _exact_keys(d: dict, keys: set[str], what: str) -> None:
    if set(d) != keys:
        raise FormatFail(f"{what} is compared as a whole dict: keys {sorted(d)} are not {sorted(keys)}")


def read_ccpo_androidcontrol(text: str, ctx: FormatContext) -> Action:
    d = _json_dict(first_tag(text, "action"))
    pts: dict[str, tuple[float, float]] = {}
    for k in ("coordinate", "coordinate2"):
        if k in d:
            try:
                pts[k] = _to_original(*_pair(d[k], k), ctx)
            except FormatFail:
                d = {}  # the glue's bare except: the prediction becomes {}
                break
    kind = d.get("action", "")
    w, h = ctx.width, ctx.height
    if kind in ("click", "long_press"):
        if "coordinate" not in pts:
            raise FormatFail(f"{kind} without a coordinate is read at (-100, -100)")
        p = _norm(*pts["coordinate"], w, h, "coordinate")
        return Action(ActionType.CLICK if kind == "click" else ActionType.LONG_PRESS, point=p)
    if kind == "swipe":
        if "coordinate" not in pts or "coordinate2" not in pts:
            raise FormatFail("swipe needs coordinate and coordinate2")
        p, q = _norm(*pts["coordinate"], w, h, "coordinate"), _norm(*pts["coordinate2"], w, h, "coordinate2")
        direction = _dominant(pts["coordinate"], pts["coordinate2"], "vertical")
        return Action(ActionType.SCROLL, point=p, point2=q, direction=direction, convention="finger")  # type: ignore[arg-type]
    if kind in ("type", "open"):
        t = d.get("text")
        if not isinstance(t, str):
            raise FormatFail(f"{kind} needs a string 'text'")
        return Action(ActionType.TYPE if kind == "type" else ActionType.OPEN_APP, text=t)
    if kind == "system_button":
        _exact_keys(d, {"action", "button"}, "system_button")
        key = {"Back": "back", "Home": "home", "Enter": "enter", "Menu": "recent"}.get(d["button"])
        if key is None:
            raise FormatFail(f"button {d['button']!r} is not the file's spelling (Back, Home, Enter, Menu)")
        return Action(ActionType.PRESS, key=key)  # type: ignore[arg-type]
    if kind == "wait":
        if set(d) - {"action", "time"}:
            raise FormatFail(f"wait is compared as a whole dict: extra keys {sorted(set(d) - {'action', 'time'})}")
        t = d.get("time")
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t < 0):
            raise FormatFail(f"wait time {t!r} equals no ground truth's")
        return Action(ActionType.WAIT, duration_ms=None if t is None else int(round(t * 1000)))
    if kind == "terminate":
        _exact_keys(d, {"action", "status"}, "terminate")
        status = {"success": "success", "failure": "fail"}.get(d["status"])
        if status is None:
            raise FormatFail(f"status {d['status']!r} is not the file's (success, failure)")
        return Action(ActionType.TERMINATE, status=status)  # type: ignore[arg-type]
    if kind == "answer":
        _exact_keys(d, {"action", "text"}, "answer")
        if not isinstance(d["text"], str):
            raise FormatFail("answer needs a string 'text'")
        return Action(ActionType.ANSWER, text=d["text"])
    raise FormatFail(f"action {kind!r} equals no ground-truth action word")


# ----------------------------------------------------------------------------- CCPO GUI-Odyssey
def _guio_point(v: Any, ctx: FormatContext, what: str) -> tuple[float, float]:
    x, y = _pair(v, what)
    if max(abs(x), abs(y)) > 1000:  # resized pixels -> [0, 1000], 3 decimals, clipped
        rw, rh = _resized(ctx)
        x = max(min(round(x * ctx.width / rw / ctx.width * 1000, 3), 1000.0), 0.0)
        y = max(min(round(y * ctx.height / rh / ctx.height * 1000, 3), 1000.0), 0.0)
    return _norm(x, y, 1000.0, 1000.0, what)


def read_ccpo_guiodyssey(text: str, ctx: FormatContext) -> Action:
    d = _json_dict(first_tag(text, "action"))
    kind = str(d.get("action", "")).upper()
    if kind in ("CLICK", "LONG_PRESS"):
        p = _guio_point(d["coordinate"], ctx, "coordinate") if "coordinate" in d else (0.0, 0.0)
        return Action(ActionType.CLICK if kind == "CLICK" else ActionType.LONG_PRESS, point=p)
    if kind == "SCROLL":
        if isinstance(d.get("coordinate"), (list, tuple)) and isinstance(d.get("coordinate2"), (list, tuple)):
            p, q = _guio_point(d["coordinate"], ctx, "coordinate"), _guio_point(d["coordinate2"], ctx, "coordinate2")
            return Action(
                ActionType.SCROLL, point=p, point2=q, direction=_dominant(p, q, "vertical"), convention="finger"
            )  # type: ignore[arg-type]
        return Action(ActionType.SCROLL, direction="down", convention="finger", extra=dict(_DIRECTIONLESS))
    if kind == "TYPE":
        t = d.get("text", "")
        if not isinstance(t, str):
            raise FormatFail("TYPE needs a string 'text'")
        return Action(ActionType.TYPE, text=t)
    keys = {"PRESS_HOME": "home", "PRESS_BACK": "back", "PRESS_RECENT": "recent"}
    if kind in keys:
        return Action(ActionType.PRESS, key=keys[kind])  # type: ignore[arg-type]
    if kind in ("COMPLETE", "IMPOSSIBLE"):
        return Action(ActionType.TERMINATE, status="success" if kind == "COMPLETE" else "fail")
    raise FormatFail(f"action {kind!r} equals no ground-truth action word")


# ----------------------------------------------------------------------------- CCPO Mind2Web
def read_ccpo_mind2web(text: str, ctx: FormatContext) -> Action:
    d = _json_dict(first_tag(text, "action"))
    point = (0.0, 0.0)
    if "coordinate" in d:
        try:
            x, y = _to_original(*_pair(d["coordinate"], "coordinate"), ctx)
            point = _norm(x, y, ctx.width, ctx.height, "coordinate")
        except FormatFail as e:
            if "outside the screen" in str(e):
                raise
            d = {}  # the glue's bare except: an empty prediction
    kind = str(d.get("action", "")).lower()
    if kind in ("type", "select"):
        value = d.get("value", d.get("text", ""))
        if not isinstance(value, str):
            raise FormatFail(f"{kind} value {value!r} is not a string")
        return Action(ActionType.TYPE if kind == "type" else ActionType.SELECT, point=point, text=value)
    if kind == "hover":
        return Action(ActionType.HOVER, point=point)
    if kind == "enter":
        return Action(ActionType.PRESS, key="enter", point=point)
    return Action(ActionType.CLICK, point=point, extra={"word": kind} if kind != "click" else {})


# ----------------------------------------------------------------------------- CCPO AITW
def _aitw_dict(text: str) -> Any:
    if not text or text.strip() == "":
        return None
    body = between(text, "<action>", "</action>")
    if body is not None:
        content = body.strip()
        if content == "null":
            return None
        try:
            return json_loads(content)
        except json.JSONDecodeError:
            try:
                return ast.literal_eval(content)
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                return None
    try:
        return json_loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None


def read_ccpo_aitw(text: str, ctx: FormatContext) -> Action:
    d = _aitw_dict(text)
    if not isinstance(d, dict):
        raise FormatFail("no action dict (wrong format)")
    kind = d.get("action", "")
    w, h = ctx.width, ctx.height  # normalize_coord divides by image_resize width / height: the screen's

    def coord(key: str) -> tuple[float, float]:
        v = d.get(key, [0, 0])
        if isinstance(v, (list, tuple)) and len(v) < 2:
            return (0.0, 0.0)
        return _pair(v, key)

    if kind == "click":
        return Action(ActionType.CLICK, point=_norm(*coord("coordinate"), w, h, "coordinate"))
    if kind == "swipe":
        finger = _dominant(coord("coordinate"), coord("coordinate2"), "horizontal")
        return Action(ActionType.SCROLL, direction=finger, convention="finger")  # type: ignore[arg-type]
    if kind == "type":
        t = d.get("text", "")
        if not isinstance(t, str):
            raise FormatFail("type text must be a string")
        return Action(ActionType.TYPE, text=t)
    if kind == "system_button":
        b = d.get("button", "")
        key = {"enter": "enter", "back": "back", "home": "home"}.get(b.lower() if isinstance(b, str) else "")
        if key is None:
            raise FormatFail(f"button {b!r} has no AITW action (wrong format)")
        return Action(ActionType.PRESS, key=key)  # type: ignore[arg-type]
    if kind == "terminate":
        return Action(ActionType.TERMINATE, status="success" if d.get("status", "success") == "success" else "fail")
    raise FormatFail(f"action {kind!r} has no AITW form (wrong format)")


READERS = {
    "uis1": read_uis1,
    "ccpo_androidcontrol": read_ccpo_androidcontrol,
    "ccpo_guiodyssey": read_ccpo_guiodyssey,
    "ccpo_mind2web": read_ccpo_mind2web,
    "ccpo_aitw": read_ccpo_aitw,
}
