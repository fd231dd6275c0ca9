"""Frozen copy of ``lib/guirl/rewards/guir1.py`` at commit c7e8c23 (before the matching engine); tests only."""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import COORDINATE_TYPES, TEXT_TYPES, Action, ActionType, ParseResult
from legacy_matching.rewards_base import (
    GroundTruth,
    RewardResult,
    as_parse_result,
    click_hit,
    direction_matches,
    text_matches,
    type_matches,
)

__all__ = ["GUIR1Config", "guir1_accuracy", "guir1_reward"]


@dataclass(frozen=True)
class GUIR1Config:
    """GUI-R1 weights and thresholds (released code)."""

    format_weight: float = 0.2  # r1gui_compute_score
    accuracy_weight: float = 0.8  # r1gui_compute_score
    click_radius: float = 0.14  # r1gui: 140 on the 0-1000 grid
    text_f1_threshold: float = 0.5  # r1gui: calculate_f1_score(...) >= 0.5

    @property
    def high(self) -> float:
        return self.format_weight + self.accuracy_weight


def guir1_accuracy(pred: Action, gt: GroundTruth, cfg: GUIR1Config = GUIR1Config()) -> bool:
    if not type_matches(pred, gt.action):
        return False
    g = gt.action
    if g.type in COORDINATE_TYPES:
        if gt.box is not None:
            ok = click_hit(pred.point, gt, radius=None, include_candidates=False, strict_box=True)
        else:
            ok = click_hit(pred.point, gt, radius=cfg.click_radius, use_boxes=False)
        if g.type is ActionType.SELECT and g.text is not None:
            ok = ok and text_matches(pred.text, g.text, rule="f1", f1_threshold=cfg.text_f1_threshold)
        return ok
    if g.type is ActionType.SCROLL:
        return direction_matches(pred, g)
    if g.type in TEXT_TYPES:
        return text_matches(pred.text, g.text, rule="f1", f1_threshold=cfg.text_f1_threshold)
    return True


def guir1_reward(
    pred: ParseResult | Action | None, gt: GroundTruth, *, cfg: GUIR1Config = GUIR1Config()
) -> RewardResult:
    """GUI-R1 step reward (module doc)."""
    pr = as_parse_result(pred)
    fmt = 1.0 if pr.ok else 0.0
    acc = 0.0
    if pr.ok:
        assert pr.action is not None
        acc = 1.0 if guir1_accuracy(pr.action, gt, cfg) else 0.0
    return RewardResult(cfg.format_weight * fmt + cfg.accuracy_weight * acc, {"format": fmt, "accuracy": acc})
