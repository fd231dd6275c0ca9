"""The step-matching engine: one implementation of the click, text and argument rules.

:func:`match_step` decides whether a predicted :class:`~guirl.actions.Action` matches the
ground-truth action under a :class:`~guirl.matching.RuleSet`; the evaluator protocols
(:func:`guirl.metrics.score_step`) and the rewards (``guirl.methods.<paper>.reward``,
:mod:`guirl.rewards.guir1`) call it, or its parts :func:`click_match`, :func:`text_match`,
:func:`arguments_match`, :func:`target_distance`. The rules themselves are data
(:mod:`guirl.matching.rules`); nothing here branches on a rule set's name.

Definitions (normalised ``[0, 1]`` screen units):

* **type_match**: the predicted type's class equals the gt's (after the rule set's type
  merges), or UI-S1's click-on-the-app-icon for an open_app step.
* **grounding**: ``None`` when the gt type has no coordinate; otherwise the prediction carries
  a point and :func:`click_match` accepts it. Type-agnostic on purpose: a long press at the
  right place grounds a click even where the types differ.
* **exact**: type match and every argument the rule set checks.
* **distance**: from the predicted point to the gt target (:attr:`ClickRule.distance_to`),
  when both exist; ``None`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from guirl.actions.types import COORDINATE_TYPES, TEXT_TYPES, Action, ActionType
from guirl.geometry import Box, Point, box_center, distance, distance_to_box, enlarge_box
from guirl.matching.rules import ClickRule, RuleSet, TextRule
from guirl.textmatch import anls, contains_match, levenshtein_ratio, normalize_text, phrase_match, token_f1

__all__ = [
    "StepMatch",
    "gt_point",
    "rule_boxes",
    "click_match",
    "target_distance",
    "text_match",
    "types_match",
    "arguments_match",
    "match_step",
]


@dataclass(frozen=True)
class StepMatch:
    """Outcome of matching one predicted action against the ground truth.

    Attributes:
        type_match: the type classes agree (module docstring).
        grounding: the click rule passed; ``None`` when the gt action has no coordinate.
        exact: type and every checked argument match.
        reason: short human-readable explanation.
        distance: normalised distance from the predicted point to the gt target, if both exist.
    """

    type_match: bool
    grounding: bool | None
    exact: bool
    reason: str
    distance: float | None = None


# ------------------------------------------------------------------------------- geometry
def gt_point(gt: Action, gt_box: Box | None = None) -> Point | None:
    """The gt target point: ``gt.point``, else the centre of ``gt_box``, else ``None``."""
    if gt.point is not None:
        return gt.point
    if gt_box is not None:
        return box_center(gt_box)
    return None


def _inside(p: Point, box: Sequence[float], strict: bool) -> bool:
    x1, y1, x2, y2 = box
    if strict:
        return x1 < p[0] < x2 and y1 < p[1] < y2
    return x1 <= p[0] <= x2 and y1 <= p[1] <= y2


def _scaled(box: Sequence[float], rule: ClickRule) -> Box:
    if rule.box_enlarge is None:
        return (box[0], box[1], box[2], box[3])
    return enlarge_box(box, rule.box_enlarge)


def _pool(gt_box: Box | None, candidates: Sequence[Box]) -> list[Box]:
    """The candidate boxes, then the gt box unless it is already one of them."""
    return list(candidates) + ([gt_box] if gt_box is not None and gt_box not in candidates else [])


def rule_boxes(
    rule: ClickRule, gt_pt: Point | None, *, gt_box: Box | None = None, candidate_boxes: Sequence[Box] = ()
) -> list[Box]:
    """The (scaled) boxes inside which a predicted point is right under ``rule``.

    For ``"same_box"`` these are every candidate box and the gt box; the click is right only
    when the gt point lies in the same box (:func:`click_match`).
    """
    mode = rule.box_mode
    if mode == "none":
        return []
    if mode == "gt_box":
        return [_scaled(gt_box, rule)] if gt_box is not None else []
    if mode == "same_box":
        return [_scaled(b, rule) for b in list(candidate_boxes) + ([gt_box] if gt_box is not None else [])]
    big = [_scaled(b, rule) for b in _pool(gt_box, candidate_boxes)]
    if mode == "any_candidate":
        return big
    if gt_pt is None:
        return []
    if mode == "containing_gt":
        return [b for b in big if _inside(gt_pt, b, rule.box_strict)]
    # nearest_k: stable sort, so ties keep the input order
    big.sort(key=lambda b: distance(box_center(b), gt_pt))
    return big[: rule.nearest_k]


def target_distance(
    pred_point: Sequence[float],
    gt_pt: Point | None,
    rule: ClickRule,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
) -> float | None:
    """Distance from ``pred_point`` to the gt target under ``rule.distance_to`` (``None``: no target).

    ``"point"``: Euclidean distance to ``gt_pt``. ``"nearest_target"``: the smallest of the
    distance to ``gt_pt`` and the distances to the rule's boxes (:func:`rule_boxes`; 0 inside).
    """
    p = (float(pred_point[0]), float(pred_point[1]))
    if rule.distance_to == "point":
        return None if gt_pt is None else distance(p, gt_pt)
    ds = [] if gt_pt is None else [distance(p, gt_pt)]
    ds.extend(distance_to_box(p, b) for b in rule_boxes(rule, gt_pt, gt_box=gt_box, candidate_boxes=candidate_boxes))
    return min(ds) if ds else None


def click_match(
    pred_point: Sequence[float] | None,
    gt_pt: Sequence[float] | None,
    rule: ClickRule,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
) -> bool:
    """Whether ``pred_point`` hits the ground truth under ``rule``: box rule, then distance fallback.

    Args:
        pred_point: predicted ``(x, y)``, normalised; ``None`` never hits.
        gt_pt: gt ``(x, y)`` (:func:`gt_point`); ``None`` only hits through a box.
        rule: the click rule.
        gt_box: the target element's normalised box, if known.
        candidate_boxes: the screen's element boxes used by the box modes.
    """
    if pred_point is None:
        return False
    pp = (float(pred_point[0]), float(pred_point[1]))
    gp = None if gt_pt is None else (float(gt_pt[0]), float(gt_pt[1]))
    boxes = rule_boxes(rule, gp, gt_box=gt_box, candidate_boxes=candidate_boxes)
    for b in boxes:
        if rule.box_mode == "same_box":
            if gp is not None and _inside(pp, b, rule.box_strict) and _inside(gp, b, rule.box_strict):
                return True
        elif _inside(pp, b, rule.box_strict):
            return True
    if rule.distance_threshold is None or (rule.distance_fallback == "no_gt_box" and gt_box is not None):
        return False
    d = target_distance(pp, gp, rule, gt_box=gt_box, candidate_boxes=candidate_boxes)
    if d is None:
        return False
    return d < rule.distance_threshold if rule.distance_strict else d <= rule.distance_threshold


# ------------------------------------------------------------------------------- text
def text_match(pred: str | None, gt: str | None, rule: TextRule) -> bool:
    """Whether a predicted text argument matches the gt's under ``rule`` (``None`` never matches)."""
    if pred is None or gt is None:
        return False
    kind = rule.kind

    def passes(score: float) -> bool:
        return score > rule.threshold if rule.strict else score >= rule.threshold

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


