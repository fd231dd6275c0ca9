"""Shared reward kernels: the result and ground-truth types, matching helpers, the TRL adapter,
and baseline rewards that no paper of this repository owns (GUI-R1's).

Each paper's own reward lives in its method folder (``guirl.methods.<name>.reward``) and is
registered through its :class:`~guirl.methods.registry.Method` record; :func:`guirl.methods.get_reward`
looks any of them up by name. :func:`guirl.rewards.trl.as_trl_reward` adapts one to TRL's
``GRPOTrainer``.
"""

from __future__ import annotations

from guirl.rewards.base import GroundTruth, RewardInputError, RewardResult, RewardSpec
from guirl.rewards.guir1 import GUIR1Config, guir1_reward

#: Baseline rewards defined in the kernel (selectable by name through :mod:`guirl.methods`).
KERNEL_REWARDS: dict[str, RewardSpec] = {
    "guir1": RewardSpec(
        "guir1", guir1_reward, GUIR1Config, 0.0, GUIR1Config().high, "GUI-R1 arXiv 2504.10458 (baseline)"
    ),
}

__all__ = [
    "KERNEL_REWARDS",
    "RewardResult",
    "RewardSpec",
    "GroundTruth",
    "RewardInputError",
    "GUIR1Config",
    "guir1_reward",
]
