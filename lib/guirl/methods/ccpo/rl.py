"""CCPO's hooks for the RL engine (CCPO Algorithm 1): SO-RL's semi-online loop
(:func:`guirl.rl.multiturn.semi_online_hooks`) with

* progressive rollouts whose shared history screenshots are cropped by CASC
  (:func:`guirl.methods.ccpo.history.training_history`, ``ccpo.compress``);
* the distance-based reward of eqs. 11-13 (:func:`guirl.methods.ccpo.reward.ccpo_reward`, from the
  ``ccpo`` section) unless ``rl.reward`` names another reward (e.g. ``semi_online`` for the
  "+ CASC" ablation row of Table 5);
* "matched" (patching, stopping and the cut of the step returns) decided as SO-RL decides it
  (``ccpo.match_rule: semi_online``: UI-S1's ``extract_match`` under ``semi_online.match_rules``,
  :func:`guirl.rl.multiturn.rules_matcher`): CCPO follows SO-RL's semi-online procedure (App.
  A.1.2) and defines no patch rule of its own, so SO-RL and CCPO differ only in CASC and the
  reward. ``ccpo.match_rule: ccpo_reward`` is the other reading, type right and full accuracy
  credit of CCPO's reward (:func:`guirl.methods.ccpo.reward.ccpo_match`: within tau_min of the
  point), which patches and cuts far more often on targets larger than tau_min.

Every other setting is the ``semi_online`` section and ``rl:`` (Table 8, N = ``rl.group_size``).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from guirl.configbase import RunConfig
from guirl.methods.ccpo.config import reward_config
from guirl.methods.ccpo.history import ccpo_section, training_history
from guirl.methods.ccpo.reward import ccpo_match, ccpo_reward

if TYPE_CHECKING:
    from guirl.rl.hooks import HookInputs, RLHooks
    from guirl.rl.multiturn import Matcher

__all__ = ["ccpo_matcher", "ccpo_rl_hooks"]


def ccpo_matcher(cfg: RunConfig) -> Matcher:
    """The "matched" rule of CCPO's semi-online loop under ``ccpo.match_rule`` (module doc)."""
    from guirl.rl.multiturn import rules_matcher
    from guirl.rl.semi_online import SemiOnlineConfig

    sec = ccpo_section(cfg)
    if sec.match_rule == "ccpo_reward":
        return partial(ccpo_match, cfg=reward_config(sec))
    so = getattr(cfg, "semi_online", None) or SemiOnlineConfig()
    return rules_matcher(so.match_rules)


def ccpo_rl_hooks(cfg: RunConfig, inputs: HookInputs) -> RLHooks:
    """Engine hooks of CCPO (role ``ccpo``) on the ``train`` split of ``inputs.data_dir`` (module
    doc); ``inputs.reward``: the registry entry of ``rl.reward`` (``None`` or CCPO's own: the
    ``ccpo`` section's reward)."""
    from guirl.rl.multiturn import semi_online_hooks

    rcfg = reward_config(ccpo_section(cfg))
    reward = inputs.reward
    own = reward is None or reward.fn is ccpo_reward
    reward_fn = partial(ccpo_reward, cfg=rcfg) if own else reward.fn  # type: ignore[union-attr]
    return semi_online_hooks(
        cfg, inputs.data_dir, reward=reward_fn, matcher=ccpo_matcher(cfg), history=training_history(cfg)
    )
