"""The canonical GUI action shared by every parser, metric, reward and environment.

Units, stated once and enforced in ``__post_init__``:

* ``point`` / ``point2`` are **normalised** screen coordinates ``(x, y)`` in ``[0, 1]``,
  x = pixel_x / screen_width, y = pixel_y / screen_height of the *original* screenshot.
  Converters to pixels, ``[0, 1000]`` and the model's resized image live in
  :mod:`guirl.actions.coords`.
* ``direction`` of a scroll always comes with ``convention``:
  ``"finger"`` (the direction the finger moves; AgentCPM-GUI, Qwen2.5-VL ``swipe``) or
  ``"content"`` (the direction the content moves / "scroll down to see more";
  AndroidControl). ``Action.in_convention`` converts between them.
* ``duration_ms`` is milliseconds (long press hold, wait time).
"""

from __future__ import annotations

import enum
import math
import numbers
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

Direction = Literal["up", "down", "left", "right"]
Convention = Literal["finger", "content"]
Key = Literal["back", "home", "enter", "recent"]
Status = Literal["success", "fail"]

DIRECTIONS: tuple[str, ...] = ("up", "down", "left", "right")
CONVENTIONS: tuple[str, ...] = ("finger", "content")
KEYS: tuple[str, ...] = ("back", "home", "enter", "recent")
STATUSES: tuple[str, ...] = ("success", "fail")
OPPOSITE: dict[str, str] = {"up": "down", "down": "up", "left": "right", "right": "left"}


class ActionType(str, enum.Enum):
    """Every action kind the five papers use, under one name each."""

    CLICK = "click"
    LONG_PRESS = "long_press"
    SCROLL = "scroll"  # also swipe / drag: a direction and optionally start/end points
    TYPE = "type"
    PRESS = "press"  # system key: back, home, enter, recent
    OPEN_APP = "open_app"
    WAIT = "wait"
    TERMINATE = "terminate"  # task finished; status success or fail
    ANSWER = "answer"  # information-query answer shown to the user
    SELECT = "select"  # web: choose an option (Mind2Web SELECT)
    HOVER = "hover"  # web: hover over an element

    def __str__(self) -> str:  # "click", not "ActionType.CLICK"
        return self.value


#: Action types whose correctness depends on a screen coordinate.
COORDINATE_TYPES: frozenset[ActionType] = frozenset(
    {ActionType.CLICK, ActionType.LONG_PRESS, ActionType.SELECT, ActionType.HOVER}
)
#: Action types whose correctness depends on a text argument.
TEXT_TYPES: frozenset[ActionType] = frozenset({ActionType.TYPE, ActionType.ANSWER, ActionType.OPEN_APP})


class ActionError(ValueError):
    """An action was constructed with an argument outside its declared units or vocabulary."""


def _check_point(name: str, p: tuple[float, float] | None) -> tuple[float, float] | None:
    if p is None:
        return None
    if len(p) != 2:
        raise ActionError(f"{name} must be (x, y), got {p!r}")
    x, y = float(p[0]), float(p[1])
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ActionError(f"{name} must be finite, got {p!r}")
    if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
        raise ActionError(
            f"{name}={p!r} is outside [0, 1]: points are normalised by screen width/height; "
            "convert pixels or [0,1000] with guirl.actions.coords first"
        )
    return (x, y)


def _check_duration(v: Any) -> int:
    """``duration_ms`` as an ``int`` >= 0: an integral float (``2000.0``) becomes the int; NaN,
    infinity, fractions, bools and non-numbers raise :class:`ActionError`."""
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, float)):
        raise ActionError(f"duration_ms must be a whole number of milliseconds, got {type(v).__name__} {v!r}")
    if isinstance(v, float) and not v.is_integer():  # NaN and infinity are not integers either
        raise ActionError(f"duration_ms must be a whole number of milliseconds, got {v!r}")
    ms = int(v)
    if ms < 0:
        raise ActionError(f"duration_ms must be >= 0, got {v}")
    return ms


