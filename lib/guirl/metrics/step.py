"""Step-level scoring under a named protocol: type match (TM), grounding (GR), exact (SR).

:func:`score_step` scores one predicted action against the ground truth under a
:class:`~guirl.metrics.protocols.Protocol` by calling the matching engine
(:func:`guirl.matching.match_step`) with the protocol's rule set; :func:`aggregate_steps` turns a
list of :class:`StepScore` into the three rates the papers report and :func:`breakdown_by_type`
splits them by ground-truth action type.

Definitions (units: normalised screen coordinates, see :mod:`guirl.actions.types`; the engine's
module docstring has the details):

* **type_match** – the predicted action type equals the ground-truth type after the
  protocol's merges (wait -> terminate, long_press -> click, open_app <- click on the
  app icon).
* **grounding** – ``None`` when the ground-truth action has no coordinate; otherwise
  the predicted action carries a point and that point passes the protocol's click rule.
  Type-agnostic on purpose (it measures localisation, not planning).
* **exact** – type match and every argument the protocol checks (point, text, scroll
  direction, key, terminate status). This is the per-step success behind "SR".
* **counted** – the step is in the protocol's step-success denominator (GUI-R1 leaves press,
  wait and complete steps out; SeeClick skips steps whose reference does not parse). An
  uncounted step is never exact, and :func:`aggregate_steps` leaves it out of ``SR``.

A prediction that failed to parse (``None`` or a failed ``ParseResult``) is wrong in
every metric; its ``reason`` starts with ``"unparsable: "``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from guirl.actions.types import Action, ParseResult
from guirl.matching import RuleSet, gt_point, is_counted, is_grounded, match_step
from guirl.metrics.protocols import Protocol, get_protocol

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
        distance: normalised distance from the predicted point to the gt target (the gt point
            for every registered protocol), if both exist.
        pixel_distance: distance to the gt point in pixels when ``screen_size`` was given.
        counted: the protocol counts the step in its step-success denominator.
    """

    type_match: bool
    grounding: bool | None
    exact: bool
    reason: str
    gt_type: str = ""
    unparsable: bool = False
    distance: float | None = None
    pixel_distance: float | None = None
    counted: bool = True


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
    protocol: Protocol | RuleSet | str,
    *,
    gt_box: Box | None = None,
    candidate_boxes: Sequence[Box] = (),
    screen_size: tuple[int, int] | None = None,
) -> StepScore:
    """Score one predicted action against the ground truth under ``protocol``.

    Args:
        pred: the model's action, a parse result, or ``None`` (no output).
        gt: the ground-truth action (canonical units).
        protocol: a :class:`Protocol`, a registered protocol name (``"agentcpm"``, ...) or a
            :class:`~guirl.matching.RuleSet` (e.g. a reward's, to see how it would score).
        gt_box: normalised ``(x1, y1, x2, y2)`` box of the target element, if known.
        candidate_boxes: normalised boxes of the screen's elements (``ui_positions``,
            ``candidate_bbox``) used by the box-based click rules.
        screen_size: ``(width, height)`` in pixels: reported as ``pixel_distance``, and needed by
            the protocols whose original works in pixels (``ccpo_androidcontrol``, ``aitz``).

    Returns:
        :class:`StepScore`; never raises on a bad prediction.
    """
    p = get_protocol(protocol)
    if not isinstance(gt, Action):
        raise TypeError(f"gt must be an Action, got {type(gt).__name__}")
    gt_type = gt.type.value

    action, why = _unwrap(pred)
    if action is None:
        # an unparsable prediction is wrong, on a step the original counts or not
        grounding = False if is_grounded(gt, p.rules) else None
        return StepScore(False, grounding, False, why, gt_type, unparsable=True, counted=is_counted(gt, p.rules))

    m = match_step(action, gt, p.rules, gt_box=gt_box, candidate_boxes=candidate_boxes, screen_size=screen_size)
    pix = None
    gpt = gt_point(gt, gt_box)
    if screen_size is not None and action.point is not None and gpt is not None:
        w, h = screen_size
        pix = math.hypot((action.point[0] - gpt[0]) * w, (action.point[1] - gpt[1]) * h)
    return StepScore(m.type_match, m.grounding, m.exact, m.reason, gt_type, False, m.distance, pix, m.counted)


# ----------------------------------------------------------------- aggregation
def _rate(xs: list[bool]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def aggregate_steps(scores: Iterable[StepScore]) -> dict[str, float | int]:
    """Step-level rates: ``TM`` (type match), ``GR`` (grounding over steps whose gt is grounded),
    ``SR`` (exact over the counted steps), plus ``n`` steps, ``n_counted``, ``n_grounding`` and
    ``n_unparsable``. Rates are in ``[0, 1]``; an empty denominator gives ``nan``."""
    s = list(scores)
    gr = [x.grounding for x in s if x.grounding is not None]
    counted = [x for x in s if x.counted]
    return {
        "TM": _rate([x.type_match for x in s]),
        "GR": _rate(gr),  # type: ignore[arg-type]
        "SR": _rate([x.exact for x in counted]),
        "n": len(s),
        "n_counted": len(counted),
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
