"""Frozen copy of ``lib/guirl/metrics/step.py`` at commit c7e8c23 (before the matching engine); tests only."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from guirl.actions.types import COORDINATE_TYPES, Action, ActionType, ParseResult
from guirl.geometry import box_center, distance, enlarge_box, point_in_box
from guirl.textmatch import anls, contains_match, normalize_text, token_f1
from legacy_matching.protocols import Protocol, get_protocol

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class StepScore:
    """Outcome of one step.

    Attributes:
        type_match: predicted type equals ground-truth type (after protocol merges).
        grounding: click rule passed; ``None`` when the gt action has no coordinate.
        exact: type and all checked arguments match.
        reason: short human-readable explanation (``"unparsable: ..."`` for parse failures).
        gt_type: ground-truth action type value (``"click"``, ...), for breakdowns.
        unparsable: the prediction was ``None`` or a failed parse.
        distance: normalised distance from the predicted to the gt point, if both exist.
        pixel_distance: the same in pixels when ``screen_size`` was given.
    """

    type_match: bool
    grounding: bool | None
    exact: bool
    reason: str
    gt_type: str = ""
    unparsable: bool = False
    distance: float | None = None
    pixel_distance: float | None = None


# ----------------------------------------------------------------- helpers
def levenshtein_ratio(a: str, b: str) -> float:
    """``1 - indel_distance / (|a| + |b|)`` on normalised strings (python-Levenshtein's
    ``ratio``: insert/delete cost 1, substitution 2). 1.0 for two empty strings."""
    a, b = normalize_text(a), normalize_text(b)
    if not a and not b:
        return 1.0
    # LCS length by dynamic programming; indel distance = |a| + |b| - 2 * LCS.
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if ca == cb else max(prev[j], cur[j - 1]))
        prev = cur
    lcs = prev[-1]
    return 2.0 * lcs / (len(a) + len(b))


def text_matches(pred: str, gt: str, protocol: Protocol | str) -> bool:
    """Apply the protocol's text rule to a predicted and a ground-truth string."""
    p = get_protocol(protocol)
    rule, thr = p.text_rule, p.text_threshold
    if rule == "contains":
        return contains_match(pred, gt)
    if rule == "contains_or_anls":
        return contains_match(pred, gt) or anls(pred, gt) >= thr
    if rule == "contains_or_ratio":
        return contains_match(pred, gt) or levenshtein_ratio(pred, gt) > thr
    if rule == "f1":
        return token_f1(pred, gt) >= thr
    return normalize_text(pred) == normalize_text(gt)  # "exact"


def _boxes_for_click(
    protocol: Protocol, gt_point: tuple[float, float], gt_box: Box | None, candidates: Sequence[Box]
) -> list[Box]:
    """Enlarged boxes inside which a predicted point counts as correct (``same_box`` aside)."""
    f = protocol.box_enlarge
    mode = protocol.box_mode
    if mode == "none":
        return []
    if mode == "gt_box":
        return [enlarge_box(gt_box, f)] if gt_box is not None else []
    pool = list(candidates) + ([gt_box] if gt_box is not None and gt_box not in candidates else [])
    if mode == "any_candidate":
        return [enlarge_box(b, f) for b in pool]
    if mode == "containing_gt":
        big = [enlarge_box(b, f) for b in pool]
        return [b for b in big if point_in_box(gt_point, b)]
    if mode == "nearest_k":
        big = [enlarge_box(b, f) for b in pool]
        big.sort(key=lambda b: distance(box_center(b), gt_point))  # stable: ties keep input order
        return big[: protocol.nearest_k]
    return []  # same_box is handled in click_correct


def click_correct(
    pred_point: Sequence[float],
    gt_point: Sequence[float],
    protocol: Protocol | str,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
) -> bool:
    """Whether ``pred_point`` hits the ground truth under the protocol's click rule.

    Box rule first (module docstring of :mod:`guirl.metrics.protocols`), then the distance
    fallback. All inputs are normalised ``[0, 1]`` points / ``(x1, y1, x2, y2)`` boxes.
    """
    p = get_protocol(protocol)
    pp = (float(pred_point[0]), float(pred_point[1]))
    gp = (float(gt_point[0]), float(gt_point[1]))
    if p.box_mode == "same_box":
        pool = list(candidate_boxes) + ([gt_box] if gt_box is not None else [])
        for b in pool:
            big = enlarge_box(b, p.box_enlarge)
            if point_in_box(pp, big) and point_in_box(gp, big):
                return True
    else:
        for b in _boxes_for_click(p, gp, gt_box, candidate_boxes):
            if point_in_box(pp, b):
                return True
    if p.distance_threshold is None:
        return False
    d = distance(pp, gp)
    return d < p.distance_threshold if p.distance_strict else d <= p.distance_threshold


def _type_class(a: Action, p: Protocol) -> str:
    t = a.type
    if p.wait_as_terminate and t is ActionType.WAIT:
        return ActionType.TERMINATE.value
    if p.long_press_as_click and t is ActionType.LONG_PRESS:
        return ActionType.CLICK.value
    return t.value


def _gt_point(gt: Action, gt_box: Box | None) -> tuple[float, float] | None:
    if gt.point is not None:
        return gt.point
    if gt_box is not None:
        return box_center(gt_box)
    return None


def _unwrap(pred: Action | ParseResult | None) -> tuple[Action | None, str]:
    if pred is None:
        return None, "unparsable: no prediction"
    if isinstance(pred, ParseResult):
        if not pred.ok:
            return None, f"unparsable: {pred.reason or 'parse failed'}"
        return pred.action, ""
    if isinstance(pred, Action):
        return pred, ""
    return None, f"unparsable: expected Action or ParseResult, got {type(pred).__name__}"


