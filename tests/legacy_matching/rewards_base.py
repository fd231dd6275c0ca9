"""Frozen copy of ``lib/guirl/rewards/base.py`` at commit c7e8c23 (before the matching engine); tests only."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from guirl.actions.types import (
    COORDINATE_TYPES,
    TEXT_TYPES,
    Action,
    ActionError,
    ActionType,
    ParseResult,
)
from guirl.geometry import Box, Point, box_center, distance, enlarge_box, point_in_box
from guirl.textmatch import contains_match, normalize_text, token_f1

__all__ = [
    "RewardResult",
    "GroundTruth",
    "RewardSpec",
    "RewardInputError",
    "as_parse_result",
    "type_matches",
    "gt_point",
    "gt_boxes",
    "distance_to_box",
    "min_target_distance",
    "click_hit",
    "text_matches",
    "direction_matches",
    "non_coordinate_args_match",
]


class RewardInputError(ValueError):
    """A ground-truth record cannot be turned into a :class:`GroundTruth`; the message names the key."""


@dataclass(frozen=True)
class RewardResult:
    """Scalar reward plus the named components it was built from (all plain ``float``)."""

    total: float
    components: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", float(self.total))
        object.__setattr__(self, "components", {k: float(v) for k, v in self.components.items()})
        if not math.isfinite(self.total):
            raise ValueError(f"reward total must be finite, got {self.total!r}")


def _as_box(value: Any, key: str) -> Box | None:
    if value is None:
        return None
    try:
        vals = tuple(float(v) for v in value)
    except (TypeError, ValueError) as e:
        raise RewardInputError(f"{key}={value!r} is not a list of 4 numbers (x1, y1, x2, y2)") from e
    if len(vals) != 4:
        raise RewardInputError(f"{key}={value!r} must have 4 numbers (x1, y1, x2, y2), got {len(vals)}")
    x1, y1, x2, y2 = vals
    if x1 > x2 or y1 > y2:
        raise RewardInputError(f"{key}={value!r} must satisfy x1 <= x2 and y1 <= y2")
    if not all(-0.5 <= v <= 1.5 for v in vals):
        raise RewardInputError(
            f"{key}={value!r} does not look normalised to [0, 1]; divide pixel boxes by the screen "
            "width/height (guirl.actions.coords) before building a GroundTruth"
        )
    return (x1, y1, x2, y2)


@dataclass(frozen=True)
class GroundTruth:
    """The target of one step, in normalised screen coordinates.

    ``box`` is the target element's box (the one that contains the ground-truth point);
    ``candidate_boxes`` are further acceptable boxes (UI-S1/CCPO ``candidate_bbox``). When the
    action has no ``point`` but a box is given, the box centre is used as the target point.
    """

    action: Action
    box: Box | None = None
    candidate_boxes: tuple[Box, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "box", _as_box(self.box, "gt_box"))
        object.__setattr__(
            self,
            "candidate_boxes",
            tuple(_as_box(b, f"candidate_boxes[{i}]") for i, b in enumerate(self.candidate_boxes)),
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> GroundTruth:
        """Build from dataset columns: ``gt_action`` (JSON string or dict from :meth:`Action.to_dict`),
        optional ``gt_box`` (``[x1, y1, x2, y2]`` normalised) and ``candidate_boxes``.

        Raises :class:`RewardInputError` naming the missing or malformed key.
        """
        if "gt_action" not in row:
            raise RewardInputError(
                f"row has no 'gt_action' column (keys: {sorted(row)}); add Action.to_dict() as a JSON string"
            )
        raw = row["gt_action"]
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as e:
                raise RewardInputError(f"gt_action is not valid JSON: {e}; value={raw[:200]!r}") from e
        if isinstance(raw, Action):
            action = raw
        elif isinstance(raw, Mapping):
            try:
                action = Action.from_dict(dict(raw))
            except (ActionError, TypeError) as e:
                raise RewardInputError(f"gt_action={raw!r} is not a valid Action dict: {e}") from e
        else:
            raise RewardInputError(f"gt_action must be a JSON string or dict, got {type(raw).__name__}")
        cands = row.get("candidate_boxes") or ()
        if isinstance(cands, str):
            cands = json.loads(cands)
        box = row.get("gt_box")
        if isinstance(box, str):
            box = json.loads(box)
        return cls(action=action, box=box, candidate_boxes=tuple(cands))


RewardFn = Callable[..., RewardResult]


@dataclass(frozen=True)
class RewardSpec:
    """Registry entry: the function, its config class, declared output range and source.

    ``extras`` names the keyword arguments beyond ``(pred, gt)`` the function needs (e.g. Co-EPG's
    per-model ``grounding`` outputs); the TRL adapter takes them from dataset columns or an
    ``extras`` callable.
    """

    name: str
    fn: RewardFn
    config_cls: type
    low: float
    high: float
    reference: str
    extras: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------- helpers
def as_parse_result(pred: ParseResult | Action | None) -> ParseResult:
    """Normalise a reward input: ``Action`` -> ok ``ParseResult``; ``None`` -> failed parse."""
    if pred is None:
        return ParseResult.fail("no prediction")
    if isinstance(pred, Action):
        return ParseResult(action=pred)
    if isinstance(pred, ParseResult):
        return pred
    raise TypeError(f"prediction must be ParseResult, Action or None, got {type(pred).__name__}")


def type_matches(pred: Action, gt: Action) -> bool:
    """Same :class:`ActionType`."""
    return pred.type is gt.type


def gt_point(gt: GroundTruth) -> Point | None:
    """Ground-truth point: ``gt.action.point``, else the centre of ``gt.box``, else ``None``."""
    if gt.action.point is not None:
        return gt.action.point
    if gt.box is not None:
        return box_center(gt.box)
    return None


def gt_boxes(gt: GroundTruth, *, include_candidates: bool = True) -> list[Box]:
    """``[gt.box] + candidate_boxes`` (those present)."""
    out: list[Box] = [gt.box] if gt.box is not None else []
    if include_candidates:
        out.extend(gt.candidate_boxes)
    return out


def distance_to_box(p: Sequence[float], box: Sequence[float]) -> float:
    """Euclidean distance from ``p`` to the closest point of ``box`` (0 inside), normalised units."""
    x1, y1, x2, y2 = box
    dx = max(x1 - p[0], 0.0, p[0] - x2)
    dy = max(y1 - p[1], 0.0, p[1] - y2)
    return math.hypot(dx, dy)


def min_target_distance(p: Sequence[float], gt: GroundTruth, *, include_candidates: bool = True) -> float | None:
    """Smallest distance from ``p`` to the gt point or to any gt/candidate box; ``None`` if no target."""
    ds: list[float] = []
    q = gt.action.point
    if q is not None:
        ds.append(distance(p, q))
    ds.extend(distance_to_box(p, b) for b in gt_boxes(gt, include_candidates=include_candidates))
    return min(ds) if ds else None


def click_hit(
    p: Sequence[float] | None,
    gt: GroundTruth,
    *,
    radius: float | None,
    use_boxes: bool = True,
    box_scale: float = 1.0,
    include_candidates: bool = True,
    strict_box: bool = False,
) -> bool:
    """Click correctness shared by the evaluators (``docs/evaluator-conventions.md``).

    True when ``p`` lies inside one of the gt boxes (scaled by ``box_scale`` about its centre;
    ``strict_box`` excludes the edges, as GUI-R1's ``<`` comparison does) or, when ``radius`` is
    given, within ``radius`` (normalised Euclidean) of the gt point.
    """
    if p is None:
        return False
    if use_boxes:
        for b in gt_boxes(gt, include_candidates=include_candidates):
            bb = enlarge_box(b, box_scale) if box_scale != 1.0 else b
            if strict_box:
                if bb[0] < p[0] < bb[2] and bb[1] < p[1] < bb[3]:
                    return True
            elif point_in_box(p, bb):
                return True
    if radius is not None:
        q = gt_point(gt)
        if q is not None and distance(p, q) <= radius:
            return True
    return False


TextRule = Literal["contains", "exact", "f1"]


def text_matches(
    pred: str | None,
    gt: str | None,
    *,
    rule: TextRule,
    f1_threshold: float = 0.5,
    f1_strict: bool = False,
) -> bool:
    """Text argument correctness.

    ``contains``: either normalised string contains the other (AgentCPM-GUI, UI-S1, CCPO);
    ``exact``: equal after normalisation; ``f1``: token F1 ``>= f1_threshold`` (``>`` when
    ``f1_strict``, as in the CES and Co-EPG code) (GUI-R1, CES, Co-EPG).
    """
    if pred is None or gt is None:
        return False
    if rule == "contains":
        return contains_match(pred, gt)
    if rule == "exact":
        return normalize_text(pred) == normalize_text(gt)
    if rule == "f1":
        f1 = token_f1(pred, gt)
        return f1 > f1_threshold if f1_strict else f1 >= f1_threshold
    raise ValueError(f"unknown text rule {rule!r}; expected contains, exact or f1")


def direction_matches(pred: Action, gt: Action) -> bool:
    """Scroll directions agree once the prediction is expressed in the gt's convention."""
    if gt.direction is None or pred.direction is None or gt.convention is None:
        return False
    return pred.in_convention(gt.convention).direction == gt.direction


def non_coordinate_args_match(
    pred: Action,
    gt: Action,
    *,
    text_rule: TextRule,
    f1_threshold: float = 0.5,
    f1_strict: bool = False,
    check_status: bool = True,
    check_direction: bool = True,
) -> bool:
    """Argument check for the non-coordinate action types (types must already match).

    type/answer/open_app: text rule; scroll: direction; press: key; terminate: status (when
    ``check_status``); wait: always true.
    """
    t = gt.type
    if t in TEXT_TYPES:
        return text_matches(pred.text, gt.text, rule=text_rule, f1_threshold=f1_threshold, f1_strict=f1_strict)
    if t is ActionType.SCROLL:
        return direction_matches(pred, gt) if check_direction else True
    if t is ActionType.PRESS:
        return pred.key == gt.key
    if t is ActionType.TERMINATE:
        return (pred.status == gt.status) if check_status else True
    if t is ActionType.WAIT:
        return True
    if t in COORDINATE_TYPES:
        raise ValueError(f"{t.value} is a coordinate action; use click_hit / the paper's coordinate rule")
    raise ValueError(f"no argument rule for action type {t.value}")
