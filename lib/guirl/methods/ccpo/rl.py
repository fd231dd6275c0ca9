"""CCPO's hooks for the RL engine (CCPO Algorithm 1): SO-RL's semi-online loop
(:func:`guirl.rl.multiturn.semi_online_hooks`) with

* progressive rollouts whose shared history screenshots are cropped by CASC
  (:class:`guirl.methods.ccpo.progressive.ProgressiveCASC`, ``ccpo.compress``);
* the distance-based reward of eqs. 11-13 (:func:`guirl.methods.ccpo.reward.ccpo_reward`, from the
  ``ccpo`` section) unless ``rl.reward`` names another reward (e.g. ``semi_online`` for the
  "+ CASC" ablation row of Table 5);
* "matched" (patching and the cut of the step returns) = type right and full accuracy credit
  (:func:`guirl.methods.ccpo.reward.ccpo_match`).

Every other setting is the ``semi_online`` section and ``rl:`` (Table 8, N = ``rl.group_size``).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from guirl.methods.ccpo.config import CCPOSection, reward_config
from guirl.methods.ccpo.progressive import ProgressiveCASC
from guirl.methods.ccpo.reward import ccpo_match, ccpo_reward

if TYPE_CHECKING:
    from guirl.config import Config
    from guirl.rewards.base import RewardSpec
    from guirl.train.rl import RLHooks

__all__ = ["ccpo_section", "ccpo_history", "ccpo_rl_hooks"]


def ccpo_section(cfg: Config) -> CCPOSection:
    """``cfg.ccpo``, or the section's defaults when the config leaves it out."""
    section = getattr(cfg, "ccpo", None)
    return section if section is not None else CCPOSection()


def ccpo_history(cfg: Config, *, keep_records: bool = False) -> ProgressiveCASC | None:
    """The training history builder of ``cfg`` (``None`` for ``ccpo.compress: none``), with the
    model's pixel budget."""
    sec = ccpo_section(cfg)
    if sec.compress == "none":
        return None
    return ProgressiveCASC(
        min_pixels=cfg.model.min_pixels,
        max_pixels=cfg.model.max_pixels,
        policy=sec.compress,
        margin=sec.margin_px,
        min_size=sec.min_size_px,
        include_candidates=sec.include_candidates,
        scroll_is_coordinate=sec.scroll_is_coordinate,
        coordinate_steps=sec.coordinate_steps,
        keep_records=keep_records,
    )


def ccpo_rl_hooks(cfg: Config, data_dir: str | Path, reward: RewardSpec | None = None) -> RLHooks:
    """Engine hooks of CCPO on the ``train`` split of ``data_dir`` (module doc); ``reward``: the
    registry entry of ``rl.reward`` (``None`` or CCPO's own: the ``ccpo`` section's reward)."""
    from guirl.rl.multiturn import semi_online_hooks

    rcfg = reward_config(ccpo_section(cfg))
    own = reward is None or reward.fn is ccpo_reward
    reward_fn = partial(ccpo_reward, cfg=rcfg) if own else reward.fn  # type: ignore[union-attr]
    return semi_online_hooks(
        cfg, data_dir, reward=reward_fn, matcher=partial(ccpo_match, cfg=rcfg), history=ccpo_history(cfg)
    )
