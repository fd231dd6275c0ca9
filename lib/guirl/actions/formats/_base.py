"""Shared machinery of the action-format parsers/formatters.

An :class:`ActionFormat` turns model text into a canonical :class:`~guirl.actions.types.Action`
(``parse``, never raises) and back (``format``, raises :class:`ActionError` for action types
the format cannot express). ``project`` gives the action exactly as the format can represent
it (scroll direction in the format's convention, points on the format's grid, fields the format
cannot carry dropped or filled with the format's default), so that the round-trip property is
``parse(format(a), ctx).action == project(a, ctx)``.

Parsers read untrusted model text, so every helper here runs in time linear in its input (no
regular expression that rescans the rest of the text from each position). An error inside a
parser that is not a reading failure (:class:`FormatFail`, :class:`ActionError`) is a bug: ``parse``
logs its type and returns a failure, or re-raises it when :data:`RAISE_INTERNAL_ERRORS` is true
(the test suite sets it; ``GUIRL_PARSER_RAISE=1`` sets it for a process).
"""

from __future__ import annotations

import abc
import ast
import json
import logging
import math
import os
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from guirl.actions.coords import CoordKind, CoordSpace
from guirl.actions.types import Action, ActionError, ActionType, ParseResult
from guirl.imaging import PixelBudgetError, check_budget

logger = logging.getLogger("guirl.actions.formats")

#: Environment variable that makes :data:`RAISE_INTERNAL_ERRORS` true when set to ``1``.
RAISE_ENV = "GUIRL_PARSER_RAISE"
#: Re-raise a parser's internal errors instead of turning them into parse failures (module doc).
RAISE_INTERNAL_ERRORS: bool = os.environ.get(RAISE_ENV) == "1"

#: Reason used whenever a model coordinate falls outside the screen (public evaluators count
#: such a prediction wrong, so parsers fail instead of clamping).
OUTSIDE = "point outside the screen"


#: Optional/required value fields of :class:`Action` (``type`` and ``extra`` excluded).
ACTION_FIELDS: tuple[str, ...] = ("point", "point2", "direction", "convention", "text", "key", "status", "duration_ms")

#: Fields most formats carry per type (a format overrides ``keeps`` where it differs).
BASE_KEEPS: dict[ActionType, frozenset[str]] = {
    ActionType.CLICK: frozenset({"point"}),
    ActionType.LONG_PRESS: frozenset({"point", "duration_ms"}),
    ActionType.SCROLL: frozenset({"point", "point2", "direction", "convention"}),
    ActionType.TYPE: frozenset({"text"}),
    ActionType.ANSWER: frozenset({"text"}),
    ActionType.OPEN_APP: frozenset({"text"}),
    ActionType.PRESS: frozenset({"key"}),
    ActionType.WAIT: frozenset({"duration_ms"}),
    ActionType.TERMINATE: frozenset({"status"}),
    ActionType.SELECT: frozenset({"point", "text"}),
    ActionType.HOVER: frozenset({"point"}),
}


class FormatFail(Exception):
    """Raised inside ``_parse`` to return ``ParseResult.fail(reason)``."""


@dataclass(frozen=True)
class FormatContext:
    """What a format needs to convert coordinates.

    ``width``/``height``: original screenshot size in pixels. ``image_width``/``image_height``:
    the size of the image the model saw; when ``None`` it is computed with Qwen2.5-VL
    ``smart_resize(height, width, min_pixels, max_pixels)`` from the model's pixel budget
    (``cfg.model.min_pixels`` / ``max_pixels``), which has no default: a format whose
    coordinates are resized pixels raises :class:`guirl.imaging.PixelBudgetError` when neither
    the image size nor the budget is given (``docs/fidelity/ccpo.md``, CCPO-29). ``grounded_point``: the
    normalised point a grounding model produced for a Co-EPG planner step (used only by
    ``coepg_planner`` for coordinate actions).

    ``strict``: read the output exactly as the original evaluation pipeline named by
    ``pipeline`` does (the format's own reference pipeline when ``None``): reject what it
    rejects (fenced JSON, prose around it, a float where it wants an integer, a lower-case key,
    ...) and take what it takes, with its defaults (a missing coordinate read as ``(0, 0)``, an
    unknown word read as a click, ...). Each format's docstring lists its pipelines; an evaluator
    protocol chooses them (:meth:`guirl.metrics.protocols.Protocol.parse`). ``elements``: the
    screen's element boxes (normalised, in the dataset's order) for outputs that name an element
    by index (CoAT's set-of-marks ``idx``).
    """

    width: int = 1080
    height: int = 2400
    image_width: int | None = None
    image_height: int | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None
    grounded_point: tuple[float, float] | None = None
    strict: bool = False
    pipeline: str | None = None
    elements: tuple[tuple[float, float, float, float], ...] = ()

    def reading(self, default: str, known: tuple[str, ...]) -> str | None:
        """The pipeline a strict reading follows (``None`` when not strict): ``pipeline`` or the
        format's ``default``; :class:`FormatFail` naming the known ones for any other name."""
        if not self.strict:
            return None
        name = self.pipeline or default
        if name not in known:
            raise FormatFail(f"no strict reading for pipeline {name!r}; known: {list(known)}")
        return name

    def space(self, kind: CoordKind) -> CoordSpace:
        """The :class:`CoordSpace` of ``kind`` for this screen."""
        if kind == "normalized":
            return CoordSpace.normalized()
        if kind == "thousand":
            return CoordSpace.thousand()
        if kind == "pixel":
            return CoordSpace.pixels(self.width, self.height)
        if self.image_width is not None and self.image_height is not None:
            return CoordSpace("resized", int(self.image_width), int(self.image_height))
        lo, hi = check_budget(self.min_pixels, self.max_pixels, "FormatContext (resized coordinates)")
        return CoordSpace.resized(self.width, self.height, min_pixels=lo, max_pixels=hi)


