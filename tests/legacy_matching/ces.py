"""Frozen copy of ``lib/guirl/methods/ces/reward.py`` at commit c7e8c23 (before the matching engine); tests only."""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import COORDINATE_TYPES, Action, ActionType, ParseResult
from legacy_matching.rewards_base import (
    GroundTruth,
    RewardResult,
    as_parse_result,
    click_hit,
    non_coordinate_args_match,
    text_matches,
    type_matches,
)

__all__ = ["CESConfig", "ces_param_match", "ces_reward"]


@dataclass(frozen=True)
class CESConfig:
    """CES weights and thresholds (defaults from the released code, see module doc)."""

    alpha1: float = 0.1  # CES code gui_navigator_score: format weight
    alpha2: float = 0.9  # CES code gui_navigator_score: accuracy weight
    gamma1: float = 0.2  # CES code acc_reward: action-type weight
    gamma2: float = 0.8  # CES code acc_reward: parameter weight
    click_radius: float = 0.14  # CES code CLICK_COORD_THRESHOLD (normalised)
    text_f1_threshold: float = 0.5  # CES code TEXT_F1_THRESHOLD
    text_f1_strict: bool = True  # CES code compares with ">"
    check_scroll_direction: bool = True

    @property
    def high(self) -> float:
        return self.alpha1 + self.alpha2 * (self.gamma1 + self.gamma2)


def ces_param_match(pred: Action, gt: GroundTruth, cfg: CESConfig = CESConfig()) -> bool:
    """CES parameter check for a prediction whose type matches the gt."""
    g = gt.action
    if g.type in COORDINATE_TYPES:
        ok = click_hit(pred.point, gt, radius=cfg.click_radius, use_boxes=True)
        if g.text is not None:
            ok = ok and text_matches(
                pred.text, g.text, rule="f1", f1_threshold=cfg.text_f1_threshold, f1_strict=cfg.text_f1_strict
            )
        return ok
    if g.type is ActionType.SCROLL and not cfg.check_scroll_direction:
        return True
    if g.type in (ActionType.PRESS, ActionType.TERMINATE):
        # CES has press_home/press_back/press_enter and finished() as separate verbs: the key is
        # part of the verb, so a different key is a different action; finished() has no status.
        return pred.key == g.key if g.type is ActionType.PRESS else True
    return non_coordinate_args_match(
        pred, g, text_rule="f1", f1_threshold=cfg.text_f1_threshold, f1_strict=cfg.text_f1_strict
    )


def ces_reward(
    pred: ParseResult | Action | None,
    gt: GroundTruth,
    *,
    format_ok: bool | None = None,
    cfg: CESConfig = CESConfig(),
) -> RewardResult:
    """CES step reward (module doc). ``format_ok`` overrides the format term (Coordinator output)."""
    pr = as_parse_result(pred)
    fmt = float(pr.ok if format_ok is None else bool(format_ok))
    typ = par = 0.0
    if pr.ok:
        assert pr.action is not None
        if type_matches(pr.action, gt.action):
            typ = 1.0
            par = 1.0 if ces_param_match(pr.action, gt, cfg) else 0.0
    acc = cfg.gamma1 * typ + cfg.gamma2 * par
    total = cfg.alpha1 * fmt + cfg.alpha2 * acc
    return RewardResult(total, {"format": fmt, "type": typ, "param": par, "accuracy": acc})