@dataclass(frozen=True)
class Action:
    """One GUI action in canonical units (see module docstring).

    Required arguments by type:
      click / long_press / hover: ``point``; select: ``point`` and ``text`` (the option);
      scroll: ``direction`` + ``convention`` (``point``/``point2`` optional start/end);
      type / answer / open_app: ``text``; press: ``key``; terminate: ``status``;
      wait: nothing (``duration_ms`` optional).
    """

    type: ActionType
    point: tuple[float, float] | None = None
    point2: tuple[float, float] | None = None
    direction: Direction | None = None
    convention: Convention | None = None
    text: str | None = None
    key: Key | None = None
    status: Status | None = None
    duration_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        t = self.type
        if not isinstance(t, ActionType):
            try:
                t = ActionType(t)
            except ValueError as e:
                raise ActionError(
                    f"unknown action type {self.type!r}; expected one of {[a.value for a in ActionType]}"
                ) from e
            object.__setattr__(self, "type", t)
        object.__setattr__(self, "point", _check_point("point", self.point))
        object.__setattr__(self, "point2", _check_point("point2", self.point2))
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise ActionError(f"direction {self.direction!r} not in {DIRECTIONS}")
        if self.convention is not None and self.convention not in CONVENTIONS:
            raise ActionError(f"convention {self.convention!r} not in {CONVENTIONS}")
        if self.key is not None and self.key not in KEYS:
            raise ActionError(f"key {self.key!r} not in {KEYS}")
        if self.status is not None and self.status not in STATUSES:
            raise ActionError(f"status {self.status!r} not in {STATUSES}")
        if self.duration_ms is not None:
            object.__setattr__(self, "duration_ms", _check_duration(self.duration_ms))
        missing = self._missing()
        if missing:
            raise ActionError(f"{t.value} action needs {missing}")

    def _missing(self) -> str | None:
        t = self.type
        if t in (ActionType.CLICK, ActionType.LONG_PRESS, ActionType.HOVER) and self.point is None:
            return "point"
        if t is ActionType.SELECT and (self.point is None or self.text is None):
            return "point and text"
        if t is ActionType.SCROLL and (self.direction is None or self.convention is None):
            return "direction and convention"
        if t in TEXT_TYPES and self.text is None:
            return "text"
        if t is ActionType.PRESS and self.key is None:
            return "key"
        if t is ActionType.TERMINATE and self.status is None:
            return "status"
        return None

    # ----------------------------------------------------------------- helpers
    def in_convention(self, convention: Convention) -> Action:
        """Return this action with its scroll direction expressed in ``convention``.

        Finger and content directions are opposite: swiping the finger up moves the
        content up and reveals what was below, which AndroidControl calls "scroll down".
        Non-scroll actions are returned unchanged.
        """
        if self.type is not ActionType.SCROLL or self.convention == convention:
            return self
        assert self.direction is not None
        return replace(self, direction=OPPOSITE[self.direction], convention=convention)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with ``None`` fields dropped (round-trips via :meth:`from_dict`)."""
        d = asdict(self)
        d["type"] = self.type.value
        out = {k: v for k, v in d.items() if v is not None and not (k == "extra" and not v)}
        for k in ("point", "point2"):
            if k in out:
                out[k] = list(out[k])
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Action:
        """Inverse of :meth:`to_dict`; raises :class:`ActionError` naming the bad key."""
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ActionError(f"unknown action keys {sorted(unknown)}; known: {sorted(known)}")
        if "type" not in d:
            raise ActionError("action dict has no 'type'")
        kw = dict(d)
        for k in ("point", "point2"):
            if kw.get(k) is not None:
                kw[k] = tuple(kw[k])
        kw["extra"] = dict(kw.get("extra") or {})
        return cls(**kw)


@dataclass(frozen=True)
class ParseResult:
    """Outcome of parsing model output. Parsers never raise: failure is ``ok=False`` + ``reason``."""

    action: Action | None
    reason: str = ""
    raw: str = ""
    thought: str | None = None

    @property
    def ok(self) -> bool:
        return self.action is not None

    @classmethod
    def fail(cls, reason: str, raw: str = "") -> ParseResult:
        return cls(action=None, reason=reason, raw=raw)