# ------------------------------------------------------------------------------- arguments
def types_match(pred: Action, gt: Action, rules: RuleSet) -> bool:
    """Same type class after the rule set's merges."""
    return rules.args.type_class(pred.type) == rules.args.type_class(gt.type)


def _coordinate_text_needed(gt: Action, rules: RuleSet) -> bool:
    if rules.args.coordinate_text == "select":
        return gt.type is ActionType.SELECT
    return gt.text is not None


def arguments_match(pred: Action, gt: Action, rules: RuleSet) -> tuple[bool, str]:
    """The checks beyond type and point, for a prediction whose type class matches the gt's.

    Coordinate gt: its text when the rule set compares it (select option), else nothing.
    Stop class: the status (when checked and both are terminate). Wait: nothing. Scroll: the
    direction in the rule set's convention (when checked). Press: the key (when checked).
    Type / answer / open_app: the text rule. Returns ``(ok, reason)``.
    """
    a = rules.args
    t = gt.type
    if a.type_class(t) == ActionType.TERMINATE.value:
        if not a.terminate_status_checked or pred.type is not t:
            return True, "stop matched"
        ok = pred.status == gt.status
        return ok, "status matched" if ok else f"status {pred.status} != {gt.status}"
    if t is ActionType.WAIT:
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
        pd = pred.in_convention(a.scroll_convention).direction
        gd = gt.in_convention(a.scroll_convention).direction
        return pd == gd, f"scroll {pd} vs {gd} ({a.scroll_convention})"
    if t is ActionType.PRESS:
        if not a.key_checked:
            return True, "press (key not checked)"
        ok = pred.key == gt.key
        return ok, "key matched" if ok else f"key {pred.key} != {gt.key}"
    if t in TEXT_TYPES:
        ok = text_match(pred.text, gt.text, rules.text)
        return ok, f"text {rules.text.kind} " + ("matched" if ok else "differs")
    return True, "type matched"  # types without arguments


