"""Semi-online RL (SO-RL), the UI-S1 baseline as CCPO runs it (CCPO Sec. 4.2, App. A.1.2, Table 8).

Rollouts over recorded trajectories with the model's own outputs as history, a mismatch patched
with the annotated action up to the patch threshold, discounted step returns and step- plus
episode-level group advantages, DAPO dynamic sampling over trajectories, 1-3AO histories. The
UI-S1 paper itself is not among the five papers; CCPO's description and Table 8 are the source.
The shared rollout, return and advantage kernels and the ``semi_online`` config section
(:class:`guirl.rl.semi_online.SemiOnlineConfig`, also read by CCPO) live in :mod:`guirl.rl`; this
folder holds the UI-S1 reward and the engine hooks (:mod:`.rl`)."""

from __future__ import annotations

from guirl.methods.registry import Method
from guirl.methods.semi_online.config import recipe
from guirl.methods.semi_online.reward import UIS1Config, uis1_reward
from guirl.methods.semi_online.rl import semi_online_rl_hooks
from guirl.rewards.base import RewardSpec
from guirl.rl.semi_online import SemiOnlineConfig

METHOD = Method(
    name="semi_online",
    paper="CCPO",  # UI-S1 (arXiv 2509.11543) as CCPO runs it: its SO-RL baseline (CCPO Table 8)
    output_format="ccpo",
    system_prompt="ccpo",
    eval_protocol="ccpo",
    reward=RewardSpec(
        "semi_online", uis1_reward, UIS1Config, 0.0, UIS1Config().high, "UI-S1 arXiv 2509.11543, as used by CCPO"
    ),
    reward_rules="uis1_reward",  # differs from eval_protocol: docs/metrics.md, "Reward rules vs evaluator"
    config_section=SemiOnlineConfig,  # CCPO Table 8 (shared with ccpo, which reads cfg.semi_online too)
    recipe=recipe,
    hooks={"semi_online": semi_online_rl_hooks},
    notebooks=("02_ccpo_rl",),
    summary="semi-online RL baseline (UI-S1) with patched rollouts and discounted step returns",
)

__all__ = ["METHOD"]
