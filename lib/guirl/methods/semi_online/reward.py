"""UI-S1 step reward, a baseline (Lu et al., "UI-S1: Advancing GUI Automation via Semi-online
Reinforcement Learning", arXiv 2509.11543; released code ``verl/utils/reward_score/gui_traj.py`` and
``gui_utils/utils.py`` of X-PLUG/MobileAgent UI-S1).

``r = 0.1 * format + 0.9 * action`` with action = 0 (unparsable), 0.1 (parsed, wrong type),
0.5 (type right), 1.0 (type and arguments right, "extract match"). format = 1 when the output
parsed and (``require_thought``) carries a non-empty thought, as the code requires ``<think>``.
Arguments (``check_response_match``; the matching rule set ``"uis1_reward"``, ``UIS1Config.rules``):
click/long_press inside a 1.2x enlarged candidate box (``BBOX_ENLARGE_FACTOR``) or within 0.04
(``POINT_DISTANCE_THRESHOLD``) of the gt point; text by
containment after lower/strip; swipe by direction (the code flips up/down of the gt because its
converted data store content directions; here both sides carry their convention); system button
by key; wait/terminate by type. The extract match also drives the semi-online patch module and
the step returns (:mod:`guirl.rl.semi_online`). Range ``[0, 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import Action, ParseResult
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result, match_gt

__all__ = ["UIS1Config", "uis1_extract_match", "uis1_reward"]


@dataclass(frozen=True)
class UIS1Config:
    """UI-S1 constants (released code)."""

    format_weight: float = 0.1  # gui_action_match_compute_score
    action_weight: float = 0.9
    type_miss_score: float = 0.1  # "parsed correctly" credit
    type_match_score: float = 0.5
    require_thought: bool = True
    rules: str = "uis1_reward"  # guirl.matching.RULES (1.2x boxes, 0.04); = METHOD.reward_rules

    @property
    def high(self) -> float:
        return self.format_weight + self.action_weight


def uis1_extract_match(pred: Action, gt: GroundTruth, cfg: UIS1Config = UIS1Config()) -> bool:
    """UI-S1's ``extract_match``: type and arguments right under ``cfg.rules``."""
    return match_gt(pred, gt, cfg.rules).exact


def uis1_reward(pred: ParseResult | Action | None, gt: GroundTruth, *, cfg: UIS1Config = UIS1Config()) -> RewardResult:
    """UI-S1 step reward (module doc); components format, type, exact, action."""
    pr = as_parse_result(pred)
    comps = {"format": 0.0, "type": 0.0, "exact": 0.0, "action": 0.0}
    if not pr.ok:
        return RewardResult(0.0, comps)
    assert pr.action is not None
    has_thought = bool(pr.thought and pr.thought.strip())
    comps["format"] = 1.0 if (has_thought or not cfg.require_thought) else 0.0
    m = match_gt(pr.action, gt, cfg.rules)
    if m.type_match:
        comps["type"] = 1.0
        comps["exact"] = 1.0 if m.exact else 0.0
        comps["action"] = 1.0 if comps["exact"] else cfg.type_match_score
    else:
        comps["action"] = cfg.type_miss_score
    total = cfg.format_weight * comps["format"] + cfg.action_weight * comps["action"]
    return RewardResult(total, comps)
