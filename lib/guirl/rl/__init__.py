"""RL math shared by the trainers: group advantages, DAPO filter, PPO/GRPO losses, UI-S1 semi-online."""

from guirl.rl.advantages import (
    ADVANTAGE_ESTIMATORS,
    dapo_keep_groups,
    dapo_keep_mask,
    dr_grpo_advantages,
    group_advantages,
    grpo_advantages,
)
from guirl.rl.losses import LOSS_AGG_MODES, agg_loss, agg_norm, clipped_surrogate, kl_k3, policy_loss
from guirl.rl.semi_online import (
    discounted_step_returns,
    discounted_step_returns_batch,
    patch_step,
    simulate_patched_rollout,
    uis1_advantages,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "LOSS_AGG_MODES",
    "agg_loss",
    "agg_norm",
    "clipped_surrogate",
    "dapo_keep_groups",
    "dapo_keep_mask",
    "discounted_step_returns",
    "discounted_step_returns_batch",
    "dr_grpo_advantages",
    "group_advantages",
    "grpo_advantages",
    "kl_k3",
    "patch_step",
    "policy_loss",
    "simulate_patched_rollout",
    "uis1_advantages",
]