# ----------------------------------------------------------------------------- helpers
def number(v: Any, what: str) -> float:
    """A finite int/float (not bool), else :class:`FormatFail`."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FormatFail(f"{what} must be a number, got {v!r}")
    f = float(v)
    if not math.isfinite(f):
        raise FormatFail(f"{what} must be finite, got {v!r}")
    return f


def to_float(text: str, what: str) -> float:
    """``float(text)`` for a number matched in model text, :class:`FormatFail` when it is none
    (a character class such as ``[-+0-9.eE]+`` also matches ``'-'`` or ``'1e'``)."""
    try:
        return float(text)
    except ValueError:
        raise FormatFail(f"{what} {text[:40]!r} is not a number") from None


def point_in(space: CoordSpace, v: Any, what: str = "point") -> tuple[float, float]:
    """``[x, y]`` (or a 4-number box ``[x1, y1, x2, y2]``, its centre) in ``space`` -> normalised."""
    if not isinstance(v, (list, tuple)) or len(v) not in (2, 4):
        raise FormatFail(f"{what} must be [x, y] (or a box [x1, y1, x2, y2]), got {v!r}")
    nums = [number(c, what) for c in v]
    if len(nums) == 4:
        x1, y1, x2, y2 = nums
        if x2 < x1 or y2 < y1:
            raise FormatFail(f"{what} box {v!r} has x2 < x1 or y2 < y1")
        x, y = (x1 + x2) / 2.0, (y1 + y2) / 2.0
        for c, lim in ((x1, space.width), (x2, space.width), (y1, space.height), (y2, space.height)):
            if not 0.0 <= c <= lim:
                raise FormatFail(f"{OUTSIDE}: {what} box {v!r} not inside [0, {space.width}] x [0, {space.height}]")
    else:
        x, y = nums
    p = space.to_norm(x, y)
    if p is None:
        raise FormatFail(f"{OUTSIDE}: {what} {v!r} not inside [0, {space.width}] x [0, {space.height}] ({space.kind})")
    return p


def fmt_point(space: CoordSpace, p: tuple[float, float]) -> list[Any]:
    """Normalised point -> ``[x, y]`` in ``space`` on the space's grid."""
    return list(space.from_norm(p))


def fmt_num(v: float) -> str:
    """Shortest text of a number: ``3`` for 3.0, ``0.25`` for 0.25."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def direction_from_points(p: tuple[float, float], q: tuple[float, float]) -> str | None:
    """Finger direction of a swipe from ``p`` to ``q`` (normalised per axis).

    Dominant axis wins; a tie goes to the vertical axis (the rule of AgentCPM-GUI
    ``eval/run_predict_qwen2_5VL.py::qwen2_5_2_minicpm`` and of the first-maximum cosine in
    ``eval/utils/evaluator.py::_get_direction``). ``None`` for a zero-length swipe.
    """
    dx, dy = q[0] - p[0], q[1] - p[1]
    if dx == 0 and dy == 0:
        return None
    if abs(dx) > abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def between(text: str, start: str, end: str) -> str | None:
    """The text between the first ``start`` and the first ``end`` after it (not stripped), or
    ``None``: what ``re.search(f"{start}(.*?){end}", text, re.DOTALL)`` captures, in linear time."""
    i = text.find(start)
    if i < 0:
        return None
    j = text.find(end, i + len(start))
    return None if j < 0 else text[i + len(start) : j]


def json_loads(text: str) -> Any:
    """``json.loads``, raising ``json.JSONDecodeError`` for every text it cannot read: a number
    too long to convert and nesting too deep are reading failures of model output, not bugs."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as e:
        raise json.JSONDecodeError(f"{type(e).__name__}: {str(e)[:80]}", text, 0) from None


