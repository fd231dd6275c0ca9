"""AgentCPM-GUI RFT reward in ``{-1, 0, 1}`` (Zhang et al., "AgentCPM-GUI: Building Mobile-Use Agents
with Reinforcement Fine-Tuning", arXiv 2506.01391, Sec. 3 "Reinforcement Fine-Tuning", GRPO).

``-1`` when the output cannot be parsed (format error), ``0`` when it parses but the action is
wrong, ``1`` when type and arguments are right. Correctness is the matching rule set
``"agentcpm_reward"`` (:data:`guirl.matching.RULES`, ``AgentCPMConfig.rules``): a click is right
inside the gt box, else within 0.14 of the gt point; text by containment after lower/strip;
scroll by direction (compared in one convention); press by key; terminate by status. The paper
(AgentCPM-GUI Sec. 2.5) says a point is right inside the gt box; the evaluator protocol
``"agentcpm"`` accepts 1.2x candidate boxes that contain the gt point, else 0.14
(``docs/metrics.md``, "Reward rules vs evaluator").

Not reproduced: the released ``rft/trainer/utils/gui_eval.py`` trains with shaped, partly
continuous terms (schema check, key-set match, Manhattan-distance click credit); this module
implements the three-valued reward stated in the paper as given in the brief. The AndroidControl
evaluation mode (0.04 radius, 5 nearest boxes) is a metric, not this reward.
"""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import Action, ParseResult
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result, match_gt

__all__ = ["AgentCPMConfig", "agentcpm_action_correct", "agentcpm_reward"]


@dataclass(frozen=True)
class AgentCPMConfig:
    """Reward levels and the matching rule set the reward trains with."""

    format_error: float = -1.0  # AgentCPM-GUI Sec. 2.5 RFT: unparsable output
    wrong: float = 0.0
    right: float = 1.0
    rules: str = "agentcpm_reward"  # guirl.matching.RULES; = METHOD.reward_rules


def agentcpm_action_correct(pred: Action, gt: GroundTruth, cfg: AgentCPMConfig = AgentCPMConfig()) -> bool:
    """Type and arguments right under ``cfg.rules``."""
    return match_gt(pred, gt, cfg.rules).exact


def agentcpm_reward(
    pred: ParseResult | Action | None, gt: GroundTruth, *, cfg: AgentCPMConfig = AgentCPMConfig()
) -> RewardResult:
    """``-1`` unparsable, ``0`` wrong, ``1`` right (module doc)."""
    pr = as_parse_result(pred)
    if not pr.ok:
        return RewardResult(cfg.format_error, {"format": 0.0, "type": 0.0, "exact": 0.0})
    assert pr.action is not None
    m = match_gt(pr.action, gt, cfg.rules)
    typ, exact = float(m.type_match), float(m.exact)
    return RewardResult(cfg.right if exact else cfg.wrong, {"format": 1.0, "type": typ, "exact": exact})