# ----------------------------------------------------------------- main entry
def score_step(
    pred: Action | ParseResult | None,
    gt: Action,
    protocol: Protocol | str,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
    screen_size: tuple[int, int] | None = None,
) -> StepScore:
    """Score one predicted action against the ground truth under ``protocol``.

    Args:
        pred: the model's action, a parse result, or ``None`` (no output).
        gt: the ground-truth action (canonical units).
        protocol: a :class:`Protocol` or a registered name (``"agentcpm"``, ...).
        gt_box: normalised ``(x1, y1, x2, y2)`` box of the target element, if known.
        candidate_boxes: normalised boxes of the screen's elements (``ui_positions``,
            ``candidate_bbox``) used by the box-based click rules.
        screen_size: ``(width, height)`` in pixels; only used to report ``pixel_distance``.

    Returns:
        :class:`StepScore`; never raises on a bad prediction.
    """
    p = get_protocol(protocol)
    if not isinstance(gt, Action):
        raise TypeError(f"gt must be an Action, got {type(gt).__name__}")
    gt_has_coord = gt.type in COORDINATE_TYPES
    gt_type = gt.type.value

    action, why = _unwrap(pred)
    if action is None:
        return StepScore(False, False if gt_has_coord else None, False, why, gt_type, unparsable=True)

    gpt = _gt_point(gt, gt_box)
    dist = pix = None
    if action.point is not None and gpt is not None:
        dist = distance(action.point, gpt)
        if screen_size is not None:
            w, h = screen_size
            pix = math.hypot((action.point[0] - gpt[0]) * w, (action.point[1] - gpt[1]) * h)

    grounding: bool | None = None
    if gt_has_coord:
        if action.point is None or gpt is None:
            grounding = False
        else:
            grounding = click_correct(action.point, gpt, p, gt_box=gt_box, candidate_boxes=candidate_boxes)

    def out(tm: bool, ex: bool, reason: str) -> StepScore:
        return StepScore(tm, grounding, ex, reason, gt_type, False, dist, pix)

    # UI-S1: an open_app step is also solved by clicking the app icon.
    if (
        p.open_app_click_ok
        and gt.type is ActionType.OPEN_APP
        and action.type is ActionType.CLICK
        and action.point is not None
    ):
        boxes = list(candidate_boxes) + ([gt_box] if gt_box is not None else [])
        if not boxes:
            return out(False, False, "open_app step, click predicted, no app box to hit")
        first = boxes[0]
        hit = click_correct(action.point, box_center(first), p, gt_box=None, candidate_boxes=boxes)
        return out(True, hit, "open_app via click on app icon" + ("" if hit else ": missed"))

    pt, gtt = _type_class(action, p), _type_class(gt, p)
    if pt != gtt:
        return out(False, False, f"type mismatch: pred {action.type.value}, gt {gt.type.value}")

    t = gt.type
    if gtt == ActionType.TERMINATE.value:
        if not p.terminate_status_checked or action.type is not gt.type:
            return out(True, True, "stop matched")
        ok = action.status == gt.status
        return out(True, ok, "status matched" if ok else f"status {action.status} != {gt.status}")
    if t is ActionType.WAIT:
        return out(True, True, "wait matched")
    if t in COORDINATE_TYPES:
        if not grounding:
            return out(True, False, "point outside the click rule" if action.point is not None else "no point")
        if t is ActionType.SELECT:
            ok = text_matches(action.text or "", gt.text or "", p)
            return out(True, ok, "select matched" if ok else "select option text differs")
        return out(True, True, "point matched")
    if t is ActionType.SCROLL:
        if not p.scroll_direction_checked:
            return out(True, True, "scroll (direction not checked by this protocol)")
        pd = action.in_convention(p.scroll_convention).direction
        gd = gt.in_convention(p.scroll_convention).direction
        ok = pd == gd
        return out(True, ok, f"scroll {pd} vs {gd} ({p.scroll_convention})")
    if t is ActionType.PRESS:
        ok = action.key == gt.key
        return out(True, ok, "key matched" if ok else f"key {action.key} != {gt.key}")
    if t in (ActionType.TYPE, ActionType.ANSWER, ActionType.OPEN_APP):
        ok = text_matches(action.text or "", gt.text or "", p)
        return out(True, ok, f"text {p.text_rule} " + ("matched" if ok else "differs"))
    return out(True, True, "type matched")  # types without arguments


# ----------------------------------------------------------------- aggregation
def _rate(xs: list[bool]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def aggregate_steps(scores: Iterable[StepScore]) -> dict[str, float | int]:
    """Step-level rates: ``TM`` (type match), ``GR`` (grounding over steps whose gt has a
    coordinate), ``SR`` (exact), plus ``n`` steps, ``n_grounding`` coordinate steps and
    ``n_unparsable``. Rates are in ``[0, 1]``; an empty denominator gives ``nan``."""
    s = list(scores)
    gr = [x.grounding for x in s if x.grounding is not None]
    return {
        "TM": _rate([x.type_match for x in s]),
        "GR": _rate(gr),  # type: ignore[arg-type]
        "SR": _rate([x.exact for x in s]),
        "n": len(s),
        "n_grounding": len(gr),
        "n_unparsable": sum(x.unparsable for x in s),
    }


def breakdown_by_type(scores: Iterable[StepScore]) -> list[dict[str, float | int | str]]:
    """:func:`aggregate_steps` per ground-truth action type, one dict per type (key
    ``"type"``), sorted by type name, followed by a ``"total"`` row."""
    s = list(scores)
    rows: list[dict[str, float | int | str]] = []
    for t in sorted({x.gt_type for x in s}):
        rows.append({"type": t, **aggregate_steps(x for x in s if x.gt_type == t)})
    rows.append({"type": "total", **aggregate_steps(s)})
    return rows