def tag(text: str, name: str) -> str | None:
    """Content of the first ``<name>...</name>`` (stripped), or ``None``."""
    body = between(text, f"<{name}>", f"</{name}>")
    return None if body is None else body.strip()


def strip_fence(text: str, languages: tuple[str, ...] = ("json",)) -> str:
    """``text`` without a leading code fence (three backticks, optionally one of ``languages``,
    and the white space after it) and a trailing one (three backticks and the white space
    before them): ``re.sub(r"^```(?:json)?\\s*|\\s*```$", "", text)`` for a ``text`` that
    starts with the fence and has no trailing newline, in linear time."""
    if not text.startswith("```"):
        return text
    rest = text[3:]
    for lang in languages:
        if rest.startswith(lang):
            rest = rest[len(lang) :]
            break
    rest = rest.lstrip()
    return rest[:-3].rstrip() if rest.endswith("```") else rest


def py_call(src: str) -> tuple[str, list[Any], dict[str, Any]]:
    """Parse one Python-style call ``f.g(a, k=v)`` whose arguments are literals.

    Returns ``(dotted_name, args, kwargs)``; :class:`FormatFail` for anything else.
    """
    src = src.strip()
    try:
        node = ast.parse(src, mode="eval").body
    except SyntaxError as e:
        raise FormatFail(f"not a valid call expression: {src[:80]!r} ({e.msg})") from None
    if not isinstance(node, ast.Call):
        raise FormatFail(f"expected a function call, got {src[:80]!r}")
    parts: list[str] = []
    f = node.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if not isinstance(f, ast.Name):
        raise FormatFail(f"unsupported callee in {src[:80]!r}")
    parts.append(f.id)
    name = ".".join(reversed(parts))
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise FormatFail(f"arguments of {name}() must be literals") from None
    if any(k.arg is None for k in node.keywords):
        raise FormatFail(f"**kwargs not allowed in {name}()")
    return name, args, kwargs


def py_str(s: str) -> str:
    """Python single-quoted literal of ``s`` (escapes ``\\``, quotes, newlines); inverse of literal_eval."""
    out = repr(str(s))
    if out.startswith('"'):  # repr chose double quotes because s holds a single quote
        out = "'" + out[1:-1].replace('\\"', '"').replace("'", "\\'") + "'"
    return out


def py_dstr(s: str) -> str:
    """Python double-quoted literal of ``s``."""
    body = py_str(s)[1:-1].replace("\\'", "'").replace('"', '\\"')
    return '"' + body + '"'