# ------------------------------------------------------------------------------- the step
def match_step(
    pred: Action,
    gt: Action,
    rules: RuleSet,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
) -> StepMatch:
    """Match one predicted action against the ground truth under ``rules``.

    Args:
        pred: the predicted action (parsing and unparsable outputs are the caller's business).
        gt: the ground-truth action (canonical units).
        rules: the rule set (:data:`guirl.matching.RULES`, :func:`guirl.matching.get_rules`).
        gt_box: normalised ``(x1, y1, x2, y2)`` box of the target element, if known.
        candidate_boxes: normalised boxes of the screen's elements used by the box modes.

    Returns:
        :class:`StepMatch` (module docstring for the definitions).
    """
    if not isinstance(pred, Action) or not isinstance(gt, Action):
        raise TypeError(f"match_step needs two Actions, got {type(pred).__name__} and {type(gt).__name__}")
    if not isinstance(rules, RuleSet):
        raise TypeError(f"rules must be a RuleSet (guirl.matching.get_rules(name)), got {type(rules).__name__}")
    c = rules.click
    gpt = gt_point(gt, gt_box)
    dist = None
    if pred.point is not None:
        dist = target_distance(pred.point, gpt, c, gt_box=gt_box, candidate_boxes=candidate_boxes)

    grounding: bool | None = None
    if gt.type in COORDINATE_TYPES:
        grounding = gpt is not None and click_match(pred.point, gpt, c, gt_box=gt_box, candidate_boxes=candidate_boxes)

    def out(tm: bool, ex: bool, reason: str) -> StepMatch:
        return StepMatch(tm, grounding, ex, reason, dist)

    # UI-S1: an open_app step is also solved by clicking the app icon.
    if (
        rules.args.open_app_click_ok
        and gt.type is ActionType.OPEN_APP
        and pred.type is ActionType.CLICK
        and pred.point is not None
    ):
        boxes = list(candidate_boxes) + ([gt_box] if gt_box is not None else [])
        if not boxes:
            return out(False, False, "open_app step, click predicted, no app box to hit")
        hit = click_match(pred.point, box_center(boxes[0]), c, gt_box=None, candidate_boxes=boxes)
        return out(True, hit, "open_app via click on app icon" + ("" if hit else ": missed"))

    if not types_match(pred, gt, rules):
        return out(False, False, f"type mismatch: pred {pred.type.value}, gt {gt.type.value}")
    if gt.type in COORDINATE_TYPES and not grounding:
        return out(True, False, "point outside the click rule" if pred.point is not None else "no point")
    ok, reason = arguments_match(pred, gt, rules)
    return out(True, ok, reason)
