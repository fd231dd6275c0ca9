"""Frozen copy of ``lib/guirl/methods/semi_online/reward.py`` at commit c7e8c23 (before the matching engine); tests only."""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import COORDINATE_TYPES, Action, ParseResult
from legacy_matching.rewards_base import (
    GroundTruth,
    RewardResult,
    as_parse_result,
    click_hit,
    non_coordinate_args_match,
    text_matches,
    type_matches,
)

__all__ = ["UIS1Config", "uis1_extract_match", "uis1_reward"]


@dataclass(frozen=True)
class UIS1Config:
    """UI-S1 constants (released code)."""

    format_weight: float = 0.1  # gui_action_match_compute_score
    action_weight: float = 0.9
    type_miss_score: float = 0.1  # "parsed correctly" credit
    type_match_score: float = 0.5
    box_scale: float = 1.2  # BBOX_ENLARGE_FACTOR
    click_radius: float = 0.04  # POINT_DISTANCE_THRESHOLD (normalised)
    require_thought: bool = True

    @property
    def high(self) -> float:
        return self.format_weight + self.action_weight


def uis1_extract_match(pred: Action, gt: GroundTruth, cfg: UIS1Config = UIS1Config()) -> bool:
    """UI-S1's ``extract_match``: type and arguments right."""
    if not type_matches(pred, gt.action):
        return False
    g = gt.action
    if g.type in COORDINATE_TYPES:
        ok = click_hit(pred.point, gt, radius=cfg.click_radius, box_scale=cfg.box_scale)
        if g.text is not None:
            ok = ok and text_matches(pred.text, g.text, rule="contains")
        return ok
    return non_coordinate_args_match(pred, g, text_rule="contains", check_status=False)


def uis1_reward(pred: ParseResult | Action | None, gt: GroundTruth, *, cfg: UIS1Config = UIS1Config()) -> RewardResult:
    """UI-S1 step reward (module doc); components format, type, exact, action."""
    pr = as_parse_result(pred)
    comps = {"format": 0.0, "type": 0.0, "exact": 0.0, "action": 0.0}
    if not pr.ok:
        return RewardResult(0.0, comps)
    assert pr.action is not None
    has_thought = bool(pr.thought and pr.thought.strip())
    comps["format"] = 1.0 if (has_thought or not cfg.require_thought) else 0.0
    if type_matches(pr.action, gt.action):
        comps["type"] = 1.0
        comps["exact"] = 1.0 if uis1_extract_match(pr.action, gt, cfg) else 0.0
        comps["action"] = 1.0 if comps["exact"] else cfg.type_match_score
    else:
        comps["action"] = cfg.type_miss_score
    total = cfg.format_weight * comps["format"] + cfg.action_weight * comps["action"]
    return RewardResult(total, comps)