def text_arg(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise FormatFail(f"{what} must be a string, got {v!r}")
    return v


# ----------------------------------------------------------------------------- base class
class ActionFormat(abc.ABC):
    """One model family's action output format. Subclasses set the class attributes and
    implement ``_parse``/``_format``; ``_project`` adjusts fields the format cannot carry."""

    name: ClassVar[str]
    #: Coordinate space of the format's points.
    coord_kind: ClassVar[CoordKind]
    #: Scroll-direction convention the format's direction words are in.
    convention: ClassVar[str]
    #: Action types ``format`` can write.
    types: ClassVar[frozenset[ActionType]]
    #: Whether the format carries a free-text thought.
    has_thought: ClassVar[bool] = False
    #: Per type, the Action fields the format carries (others are dropped by ``project``).
    keeps: ClassVar[dict[ActionType, frozenset[str]]] = {}

    # public API ------------------------------------------------------------------
    def parse(self, text: str, ctx: FormatContext) -> ParseResult:
        """Model text -> :class:`ParseResult`. Never raises."""
        try:
            if not isinstance(text, str):
                return ParseResult.fail(f"{self.name}: output must be str, got {type(text).__name__}")
            res = self._parse(text, ctx)
            return res
        except FormatFail as e:
            return ParseResult.fail(f"{self.name}: {e}", raw=text if isinstance(text, str) else "")
        except ActionError as e:
            return ParseResult.fail(f"{self.name}: invalid action: {e}", raw=text if isinstance(text, str) else "")
        except PixelBudgetError:  # the caller's missing pixel budget, not the model's output
            raise
        except Exception as e:  # noqa: BLE001 - parsers of model output never raise
            logger.warning("%s: internal parser error %s: %s", self.name, type(e).__name__, e)
            if RAISE_INTERNAL_ERRORS:
                raise
            return ParseResult.fail(
                f"{self.name}: unexpected {type(e).__name__}: {e}", raw=text if isinstance(text, str) else ""
            )

    def format(self, action: Action, ctx: FormatContext, thought: str | None = None) -> str:
        """Canonical action -> model text. Raises :class:`ActionError` for types the format lacks."""
        reason = self.unsupported(action)
        if reason is not None:
            raise ActionError(reason)
        if action.type is ActionType.SCROLL:
            action = action.in_convention(self.convention)  # type: ignore[arg-type]
            if action.point is not None and action.point2 is not None:
                finger = direction_from_points(action.point, action.point2)
                want = action.in_convention("finger").direction
                if finger is not None and finger != want:
                    raise ActionError(
                        f"scroll direction {action.direction!r} ({action.convention}) contradicts its points "
                        f"{action.point} -> {action.point2} (finger {finger!r})"
                    )
        return self._format(action, ctx, thought if self.has_thought else None)

    def project(self, action: Action, ctx: FormatContext) -> Action:
        """The action exactly as this format represents it: ``parse(format(a)) == project(a)``."""
        reason = self.unsupported(action)
        if reason is not None:
            raise ActionError(reason)
        a = action
        if a.type is ActionType.SCROLL:
            a = a.in_convention(self.convention)  # type: ignore[arg-type]
        a = self._project(a, ctx)
        space = ctx.space(self.coord_kind)
        if a.point is not None:
            a = replace(a, point=space.quantize(a.point))
        if a.point2 is not None:
            a = replace(a, point2=space.quantize(a.point2))
        if a.type is ActionType.SCROLL and a.point is not None and a.point2 is not None:
            d = direction_from_points(a.point, a.point2)
            if d is not None:
                a = replace(a, direction=d, convention="finger").in_convention(self.convention)  # type: ignore[arg-type]
        return replace(a, extra={})

    def unsupported(self, action: Action) -> str | None:
        """Why ``format`` cannot write ``action`` (naming format and type), or ``None``."""
        if action.type not in self.types:
            return (
                f"format {self.name!r} cannot express a {action.type.value!r} action; "
                f"expressible: {sorted(t.value for t in self.types)}"
            )
        return self._unsupported(action)

    def can_format(self, action: Action) -> bool:
        return self.unsupported(action) is None

    def _unsupported(self, action: Action) -> str | None:
        """Subclass hook: values (a key, a status) the format's vocabulary lacks."""
        return None

    def tolerance(self, ctx: FormatContext) -> float:
        """Per-axis round-trip error bound of a point, in normalised units."""
        return ctx.space(self.coord_kind).tolerance()

    # hooks -----------------------------------------------------------------------
    @abc.abstractmethod
    def _parse(self, text: str, ctx: FormatContext) -> ParseResult: ...

    @abc.abstractmethod
    def _format(self, action: Action, ctx: FormatContext, thought: str | None) -> str: ...

    def _project(self, action: Action, ctx: FormatContext) -> Action:
        keep = self.keeps.get(action.type, BASE_KEEPS.get(action.type, frozenset()))
        a = replace(action, **{f: None for f in ACTION_FIELDS if f not in keep})
        if a.type is ActionType.SCROLL and a.point is None and a.point2 is not None:
            a = replace(a, point2=None)  # an end point without a start cannot be written
        return a

    def _ok(self, action: Action, text: str, thought: str | None = None) -> ParseResult:
        return ParseResult(action=action, raw=text, thought=thought)


def scroll_from_points(p: tuple[float, float], q: tuple[float, float], convention: str, what: str = "swipe") -> Action:
    """Scroll action from a finger swipe ``p -> q`` expressed in ``convention``."""
    d = direction_from_points(p, q)
    if d is None:
        raise FormatFail(f"{what} has zero length (start == end)")
    return Action(ActionType.SCROLL, point=p, point2=q, direction=d, convention="finger").in_convention(
        convention  # type: ignore[arg-type]
    )


def check_direction(v: Any) -> str:
    if not isinstance(v, str) or v.strip().lower() not in ("up", "down", "left", "right"):
        raise FormatFail(f"direction must be up/down/left/right, got {v!r}")
    return v.strip().lower()
