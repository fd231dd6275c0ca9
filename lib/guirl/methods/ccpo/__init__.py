"""CCPO: Coordinate Compression Policy Optimization (Song et al., 2026, arXiv 2601.11631).

Multi-turn semi-online RL whose history screenshots are cropped to the region that the rollouts'
and the annotation's coordinates agree on (CASC, :mod:`guirl.methods.ccpo.casc`; progressive
rollouts and the inference hook, :mod:`guirl.methods.ccpo.progressive`), with a distance-based
coordinate reward (CCPO eqs. 11-13, :mod:`guirl.methods.ccpo.reward`). The ``ccpo`` config
section is :class:`guirl.methods.ccpo.config.CCPOSection`; its RL role ``ccpo`` is
:func:`guirl.methods.ccpo.rl.ccpo_rl_hooks` (``rl.role: ccpo``)."""

from __future__ import annotations

from guirl.methods.ccpo.config import DERIVED, CCPOSection, recipe
from guirl.methods.ccpo.reward import CCPOConfig, ccpo_reward
from guirl.methods.ccpo.rl import ccpo_rl_hooks
from guirl.methods.registry import Method
from guirl.rewards.base import RewardSpec

METHOD = Method(
    name="ccpo",
    paper="CCPO",
    output_format="ccpo",
    system_prompt="ccpo",
    eval_protocol="ccpo",
    reward=RewardSpec(
        "ccpo", ccpo_reward, CCPOConfig, 0.0, CCPOConfig().high, "CCPO eqs. 11-13 (distance-based reward)"
    ),
    reward_rules="ccpo_reward",  # differs from eval_protocol: docs/metrics.md, "Reward rules vs evaluator"
    config_section=CCPOSection,
    recipe=recipe,
    derived=DERIVED,
    hooks={"ccpo": ccpo_rl_hooks},
    notebooks=("02_ccpo_rl",),
    reads=("semi_online",),  # its role continues semi-online RL: patching, returns (cfg.semi_online)
    summary="semi-online RL with coordinate-aware history cropping (CASC) and a distance-based reward",
)

__all__ = ["METHOD"]
