r"""CES (Coordinator-Executor-State tracker) outputs.

* ``ces_executor``: the CES executor's answer, read tolerantly in any of the forms CES shows
  (the prompt's bracketed list, with or without braces; the call syntax of its code,
  ``click(point='(x, y)')``; the ``CLICK: (x, y)`` / ``SCROLL: DOWN`` / ``PRESS_HOME`` form of its
  figures) with the prompt's words (``press home`` / ``press back`` with a space, ``select`` with
  the option in ``input_text``, ``close``, ``enter``, ``complete``). ``format`` writes the
  GUI-R1-style executor answer
  ``<think>...</think><answer>[{'action': 'click', 'point': [x, y], 'input_text': 'no input text'}]</answer>``
  -- a Python-literal list of dicts (single quotes). Vocabulary and placeholders from the
  GUI-R1 AndroidControl prompt: actions wait, long_press, click, press_back, press_home, type,
  open_app, scroll, complete (plus ``enter`` from the GUI-R1 web prompt); ``point`` is
  ``[-100, -100]`` when unused; ``input_text`` is ``'no input text'`` when unused, the text for
  type / open_app, and the **content** direction (AndroidControl convention) for scroll.
  ``point`` is in absolute pixels of the image the model saw (Qwen2.5-VL ``smart_resize``;
  GUI-R1 rewards compare it with the ground-truth box scaled by the image size).
  Round-trip tolerance: half a resized pixel per axis.
* Strict readings of ``ces_executor`` (``FormatContext(strict=True, pipeline=...)``):

  - ``"ces"`` (default): CES's released ``verl/utils/reward_score/gui.py::acc_reward`` --
    ``extract_answer_action`` (``<answer>name(params)</answer>`` ending a line of the text, name
    ``[a-z_]+``) and ``parse_params`` (``key='value'`` pairs, single-quoted Python literals):
    ``click(point='(x, y)')`` / ``long_press(point=...)`` in **screen pixels** (``FormatContext``
    width / height, what ``extra_info`` holds), ``type(content=...)``, ``open_app(app_name=...)``,
    ``scroll()`` (no direction: ``extra["direction_stated"] = False``; a ``direction=`` is read when
    given), ``press_home()`` / ``press_back()`` / ``press_enter()`` / ``press_appselect()``,
    ``wait()``, ``finished()`` (terminate success), ``error(...)`` (terminate fail). The GUI-R1
    list and JSON are not this format.
  - ``"guir1"``: GUI-R1's ``inference/inference_vllm_android.py`` -- three regular expressions on
    the ``<answer>`` block: the action word (``'action': '(\w+)'``, single quotes), the input text
    (``'input_text': '(.*?)'``, stops at an apostrophe; ``'no input text'`` when absent) and the
    *last* ``[int, int]`` inside braces on one line (``[0, 0]`` when none: floats and negatives do
    not match; no ``<answer>`` block also gives ``[0, 0]``). Every action carries that point and
    that text (``Action.text``) because GUI-R1 scores a step by them whatever the predicted type;
    an action word guirl cannot express, or a scroll whose text is no direction, is read as an
    ``answer`` holding the text (``extra["action_word"]`` keeps the word).

The Coordinator's and State Tracker's outputs are free text, not actions: their parsers are CES's
own (:mod:`guirl.methods.ces.roles`).
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import re
from typing import Any

from guirl.actions.formats._base import (
    ActionFormat,
    FormatContext,
    FormatFail,
    between,
    check_direction,
    number,
    point_in,
    tag,
    text_arg,
    to_float,
)
from guirl.actions.types import COORDINATE_TYPES, Action, ActionType, ParseResult

NO_TEXT = "no input text"
NO_POINT = [-100, -100]

_SIMPLE = {
    "wait": Action(ActionType.WAIT),
    "press_back": Action(ActionType.PRESS, key="back"),
    "press_home": Action(ActionType.PRESS, key="home"),
    "enter": Action(ActionType.PRESS, key="enter"),
    "complete": Action(ActionType.TERMINATE, status="success"),
    # CES's executor prompt lists "close" without saying what it does: read as ending the task
    # without success
    "close": Action(ActionType.TERMINATE, status="fail", extra={"word": "close"}),
}
#: The CES prompt's spellings of the GUI-R1 words.
_ALIASES = {"press home": "press_home", "press back": "press_back", "press_enter": "enter", "press enter": "enter"}
_WORD_ARG = re.compile(r"([A-Z_]+)(?:\s*:\s*(.*))?", re.DOTALL)
_WORD_ACTIONS = (
    "CLICK",
    "LONG_PRESS",
    "SCROLL",
    "TYPE",
    "OPEN_APP",
    "PRESS_HOME",
    "PRESS_BACK",
    "ENTER",
    "COMPLETE",
    "WAIT",
)


#: What ``ast.literal_eval`` raises on text that is not a literal (or is too deep / too large).
_LITERAL_ERRORS = (ValueError, SyntaxError, TypeError, RecursionError, MemoryError)


def _answer_literal(body: str) -> Any:
    """The answer as a Python literal: a list of dicts, a dict, or the prompt's unbraced
    ``['action': 'click', 'point': [x, y], ...]`` (read as the dict it means)."""
    with contextlib.suppress(*_LITERAL_ERRORS):  # not a literal as written: try the unbraced form
        return ast.literal_eval(body)
    b = body.strip()
    if b.startswith("[") and b.endswith("]") and not b[1:].lstrip().startswith(("{", "[")):
        with contextlib.suppress(*_LITERAL_ERRORS):
            return ast.literal_eval("{" + b[1:-1] + "}")
    raise FormatFail(f"answer is not a Python literal: {body[:80]!r}")


def _word_action(word: str, arg: str, ctx: FormatContext) -> Action:
    """The ``ACTION: argument`` form of CES's figures (``CLICK: (x, y)``, ``SCROLL: DOWN``,
    ``PRESS_HOME``); points in the same space as the list form."""
    if word in ("CLICK", "LONG_PRESS"):
        m = re.fullmatch(r"[\(\[]\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*[\)\]]", arg)
        if not m:
            raise FormatFail(f"{word} needs '(x, y)', got {arg[:40]!r}")
        p = point_in(ctx.space("resized"), [to_float(m.group(1), "point"), to_float(m.group(2), "point")])
        return Action(ActionType.CLICK if word == "CLICK" else ActionType.LONG_PRESS, point=p)
    if word == "SCROLL":
        return Action(ActionType.SCROLL, direction=check_direction(arg), convention="content")  # type: ignore[arg-type]
    if word in ("TYPE", "OPEN_APP"):
        if not arg:
            raise FormatFail(f"{word} needs a text")
        return Action(ActionType.TYPE if word == "TYPE" else ActionType.OPEN_APP, text=arg)
    return _SIMPLE[{"PRESS_HOME": "press_home", "PRESS_BACK": "press_back"}.get(word, word.lower())]


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
        pipeline = ctx.reading("ces", ("ces", "guir1"))
        if pipeline == "ces":
            name, params = extract_answer_action(text)
            if name is None:
                raise FormatFail("no <answer>name(params)</answer> ending a line (extract_answer_action)")
            return self._ok(ces_call_action(name, parse_params(params or ""), ctx), text, tag(text, "think"))
        if pipeline == "guir1":
            return self._ok(_guir1_action(text, ctx), text, tag(text, "think"))
        body = tag(text, "answer")
        if body is None:
            raise FormatFail("no <answer>...</answer> block")
        call = re.fullmatch(r"\s*([a-z_]+)\((.*)\)\s*", body, re.DOTALL)
        if call and not body.lstrip().startswith(("[", "{")):
            return self._ok(ces_call_action(call.group(1), parse_params(call.group(2)), ctx), text, tag(text, "think"))
        word = _WORD_ARG.fullmatch(body.strip())
        if word and word.group(1) in _WORD_ACTIONS:
            return self._ok(_word_action(word.group(1), (word.group(2) or "").strip(), ctx), text, tag(text, "think"))
        val = _answer_literal(body)
        if isinstance(val, list):
            if not val:
                raise FormatFail("answer list is empty")
            val = val[0]
        if not isinstance(val, dict):
            raise FormatFail("answer must be a dict or a list of dicts")
        kind = val.get("action")
        if not isinstance(kind, str):
            raise FormatFail(f"missing or non-string 'action': {kind!r}")
        kind = _ALIASES.get(kind.strip().lower(), kind.strip().lower())
        if kind in _SIMPLE:
            a = _SIMPLE[kind]
        elif kind in ("click", "long_press", "select"):
            if "point" not in val:
                raise FormatFail(f"{kind} needs 'point'")
            p = point_in(ctx.space("resized"), val["point"])
            if kind == "select":
                option = text_arg(val.get("input_text"), "input_text")
                if option == NO_TEXT:
                    raise FormatFail("select needs the option in input_text")
                a = Action(ActionType.SELECT, point=p, text=option)
            else:
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


_SPACE = re.compile(r"\s*")
_CALL_NAME = re.compile(r"[a-z_]+")
_ANSWER_END = "</answer>"


def _positions(text: str, char: str) -> list[int]:
    """Every index of ``char`` in ``text``, in order."""
    out, i = [], text.find(char)
    while i >= 0:
        out.append(i)
        i = text.find(char, i + 1)
    return out


def _line_end(newlines: list[int], i: int, n: int) -> int:
    """Index of the first newline at or after ``i`` (``n`` when none); ``newlines`` sorted."""
    k = bisect.bisect_left(newlines, i)
    return newlines[k] if k < len(newlines) else n


def _answer_closes(text: str) -> list[int]:
    """Indices of every ``)`` that ``\\)\\s*</answer>\\s*$`` (MULTILINE) matches at: white space,
    ``</answer>``, then white space holding a newline or reaching the end."""
    out = []
    for k in _positions(text, ")"):
        j = _SPACE.match(text, k + 1).end()  # type: ignore[union-attr]
        if text.startswith(_ANSWER_END, j):
            e = _SPACE.match(text, j + len(_ANSWER_END)).end()  # type: ignore[union-attr]
            if e == len(text) or "\n" in text[j + len(_ANSWER_END) : e]:
                out.append(k)
    return out


def extract_answer_action(text: str) -> tuple[str | None, str | None]:
    """CES ``extract_answer_action``: ``(name, params)`` of the ``<answer>name(params)</answer>``
    that ends a line of ``text`` (``(None, None)`` when there is none).

    The captures of CES's ``re.match(r"^[\\s\\S]*?<answer>\\s*(?P<name>[a-z_]+)\\((?P<params>.*?)\\)\\s*</answer>\\s*$",
    text, re.MULTILINE)`` (params stripped), found in linear time: the first ``<answer>`` whose
    call has a closing ``)`` on its line that ends the answer."""
    closes, newlines = _answer_closes(text), _positions(text, "\n")
    p = text.find("<answer>")
    while p >= 0:
        name = _CALL_NAME.match(text, _SPACE.match(text, p + len("<answer>")).end())  # type: ignore[union-attr]
        if name is not None and text.startswith("(", name.end()):
            start = name.end() + 1
            k = bisect.bisect_left(closes, start)
            if k < len(closes) and closes[k] < _line_end(newlines, start, len(text)):
                return name.group(), text[start : closes[k]].strip()
        p = text.find("<answer>", p + 1)
    return None, None


def _quoted_end(text: str, i: int, last_quote: int) -> int:
    """End index (the closing ``'``) of ``'(?:\\\\.|[^'])*'`` whose body starts at ``i``, as the
    regular expression's backtracking finds it: an escape (a backslash and the next character but
    a newline) is taken whenever a quote remains after it; ``i <= last_quote`` (the last ``'``)."""
    while text[i] != "'":
        escape = text[i] == "\\" and i + 1 < len(text) and text[i + 1] != "\n" and i + 2 <= last_quote
        i += 2 if escape else 1
    return i


def _param_pairs(params: str) -> list[tuple[str, str]]:
    """``re.findall(r"(\\w+)\\s*=\\s*('(?:\\\\.|[^'])*')", params)`` (CES ``parse_params``) in linear
    time: the regular expression rescans every word from each of its letters, and its quoted
    part backtracks exponentially on backslashes."""
    out: list[tuple[str, str]] = []
    last_quote, pos = params.rfind("'"), 0
    eq = params.find("=")
    while eq >= 0:
        k = eq
        while k > pos and params[k - 1].isspace():
            k -= 1
        w = k
        while w > pos and (params[w - 1].isalnum() or params[w - 1] == "_"):
            w -= 1
        q = _SPACE.match(params, eq + 1).end()  # type: ignore[union-attr]
        if w < k and q < last_quote and params[q] == "'":
            end = _quoted_end(params, q + 1, last_quote)
            out.append((params[w:k], params[q : end + 1]))
            pos = end + 1
            eq = params.find("=", pos)
        else:
            eq = params.find("=", eq + 1)
    return out


def parse_params(params: str) -> dict[str, Any]:
    """CES ``parse_params``: ``key='value'`` pairs; each value a Python literal, else its text."""
    out: dict[str, Any] = {}
    for key, raw in _param_pairs(params.strip()):
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            out[key] = raw[1:-1]
    return out


_CES_SIMPLE = {
    "press_home": Action(ActionType.PRESS, key="home"),
    "press_back": Action(ActionType.PRESS, key="back"),
    "press_enter": Action(ActionType.PRESS, key="enter"),
    "press_appselect": Action(ActionType.PRESS, key="recent"),
    "wait": Action(ActionType.WAIT),
    "finished": Action(ActionType.TERMINATE, status="success"),
    "error": Action(ActionType.TERMINATE, status="fail"),
}


def ces_call_action(name: str, params: dict[str, Any], ctx: FormatContext) -> Action:
    """A CES executor call (``name``, parsed ``params``) -> canonical action; points in screen
    pixels (``ctx.width`` x ``ctx.height``)."""
    if name in _CES_SIMPLE:
        return _CES_SIMPLE[name]
    if name in ("click", "long_press"):
        raw = params.get("point")
        if not isinstance(raw, str):
            raise FormatFail(f"{name} needs point='(x, y)' (a quoted tuple), got {raw!r}")
        try:
            v = ast.literal_eval(raw)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            raise FormatFail(f"point {raw!r} is not a literal (x, y)") from None
        if not isinstance(v, (list, tuple)) or len(v) < 2:
            raise FormatFail(f"point {raw!r} is not (x, y)")
        x, y = number(v[0], "point"), number(v[1], "point")
        # CES measures a point off the screen as it is: the action's point is clamped to the screen
        # and the point as read kept in extra["raw_point"] (what the click rule measures)
        w, h = ctx.width, ctx.height
        cx, cy = min(max(x, 0.0), float(w)), min(max(y, 0.0), float(h))
        extra = {} if (cx, cy) == (x, y) else {"raw_point": (x / w, y / h)}
        return Action(
            ActionType.CLICK if name == "click" else ActionType.LONG_PRESS, point=(cx / w, cy / h), extra=extra
        )
    if name in ("type", "open_app"):
        key = "content" if name == "type" else "app_name"
        t = params.get(key)
        if not isinstance(t, str):
            raise FormatFail(f"{name} needs {key}='...'")
        return Action(ActionType.TYPE if name == "type" else ActionType.OPEN_APP, text=t)
    if name == "scroll":
        d = params.get("direction")
        if isinstance(d, str) and d.strip().lower() in ("up", "down", "left", "right"):
            return Action(ActionType.SCROLL, direction=d.strip().lower(), convention="content")  # type: ignore[arg-type]
        return Action(ActionType.SCROLL, direction="down", convention="content", extra={"direction_stated": False})
    raise FormatFail(f"unknown CES executor action {name!r}")


_GUIR1_ACTION = re.compile(r"'action':\s*'(\w+)'")
_GUIR1_TEXT = re.compile(r"'input_text':\s*'(.*?)'")
_GUIR1_BRACKET = re.compile(r"\[(\d+),\s*(\d+)]")
_GUIR1_TYPES = {
    "click": ActionType.CLICK,
    "long_press": ActionType.LONG_PRESS,
    "type": ActionType.TYPE,
    "open_app": ActionType.OPEN_APP,
    "select": ActionType.SELECT,
    "wait": ActionType.WAIT,
    "complete": ActionType.TERMINATE,
    "press_back": ActionType.PRESS,
    "press_home": ActionType.PRESS,
    "press_enter": ActionType.PRESS,
    "scroll": ActionType.SCROLL,
}


def _line_of(text: str, i: int) -> tuple[int, int, int, int]:
    """``(start, end, first "{", last "}")`` of the line holding index ``i`` (end: its newline or
    the end of the text; -1 when the line has no such brace)."""
    start = text.rfind("\n", 0, i) + 1
    end = text.find("\n", i)
    end = len(text) if end < 0 else end
    return start, end, text.find("{", start, end), text.rfind("}", start, end)


def _guir1_coord(body: str) -> tuple[str, str] | None:
    """The groups of GUI-R1's ``re.search(r"\\{.*\\[(\\d+),\\s*(\\d+)]\\s*.*\\}", body)`` in linear
    time: on the first line holding a ``{`` followed by a ``[int, int]`` that a ``}`` follows (on
    the line where the white space after ``]`` ends), the last such ``[int, int]`` of that line."""
    found: tuple[int, re.Match[str]] | None = None  # (end of its line, last match on that line)
    line: tuple[int, int, int, int] | None = None  # the line of the bracket being read
    for m in _GUIR1_BRACKET.finditer(body):
        if found is not None and m.start() > found[0]:
            break
        if line is None or m.start() > line[1]:
            line = _line_of(body, m.start())
        w = _SPACE.match(body, m.end()).end()  # type: ignore[union-attr]
        tail = line if w <= line[1] else _line_of(body, w)
        if 0 <= line[2] < m.start() and tail[3] >= w:
            found = (line[1], m)
    return None if found is None else (found[1].group(1), found[1].group(2))


def _guir1_action(text: str, ctx: FormatContext) -> Action:
    """GUI-R1's extraction (module docstring, pipeline ``"guir1"``)."""
    answer = between(text, "<answer>", "</answer>")
    word, inp, coord = None, NO_TEXT, (0, 0)
    if answer is not None:
        body = answer.strip()
        a = _GUIR1_ACTION.search(body)
        word = a.group(1) if a else None
        t = _GUIR1_TEXT.search(body)
        inp = t.group(1) if t else NO_TEXT
        c = _guir1_coord(body)
        try:
            coord = (int(c[0]), int(c[1])) if c else (0, 0)
        except ValueError:  # more digits than int() converts: GUI-R1's int() raises as well
            raise FormatFail("the point has more digits than int() converts") from None
    sp = ctx.space("resized")
    point = sp.to_norm(*coord)  # x * (W / W_r) / W: the scaled pixel point, normalised
    extra = {"action_word": word}
    t = _GUIR1_TYPES.get(word or "")
    if t is ActionType.SCROLL and inp.strip().lower() in ("up", "down", "left", "right"):
        return Action(t, direction=inp.strip().lower(), convention="content", point=point, text=inp, extra=extra)  # type: ignore[arg-type]
    if t is ActionType.PRESS:
        return Action(t, key=word[6:], point=point, text=inp, extra=extra)  # type: ignore[arg-type,index]
    if t is ActionType.TERMINATE:
        return Action(t, status="success", point=point, text=inp, extra=extra)
    if t is not None and t is not ActionType.SCROLL and (point is not None or t not in COORDINATE_TYPES):
        return Action(t, point=point, text=inp, extra=extra)
    return Action(ActionType.ANSWER, point=point, text=inp, extra=extra)
