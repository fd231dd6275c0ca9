"""AgentCPM-GUI (Zhang et al., 2025, arXiv 2506.01391).

Compact JSON actions (:mod:`guirl.actions.formats.agentcpm`), a unified mapping of other model
families' actions onto them (:mod:`guirl.methods.agentcpm.mapping`), grounding pre-training, SFT
and GRPO reinforcement fine-tuning with a -1 / 0 / 1 reward (:mod:`guirl.methods.agentcpm.reward`)."""

from __future__ import annotations

from guirl.methods.agentcpm.config import DERIVED, AgentCPMSection, recipe
from guirl.methods.agentcpm.reward import AgentCPMConfig, agentcpm_reward
from guirl.methods.registry import Method
from guirl.rewards.base import RewardSpec

METHOD = Method(
    name="agentcpm",
    paper="AgentCPM-GUI",
    output_format="agentcpm",
    system_prompt="agentcpm",
    eval_protocol="agentcpm",
    reward=RewardSpec("agentcpm", agentcpm_reward, AgentCPMConfig, -1.0, 1.0, "AgentCPM-GUI Sec. 2.5 (RFT reward)"),
    reward_rules="agentcpm_reward",  # differs from eval_protocol: docs/metrics.md, "Reward rules vs evaluator"
    config_section=AgentCPMSection,
    recipe=recipe,
    derived=DERIVED,
    notebooks=("07_agentcpm_androidlong",),
    summary="compact JSON actions, unified mapping, grounding pre-training, SFT and GRPO",
)

__all__ = ["METHOD"]
