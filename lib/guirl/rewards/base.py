"""Shared types and helpers for the reward functions of :mod:`guirl.rewards`.

Every reward in this package is a *pure* function ``fn(pred, gt, *, cfg=..., **extras) -> RewardResult``:

* ``pred`` is an already-parsed model output: a :class:`~guirl.actions.types.ParseResult`, a bare
  :class:`~guirl.actions.types.Action`, or ``None`` (nothing parsable). Parsing model text is the
  job of ``guirl.actions.formats``; rewards never see raw text.
* ``gt`` is a :class:`GroundTruth`: the canonical ground-truth action plus the optional target box
  and candidate boxes, all in normalised ``[0, 1]`` screen coordinates (see
  :mod:`guirl.geometry`).
* The result is a :class:`RewardResult` with the scalar ``total`` and the named ``components`` it
  was built from (for logging).

Whether a click, a text or another argument is right is decided by the matching engine
(:mod:`guirl.matching`) under the rule set the reward names (its config's ``rules``, declared
as ``Method.reward_rules``); :func:`match_gt` applies it to a :class:`GroundTruth`. Scroll
directions are compared in one convention (every canonical scroll carries its own), so a
"finger up" swipe matches a "content down" label.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from guirl.actions.types import Action, ActionError, ParseResult
from guirl.geometry import Box
from guirl.matching import RuleSet, StepMatch, get_rules, match_step

__all__ = [
    "RewardResult",
    "GroundTruth",
    "RewardSpec",
    "RewardInputError",
    "as_parse_result",
    "match_gt",
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


def match_gt(pred: Action, gt: GroundTruth, rules: str | RuleSet) -> StepMatch:
    """:func:`guirl.matching.match_step` of ``pred`` against a :class:`GroundTruth` (its action,
    target box and candidate boxes) under the named rule set."""
    return match_step(pred, gt.action, get_rules(rules), gt_box=gt.box, candidate_boxes=gt.candidate_boxes)
