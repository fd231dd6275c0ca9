"""Step rewards of the five papers and two baselines, as pure functions over parsed actions.

``REWARDS[name]`` is a :class:`~guirl.rewards.base.RewardSpec` with the function, its frozen
config class (paper defaults), the declared output range ``[low, high]`` under the default config,
the paper reference, and the extra keyword inputs it needs. :func:`get_reward` returns a spec;
:func:`guirl.rewards.trl.as_trl_reward` adapts any of them to TRL's ``GRPOTrainer``.
"""

from __future__ import annotations

from guirl.rewards.agentcpm import AgentCPMConfig, agentcpm_reward
from guirl.rewards.base import GroundTruth, RewardInputError, RewardResult, RewardSpec
from guirl.rewards.ccpo import CCPOConfig, ccpo_reward
from guirl.rewards.ces import CESConfig, ces_reward
from guirl.rewards.coepg import CoEPGConfig, GroundingOutput, coepg_reward
from guirl.rewards.guir1 import GUIR1Config, guir1_reward
from guirl.rewards.uis1 import UIS1Config, uis1_reward

REWARDS: dict[str, RewardSpec] = {
    "ccpo": RewardSpec(
        "ccpo", ccpo_reward, CCPOConfig, 0.0, CCPOConfig().high, "CCPO arXiv 2601.11631, distance-based reward"
    ),
    "coepg": RewardSpec(
        "coepg", coepg_reward, CoEPGConfig, 0.0, 1.0, "Co-EPG arXiv 2511.10705, C-DREM", extras=("grounding",)
    ),
    "ces": RewardSpec("ces", ces_reward, CESConfig, 0.0, CESConfig().high, "CES arXiv 2511.22235, execution feedback"),
    "agentcpm": RewardSpec(
        "agentcpm", agentcpm_reward, AgentCPMConfig, -1.0, 1.0, "AgentCPM-GUI arXiv 2506.01391, RFT"
    ),
    "guir1": RewardSpec(
        "guir1", guir1_reward, GUIR1Config, 0.0, GUIR1Config().high, "GUI-R1 arXiv 2504.10458 (baseline)"
    ),
    "uis1": RewardSpec("uis1", uis1_reward, UIS1Config, 0.0, UIS1Config().high, "UI-S1 arXiv 2509.11543 (baseline)"),
}


def get_reward(name: str) -> RewardSpec:
    """Registry lookup with a helpful error."""
    try:
        return REWARDS[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; known: {sorted(REWARDS)}") from None


__all__ = [
    "REWARDS",
    "get_reward",
    "RewardResult",
    "RewardSpec",
    "GroundTruth",
    "GroundingOutput",
    "RewardInputError",
    "CCPOConfig",
    "CoEPGConfig",
    "CESConfig",
    "AgentCPMConfig",
    "GUIR1Config",
    "UIS1Config",
    "ccpo_reward",
    "coepg_reward",
    "ces_reward",
    "agentcpm_reward",
    "guir1_reward",
    "uis1_reward",
]
