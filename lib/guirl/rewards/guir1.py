"""GUI-R1 reward, a baseline (Luo et al., "GUI-R1: A Generalist R1-Style Vision-Language Action Model
for GUI Agents", arXiv 2504.10458; released code ``verl/utils/reward_score/r1gui.py``).

``r = 0.8 * accuracy + 0.2 * format`` (``r1gui_compute_score``). accuracy = 0 unless the action
type matches; then: click-type actions are right inside the gt box when one is given
(``len(gt_bbox) == 4``, strict ``<`` comparisons), otherwise within 0.14 of the gt point (the code's
140 on a 0-1000 grid); type/select/scroll compare their text argument by token F1 ``>= 0.5``
(for scroll the argument is the direction word, so we compare directions); every other type is
right once the type matches. The original code only checks coordinates for ``click``; we apply
the click rule to all coordinate types. The rules are the matching rule set ``"guir1_reward"``
(``GUIR1Config.rules``); the evaluator protocol ``"guir1"`` measures distance only (strict
``< 0.14``) and checks the press key. Range ``[0, 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import Action, ParseResult
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result, match_gt

__all__ = ["GUIR1Config", "guir1_accuracy", "guir1_reward"]


@dataclass(frozen=True)
class GUIR1Config:
    """GUI-R1 weights (released code) and the matching rule set (its thresholds)."""

    format_weight: float = 0.2  # r1gui_compute_score
    accuracy_weight: float = 0.8  # r1gui_compute_score
    rules: str = "guir1_reward"  # guirl.matching.RULES: 0.14 (140 on 0-1000), F1 >= 0.5

    @property
    def high(self) -> float:
        return self.format_weight + self.accuracy_weight


def guir1_accuracy(pred: Action, gt: GroundTruth, cfg: GUIR1Config = GUIR1Config()) -> bool:
    """GUI-R1's accuracy term: type and arguments right under ``cfg.rules``."""
    return match_gt(pred, gt, cfg.rules).exact


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
