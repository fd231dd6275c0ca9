"""The step-matching engine: one implementation of the click, text and argument rules.

:func:`match_step` decides whether a predicted :class:`~guirl.actions.Action` matches the
ground-truth action under a :class:`~guirl.matching.RuleSet`; the evaluator protocols
(:func:`guirl.metrics.score_step`) and the rewards (``guirl.methods.<paper>.reward``,
:mod:`guirl.rewards.guir1`) call it, or its parts :func:`click_match`, :func:`text_match`,
:func:`arguments_match`, :func:`target_distance`. The rules themselves are data
(:mod:`guirl.matching.rules`); nothing here branches on a rule set's name.

Definitions (normalised ``[0, 1]`` screen units unless the click rule names other ``units``):

* **type_match**: the predicted type's class equals the gt's (after the rule set's type
  merges, or the Mind2Web operation codes), or UI-S1's click-on-the-app-icon for an open_app
  step.
* **grounding**: ``None`` when the gt type is not grounded (by default: has no coordinate);
  otherwise the prediction carries a point and :func:`click_match` accepts it. Type-agnostic on
  purpose: a long press at the right place grounds a click even where the types differ.
* **exact**: type match (unless the rule set does not require it) and every argument the rule
  set checks, on a step the original counts.
* **counted**: the original counts the step in its step-success denominator.
* **distance**: normalised distance from the predicted point to the gt target, when both exist.

Three conventions of the predicted action's ``extra`` are read: ``extra["box"]``, the normalised
``(x1, y1, x2, y2)`` box of the element a format predicted (CoAT's ``bbox``;
``box_mode="pred_box"``); ``extra["raw_point"]``, the predicted point as the original read it
when it lies off the screen (an :class:`~guirl.actions.Action` point is on the screen, so a
strict reading clamps it and keeps the original here; the click rule measures this one); and
``extra["direction_stated"] is False``, a scroll whose direction the output did not state (CES's
``scroll()``): it never matches a direction check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from guirl.actions.types import COORDINATE_TYPES, TEXT_TYPES, Action, ActionType
from guirl.geometry import Box, Point, box_center, distance, distance_to_box, enlarge_box
from guirl.matching.rules import ArgumentRule, ClickRule, RuleSet, TextRule
from guirl.matching.text import contains, edit_similarity, indel_ratio, normalize, set_f1
from guirl.textmatch import anls, contains_match, levenshtein_ratio, normalize_text, phrase_match, token_f1

__all__ = [
    "StepMatch",
    "gt_point",
    "rule_gt_point",
    "rule_boxes",
    "click_match",
    "target_distance",
    "text_match",
    "types_match",
    "arguments_match",
    "scroll_direction",
    "is_grounded",
    "is_counted",
    "op_string",
    "match_step",
]

Size = tuple[int, int]


@dataclass(frozen=True)
class StepMatch:
    """Outcome of matching one predicted action against the ground truth.

    Attributes:
        type_match: the type classes agree (module docstring).
        grounding: the click rule passed; ``None`` when the gt action is not grounded.
        exact: type (where required) and every checked argument match, on a counted step.
        reason: short human-readable explanation.
        distance: normalised distance from the predicted point to the gt target, if both exist.
        counted: the original counts this step in its step-success denominator.
    """

    type_match: bool
    grounding: bool | None
    exact: bool
    reason: str
    distance: float | None = None
    counted: bool = True


# ------------------------------------------------------------------------------- geometry
def gt_point(gt: Action, gt_box: Box | None = None) -> Point | None:
    """The gt target point: ``gt.point``, else the centre of ``gt_box``, else ``None``."""
    if gt.point is not None:
        return gt.point
    if gt_box is not None:
        return box_center(gt_box)
    return None


def rule_gt_point(gt: Action, rule: ClickRule, gt_box: Box | None = None) -> Point | None:
    """The gt point a click rule measures against: :func:`gt_point`, or ``(0, 0)`` for a
    coordinate gt under ``gt_point="origin"`` (CoAT's released evaluator)."""
    if rule.gt_point == "origin" and gt.type in COORDINATE_TYPES:
        return (0.0, 0.0)
    return gt_point(gt, gt_box)


def _scale(rule: ClickRule, screen_size: Size | None) -> tuple[float, float] | None:
    """Factor from normalised coordinates to the rule's units (``None``: normalised, untouched)."""
    if rule.units == "normalised":
        return None
    if rule.units == "thousand":
        return (1000.0, 1000.0)
    if screen_size is None:
        raise ValueError("this click rule works in pixels: pass screen_size=(width, height)")
    return (float(screen_size[0]), float(screen_size[1]))


def _round(v: float, decimals: int | None) -> float:
    return v if decimals is None else round(v, decimals)


def _pt_units(p: Sequence[float], rule: ClickRule, screen_size: Size | None) -> Point:
    s = _scale(rule, screen_size)
    x, y = float(p[0]), float(p[1])
    if s is not None:
        x, y = x * s[0], y * s[1]
    return (_round(x, rule.unit_decimals), _round(y, rule.unit_decimals))


def _box_units(b: Sequence[float], rule: ClickRule, screen_size: Size | None) -> Box:
    (x1, y1), (x2, y2) = _pt_units(b[:2], rule, screen_size), _pt_units(b[2:4], rule, screen_size)
    return (x1, y1, x2, y2)


def _inside(p: Sequence[float], box: Sequence[float], strict: bool) -> bool:
    x1, y1, x2, y2 = box
    if strict:
        return x1 < p[0] < x2 and y1 < p[1] < y2
    return x1 <= p[0] <= x2 and y1 <= p[1] <= y2


def _scaled(box: Sequence[float], rule: ClickRule) -> Box:
    """The box as the rule's inside test sees it: enlarged (module docstring of the rules), then
    rounded to ``box_round`` decimals."""
    f = rule.box_enlarge
    if f is None:
        out: Box = (box[0], box[1], box[2], box[3])
    elif rule.box_enlarge_mode == "centre":
        out = enlarge_box(box, f)
    else:
        x, y = box[0], box[1]
        w, h = box[2] - box[0], box[3] - box[1]
        g = f - 1 if rule.box_enlarge_mode == "shift" else f
        dw, dh = g * w, g * h
        x, y = max(0, x - dw / 2), max(0, y - dh / 2)
        w, h = min(1, w + dw), min(1, h + dh)
        out = (x, y, x + w, y + h)
    if rule.box_round is not None:
        out = tuple(round(v, rule.box_round) for v in out)  # type: ignore[assignment]
    return out


def _pool(gt_box: Box | None, candidates: Sequence[Box]) -> list[Box]:
    """The candidate boxes, then the gt box unless it is already one of them."""
    return list(candidates) + ([gt_box] if gt_box is not None and gt_box not in candidates else [])


def _smallest(p: Sequence[float], boxes: Sequence[Box]) -> int | None:
    """Index of the smallest-area box containing ``p`` (edges included; first listed wins a tie)."""
    best, best_area = None, None
    for i, b in enumerate(boxes):
        if _inside(p, b, False):
            a = (b[2] - b[0]) * (b[3] - b[1])
            if best_area is None or a < best_area:
                best, best_area = i, a
    return best


def _iou(a: Sequence[float], b: Sequence[float], min_area: float) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    area_a = max((a[2] - a[0]) * (a[3] - a[1]), min_area)
    area_b = max((b[2] - b[0]) * (b[3] - b[1]), min_area)
    union = area_a + area_b - inter
    return inter / union if union > 0 else 0.0


def rule_boxes(
    rule: ClickRule,
    gt_pt: Point | None,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
    screen_size: Size | None = None,
) -> list[Box]:
    """The (scaled) boxes, in the rule's units, inside which a predicted point is right.

    ``gt_pt`` is in the rule's units. For ``"same_box"`` these are every candidate box and the
    gt box (the click is right only when the gt point lies in the same box); for ``"pred_box"``
    the candidate boxes that contain the gt point; for ``"smallest_element"`` the gt point's
    element (:func:`click_match`).
    """
    mode = rule.box_mode

    def units(bs: Sequence[Box]) -> list[Box]:
        return [_scaled(_box_units(b, rule, screen_size), rule) for b in bs]

    if mode == "none":
        return []
    if mode == "gt_box":
        return units([gt_box]) if gt_box is not None else []
    if mode == "same_box":
        return units(list(candidate_boxes) + ([gt_box] if gt_box is not None else []))
    if mode == "smallest_element":
        raw = [_box_units(b, rule, screen_size) for b in _pool(gt_box, candidate_boxes)]
        i = None if gt_pt is None else _smallest(gt_pt, raw)
        return [] if i is None else [raw[i]]
    big = units(_pool(gt_box, candidate_boxes))
    if mode == "any_candidate":
        return big
    if gt_pt is None:
        return []
    if mode in ("containing_gt", "pred_box"):
        return [b for b in big if _inside(gt_pt, b, rule.box_strict)]
    # nearest_k: stable sort, so ties keep the input order
    big.sort(key=lambda b: distance(box_center(b), gt_pt))
    return big[: rule.nearest_k]


def _dist(p: Sequence[float], q: Sequence[float], formula: str) -> float:
    dx, dy = p[0] - q[0], p[1] - q[1]
    if formula == "hypot":
        return math.hypot(dx, dy)
    if formula == "sqrt_sum":
        return math.sqrt(dx * dx + dy * dy)
    return dx * dx + dy * dy  # "squared"


def target_distance(
    pred_point: Sequence[float],
    gt_pt: Point | None,
    rule: ClickRule,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
    screen_size: Size | None = None,
) -> float | None:
    """Distance from ``pred_point`` to the gt target under ``rule.distance_to``, in the rule's
    units (``None``: no target). ``pred_point`` and ``gt_pt`` are normalised.

    ``"point"``: to ``gt_pt``. ``"nearest_target"``: the smallest of the distance to ``gt_pt``
    and the distances to the rule's boxes (:func:`rule_boxes`; 0 inside). ``"box_top_left"``: to
    the gt box's top-left corner when ``gt_box`` is given, else to ``gt_pt``. Under
    ``distance_formula="squared"`` the value is the squared distance.
    """
    p = _pt_units(_rounded_pred(pred_point, rule), rule, screen_size)
    if rule.distance_to == "box_top_left" and gt_box is not None:
        target = _pt_units(gt_box[:2], rule, screen_size)
        return _dist(p, target, rule.distance_formula)
    g = None if gt_pt is None else _pt_units(gt_pt, rule, screen_size)
    if rule.distance_to in ("point", "box_top_left"):
        return None if g is None else _dist(p, g, rule.distance_formula)
    ds = [] if g is None else [_dist(p, g, rule.distance_formula)]
    boxes = rule_boxes(rule, g, gt_box=gt_box, candidate_boxes=candidate_boxes, screen_size=screen_size)
    ds.extend(distance_to_box(p, b) for b in boxes)
    return min(ds) if ds else None


def _rounded_pred(p: Sequence[float], rule: ClickRule) -> Point:
    if rule.point_round is None:
        return (float(p[0]), float(p[1]))
    return (round(float(p[0]), rule.point_round), round(float(p[1]), rule.point_round))


def click_match(
    pred_point: Sequence[float] | None,
    gt_pt: Sequence[float] | None,
    rule: ClickRule,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
    pred_box: Sequence[float] | None = None,
    screen_size: Size | None = None,
) -> bool:
    """Whether the prediction hits the ground truth under ``rule``: box rule, then distance fallback.

    Args:
        pred_point: predicted ``(x, y)``, normalised; ``None`` never hits (except through
            ``pred_box`` under ``box_mode="pred_box"``).
        gt_pt: gt ``(x, y)``, normalised (:func:`rule_gt_point`); ``None`` only hits through a box.
        rule: the click rule.
        gt_box: the target element's normalised box, if known.
        candidate_boxes: the screen's element boxes used by the box modes.
        pred_box: the predicted element's normalised box (``box_mode="pred_box"``).
        screen_size: ``(width, height)`` in pixels; needed when ``rule.units == "pixels"``.
    """
    gp = None if gt_pt is None else _pt_units(gt_pt, rule, screen_size)
    boxes = rule_boxes(rule, gp, gt_box=gt_box, candidate_boxes=candidate_boxes, screen_size=screen_size)
    if rule.box_mode == "pred_box":
        if pred_box is None or gp is None:
            return False
        pb = _scaled(_box_units(pred_box, rule, screen_size), rule)
        if _inside(gp, pb, rule.box_strict):
            return True
        return any(_iou(pb, b, rule.iou_min_area) > rule.pred_box_iou for b in boxes)
    if pred_point is None:
        return False
    pp = _pt_units(_rounded_pred(pred_point, rule), rule, screen_size)
    if rule.box_mode == "smallest_element":
        raw = [_box_units(b, rule, screen_size) for b in _pool(gt_box, candidate_boxes)]
        i = _smallest(pp, raw)
        return i is not None and gp is not None and i == _smallest(gp, raw)
    for b in boxes:
        if rule.box_mode == "same_box":
            if gp is not None and _inside(pp, b, rule.box_strict) and _inside(gp, b, rule.box_strict):
                return True
        elif _inside(pp, b, rule.box_strict):
            return True
    if rule.distance_threshold is None or (rule.distance_fallback == "no_gt_box" and gt_box is not None):
        return False
    if rule.gt_box_required and gt_box is None:
        return False
    d = target_distance(
        pred_point, gt_pt, rule, gt_box=gt_box, candidate_boxes=candidate_boxes, screen_size=screen_size
    )  # type: ignore[arg-type]
    if d is None:
        return False
    thr = rule.distance_threshold
    if rule.distance_formula == "squared":
        thr = thr**2
    return d < thr if rule.distance_strict else d <= thr


# ------------------------------------------------------------------------------- text
def text_match(pred: str | None, gt: str | None, rule: TextRule) -> bool:
    """Whether a predicted text argument matches the gt's under ``rule`` (``None`` never matches)."""
    if pred is None or gt is None:
        return False
    if rule.cut_at is not None:
        pred, gt = pred.split(rule.cut_at)[0], gt.split(rule.cut_at)[0]
    kind = rule.kind

    def passes(score: float) -> bool:
        return score > rule.threshold if rule.strict else score >= rule.threshold

    if rule.normalize == "collapse" and not rule.empty_contained and kind != "set_f1":
        # the rule kinds as they always were (textmatch normalises inside)
        if kind == "contains":
            return contains_match(pred, gt)
        if kind == "exact":
            return normalize_text(pred) == normalize_text(gt)
        if kind == "f1":
            return passes(token_f1(pred, gt))
        if kind == "contains_or_anls":
            return contains_match(pred, gt) or passes(anls(pred, gt, threshold=rule.threshold))
        if kind == "contains_or_ratio":
            return contains_match(pred, gt) or passes(levenshtein_ratio(pred, gt))
        return phrase_match(pred, gt)  # "phrase"
    a, b = normalize(pred, rule.normalize), normalize(gt, rule.normalize)
    if kind == "contains":
        return contains(a, b, empty_contained=rule.empty_contained)
    if kind == "exact":
        return a == b
    if kind == "f1":
        return passes(token_f1(a, b))
    if kind == "set_f1":
        return passes(
            set_f1(a, b, single_token_contains=rule.single_token_contains, strip_brackets=rule.strip_brackets)
        )
    if kind == "contains_or_anls":
        return contains(a, b, empty_contained=rule.empty_contained) or passes(edit_similarity(a, b))
    if kind == "contains_or_ratio":
        return contains(a, b, empty_contained=rule.empty_contained) or passes(indel_ratio(a, b))
    return phrase_match(a, b)  # "phrase"


# ------------------------------------------------------------------------------- arguments
def types_match(pred: Action, gt: Action, rules: RuleSet) -> bool:
    """Same type class after the rule set's merges (or operation codes)."""
    return rules.args.type_class(pred.type) == rules.args.type_class(gt.type)


def _coordinate_text_needed(gt: Action, rules: RuleSet) -> bool:
    if rules.args.coordinate_text == "select":
        return gt.type is ActionType.SELECT
    return gt.text is not None


def _units_point(p: Sequence[float], units: str, decimals: int | None, screen_size: Size | None) -> Point:
    if units == "normalised":
        x, y = float(p[0]), float(p[1])
    elif units == "thousand":
        x, y = p[0] * 1000.0, p[1] * 1000.0
    elif screen_size is None:
        raise ValueError("this argument rule compares scroll points in pixels: pass screen_size=(width, height)")
    else:
        x, y = p[0] * screen_size[0], p[1] * screen_size[1]
    return (_round(x, decimals), _round(y, decimals))


def scroll_direction(
    a: Action, rule: ArgumentRule, screen_size: Size | None = None, *, stated_fallback: bool = False
) -> str | None:
    """The direction of scroll ``a`` as ``rule.scroll_match`` reads it (``None``: none).

    ``"direction"`` / ``"axis"``: the stated direction in ``rule.scroll_convention``;
    ``"finger_points"`` / ``"angle_points"``: computed from the start and end points in
    ``rule.scroll_units`` (see :class:`ArgumentRule`); without both points ``None``, or with
    ``stated_fallback`` the stated direction as a finger direction (a ground truth recorded
    without points: the originals' files always have them).
    """
    if rule.scroll_match in ("finger_points", "angle_points"):
        if a.point is None or a.point2 is None:
            if stated_fallback and a.extra.get("direction_stated") is not False:
                return a.in_convention("finger").direction
            return None
        p = _units_point(a.point, rule.scroll_units, rule.scroll_unit_decimals, screen_size)
        q = _units_point(a.point2, rule.scroll_units, rule.scroll_unit_decimals, screen_size)
        dx, dy = q[0] - p[0], q[1] - p[1]
        if rule.scroll_match == "finger_points":
            if abs(dx) > abs(dy):
                return "right" if dx > 0 else "left"
            return "down" if dy > 0 else "up"
        angle = math.atan2(dy, dx) * 180 / math.pi
        if -45 <= angle <= 45:
            return "right"
        if 45 < angle <= 135:
            return "down"
        if angle > 135 or angle < -135:
            return "left"
        return "up"
    if a.extra.get("direction_stated") is False:
        return None
    return a.in_convention(rule.scroll_convention).direction


def arguments_match(pred: Action, gt: Action, rules: RuleSet, screen_size: Size | None = None) -> tuple[bool, str]:
    """The checks beyond type and point, for a prediction whose type class matches the gt's
    (or under a rule set that does not require the type).

    Coordinate gt: its text when the rule set compares it (select option), else nothing.
    Stop class: the status (when checked and both are terminate). Wait: the duration when
    checked. Scroll: as ``scroll_match`` says (when checked). Press: the key (when checked).
    Type / answer / open_app: the text rule (when checked). Returns ``(ok, reason)``.
    """
    a = rules.args
    t = gt.type
    if a.type_class(t) == ActionType.TERMINATE.value and not a.op_codes:
        if not a.terminate_status_checked or pred.type is not t:
            return True, "stop matched"
        ok = pred.status == gt.status
        return ok, "status matched" if ok else f"status {pred.status} != {gt.status}"
    if t is ActionType.WAIT:
        if a.wait_duration_checked and pred.duration_ms != gt.duration_ms:
            return False, f"wait {pred.duration_ms} ms != {gt.duration_ms} ms"
        return True, "wait matched"
    if t in COORDINATE_TYPES:
        if not _coordinate_text_needed(gt, rules):
            return True, "point matched"
        ok = text_match(pred.text, gt.text, rules.text)
        if t is ActionType.SELECT:
            return ok, "select matched" if ok else "select option text differs"
        return ok, "point and text matched" if ok else "text differs"
    if t is ActionType.SCROLL:
        if not a.scroll_direction_checked:
            return True, "scroll (direction not checked by this protocol)"
        if a.scroll_match == "text":
            ok = text_match(pred.text, gt.text, rules.text)
            return ok, f"scroll text {pred.text!r} vs {gt.text!r}"
        if pred.type is not ActionType.SCROLL:
            return False, f"a {pred.type.value} has no scroll direction"
        pd = scroll_direction(pred, a, screen_size)
        gd = scroll_direction(gt, a, screen_size, stated_fallback=True)
        if a.scroll_match == "axis":
            axis = {"up": "vertical", "down": "vertical", "left": "horizontal", "right": "horizontal", None: None}
            ok = pd is not None and axis[pd] == axis[gd]
            return ok, f"scroll axis {axis[pd]} vs {axis[gd]}"
        ok = pd is not None and pd == gd
        how = a.scroll_convention if a.scroll_match == "direction" else f"{a.scroll_match}, finger"
        return ok, f"scroll {pd} vs {gd} ({how})"
    if t is ActionType.PRESS:
        if not a.key_checked:
            return True, "press (key not checked)"
        ok = pred.key == gt.key
        return ok, "key matched" if ok else f"key {pred.key} != {gt.key}"
    if t in TEXT_TYPES:
        if not a.text_checked:
            return True, "type matched (text not checked by this protocol)"
        ok = text_match(pred.text, gt.text, rules.text)
        return ok, f"text {rules.text.kind} " + ("matched" if ok else "differs")
    return True, "type matched"  # types without arguments


def op_string(a: Action, rule: ArgumentRule) -> str:
    """Mind2Web operation string of ``a`` under ``rule.op_codes``: ``"<code>"``, or
    ``"<code> <text lower-cased>"`` for the types in ``op_value_types``."""
    code = rule.type_class(a.type)
    if a.type.value in rule.op_value_types:
        return f"{code} {(a.text or '').lower()}"
    return code


def is_grounded(gt: Action, rules: RuleSet) -> bool:
    """Whether the rule set checks the point of a step whose ground truth is ``gt``."""
    g = rules.args.grounded_types
    return gt.type in COORDINATE_TYPES if g is None else gt.type.value in g


def is_counted(gt: Action, rules: RuleSet) -> bool:
    """Whether the original counts a step whose ground truth is ``gt`` in its step-success
    denominator (``uncounted_types``, ``skip_gt_text_with``)."""
    a = rules.args
    if gt.type.value in a.uncounted_types:
        return False
    return not (a.skip_gt_text_with is not None and gt.text is not None and a.skip_gt_text_with in gt.text)


# ------------------------------------------------------------------------------- the step
def match_step(
    pred: Action,
    gt: Action,
    rules: RuleSet,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
    screen_size: Size | None = None,
) -> StepMatch:
    """Match one predicted action against the ground truth under ``rules``.

    Args:
        pred: the predicted action (parsing and unparsable outputs are the caller's business).
        gt: the ground-truth action (canonical units).
        rules: the rule set (:data:`guirl.matching.RULES`, :func:`guirl.matching.get_rules`).
        gt_box: normalised ``(x1, y1, x2, y2)`` box of the target element, if known.
        candidate_boxes: normalised boxes of the screen's elements used by the box modes.
        screen_size: ``(width, height)`` in pixels; needed by rules that work in pixels.

    Returns:
        :class:`StepMatch` (module docstring for the definitions).
    """
    if not isinstance(pred, Action) or not isinstance(gt, Action):
        raise TypeError(f"match_step needs two Actions, got {type(pred).__name__} and {type(gt).__name__}")
    if not isinstance(rules, RuleSet):
        raise TypeError(f"rules must be a RuleSet (guirl.matching.get_rules(name)), got {type(rules).__name__}")
    c, a = rules.click, rules.args
    counted = is_counted(gt, rules)
    gpt = rule_gt_point(gt, c, gt_box)
    raw = pred.extra.get("raw_point")
    ppt = (float(raw[0]), float(raw[1])) if isinstance(raw, (tuple, list)) and len(raw) == 2 else pred.point
    dist = None
    if ppt is not None:
        if c.units == "normalised" and c.distance_formula == "hypot" and c.point_round is None:
            dist = target_distance(ppt, gpt, c, gt_box=gt_box, candidate_boxes=candidate_boxes)
        elif gpt is not None:
            dist = distance(ppt, gpt)
    pred_box = pred.extra.get("box") if isinstance(pred.extra.get("box"), (tuple, list)) else None

    grounding: bool | None = None
    if is_grounded(gt, rules):
        grounding = (gpt is not None or c.box_mode == "pred_box") and click_match(
            ppt,
            gpt,
            c,
            gt_box=gt_box,
            candidate_boxes=candidate_boxes,
            pred_box=pred_box,
            screen_size=screen_size,
        )

    def out(tm: bool, ex: bool, reason: str, failed: bool = False) -> StepMatch:
        if not counted:
            reason = f"not counted by this protocol ({reason})"
        g = (False if grounding is not None else None) if failed else grounding
        return StepMatch(tm, g, ex and counted, reason, dist, counted)

    if gt.type.value in a.unscored_types:
        return out(False, False, f"the original cannot score a {gt.type.value} ground truth (it raises)", True)
    if a.needs_screen_boxes and not candidate_boxes:
        return out(False, False, "the original fails on a screen without element boxes", True)
    if a.op_codes:
        tm = types_match(pred, gt, rules)
        ok = text_match(op_string(pred, a), op_string(gt, a), rules.text)
        if grounding is False:
            return out(tm, False, "element missed")
        return out(tm, ok, "operation matched" if ok else "operation differs")

    # UI-S1: an open_app step is also solved by clicking the app icon.
    if a.open_app_click_ok and gt.type is ActionType.OPEN_APP and pred.type is ActionType.CLICK and ppt is not None:
        boxes = list(candidate_boxes) + ([gt_box] if gt_box is not None else [])
        if not boxes:
            return out(False, False, "open_app step, click predicted, no app box to hit")
        hit = click_match(ppt, box_center(boxes[0]), c, gt_box=None, candidate_boxes=boxes, screen_size=screen_size)
        return out(True, hit, "open_app via click on app icon" + ("" if hit else ": missed"))

    tm = types_match(pred, gt, rules)
    if not tm and a.type_required:
        return out(False, False, f"type mismatch: pred {pred.type.value}, gt {gt.type.value}")
    if grounding is not None and not grounding:
        why = "point outside the click rule" if (ppt is not None or pred_box is not None) else "no point"
        return out(tm, False, why)
    ok, reason = arguments_match(pred, gt, rules, screen_size)
    return out(tm, ok, reason)
