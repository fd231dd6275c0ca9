"""Frozen copy of ``lib/guirl/methods/agentcpm/reward.py`` at commit c7e8c23 (before the matching engine); tests only."""

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

__all__ = ["AgentCPMConfig", "agentcpm_action_correct", "agentcpm_reward"]


@dataclass(frozen=True)
class AgentCPMConfig:
    """Reward levels and the evaluator's click radius."""

    format_error: float = -1.0  # AgentCPM-GUI Sec. 3 RFT: unparsable output
    wrong: float = 0.0
    right: float = 1.0
    click_radius: float = 0.14  # AgentCPM-GUI evaluator: distance fallback (normalised)


def agentcpm_action_correct(pred: Action, gt: GroundTruth, cfg: AgentCPMConfig = AgentCPMConfig()) -> bool:
    """Type and arguments right under AgentCPM-GUI's evaluator rules."""
    if not type_matches(pred, gt.action):
        return False
    g = gt.action
    if g.type in COORDINATE_TYPES:
        ok = click_hit(pred.point, gt, radius=cfg.click_radius, include_candidates=False)
        if g.text is not None:
            ok = ok and text_matches(pred.text, g.text, rule="contains")
        return ok
    return non_coordinate_args_match(pred, g, text_rule="contains")


def agentcpm_reward(
    pred: ParseResult | Action | None, gt: GroundTruth, *, cfg: AgentCPMConfig = AgentCPMConfig()
) -> RewardResult:
    """``-1`` unparsable, ``0`` wrong, ``1`` right (module doc)."""
    pr = as_parse_result(pred)
    if not pr.ok:
        return RewardResult(cfg.format_error, {"format": 0.0, "type": 0.0, "exact": 0.0})
    assert pr.action is not None
    typ = float(type_matches(pr.action, gt.action))
    exact = float(agentcpm_action_correct(pr.action, gt, cfg))
    return RewardResult(cfg.right if exact else cfg.wrong, {"format": 1.0, "type": typ, "exact": exact})
