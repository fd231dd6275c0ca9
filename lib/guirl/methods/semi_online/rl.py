"""SO-RL's hooks for the RL engine: semi-online rollouts with the UI-S1 reward (CCPO Sec. 4.2,
App. A.1.2, Table 8).

Everything but the reward and the match rule is shared with CCPO and lives in the kernels
(:func:`guirl.rl.multiturn.semi_online_hooks`, :mod:`guirl.rl.semi_online`): N independent
trajectories per recorded episode whose history is the model's own actions (full screenshots),
a mismatch patched with the annotated action up to ``semi_online.patch_threshold`` and then the
trajectory stopped, step rewards, discounted returns (``semi_online.gamma``), episode- plus
``advantage_weight`` x step-level group advantages, DAPO over trajectories
(``rl.dapo_std_threshold``, top-B). "Matched" is UI-S1's ``extract_match`` under
``semi_online.match_rules`` (rule set ``uis1_reward``,
:func:`guirl.rl.multiturn.rules_matcher`), the rule CCPO decides with too by default
(``ccpo.match_rule``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guirl.actions.types import ParseResult
from guirl.configbase import RunConfig
from guirl.methods.semi_online.reward import UIS1Config, uis1_extract_match, uis1_reward
from guirl.rewards.base import GroundTruth

if TYPE_CHECKING:
    from guirl.rl.hooks import HookInputs, RLHooks

__all__ = ["uis1_matched", "semi_online_rl_hooks"]


def uis1_matched(parsed: ParseResult, gt: GroundTruth, cfg: UIS1Config | None = None) -> bool:
    """UI-S1's ``extract_match`` of a parsed output (an unparsable output never matches)."""
    return parsed.ok and uis1_extract_match(parsed.action, gt, cfg or UIS1Config())  # type: ignore[arg-type]


def semi_online_rl_hooks(cfg: RunConfig, inputs: HookInputs) -> RLHooks:
    """Engine hooks of the SO-RL baseline (role ``semi_online``, module doc); ``inputs.reward``: the
    registry entry of ``rl.reward`` (``None``: the UI-S1 reward,
    :func:`guirl.methods.semi_online.reward.uis1_reward`)."""
    from guirl.rl.multiturn import rules_matcher, semi_online_hooks
    from guirl.rl.semi_online import SemiOnlineConfig

    so = getattr(cfg, "semi_online", None) or SemiOnlineConfig()
    fn = uis1_reward if inputs.reward is None else inputs.reward.fn
    return semi_online_hooks(cfg, inputs.data_dir, reward=fn, matcher=rules_matcher(so.match_rules))
