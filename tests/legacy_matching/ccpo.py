"""Frozen copy of ``lib/guirl/methods/ccpo/reward.py`` at commit c7e8c23 (before the matching engine); tests only."""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import COORDINATE_TYPES, Action, ParseResult
from legacy_matching.rewards_base import (
    GroundTruth,
    RewardResult,
    as_parse_result,
    min_target_distance,
    non_coordinate_args_match,
    text_matches,
    type_matches,
)

__all__ = ["CCPOConfig", "ccpo_distance_weight", "ccpo_content", "ccpo_reward", "ccpo_code_score"]


@dataclass(frozen=True)
class CCPOConfig:
    """Hyper-parameters of the CCPO reward (defaults reproduce the released code, see module doc).

    ``alpha, beta, gamma``: weights of format, type and content. ``tau_min, tau_max`` normalised
    distances; the content curve is 1 up to ``tau_min``, linear to ``w_min`` at ``tau_max`` and
    ``w_beyond`` after it.
    """

    alpha: float = 0.19
    beta: float = 0.36
    gamma: float = 0.45
    tau_min: float = 0.1  # CCPO code TOLERANCE_DISTANCE_THRESHOLD
    tau_max: float = 0.5  # CCPO code MAX_TOLERANCE_DISTANCE_THRESHOLD
    w_min: float = 0.0  # content at tau_max; the code's MIN_WEIGHT=0.5 is folded into beta (module doc)
    w_beyond: float = 0.0
    include_candidates: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.tau_min <= self.tau_max:
            raise ValueError(f"need 0 <= tau_min <= tau_max, got {self.tau_min}, {self.tau_max}")
        for k in ("w_min", "w_beyond"):
            v = getattr(self, k)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{k} must be in [0, 1], got {v}")
        if min(self.alpha, self.beta, self.gamma) < 0:
            raise ValueError("alpha, beta, gamma must be >= 0")

    @classmethod
    def from_code_constants(
        cls,
        *,
        format_weight: float = 0.1,
        type_miss_score: float = 0.1,
        min_weight: float = 0.5,
        tau_min: float = 0.1,
        tau_max: float = 0.5,
    ) -> CCPOConfig:
        """Linear-form weights equal to the code's ``fw*format + (1-fw)*action`` score.

        Requires the code's non-coordinate "type right, args wrong" credit to equal ``min_weight``
        (both are 0.5 in the released code).
        """
        aw = 1.0 - format_weight
        return cls(
            alpha=format_weight + aw * type_miss_score,
            beta=aw * (min_weight - type_miss_score),
            gamma=aw * (1.0 - min_weight),
            tau_min=tau_min,
            tau_max=tau_max,
            w_min=0.0,
            w_beyond=0.0,
        )

    @property
    def high(self) -> float:
        return self.alpha + self.beta + self.gamma


def ccpo_distance_weight(d: float, cfg: CCPOConfig = CCPOConfig()) -> float:
    """Content credit of a click at normalised distance ``d`` from its target (CCPO Sec. 3, code
    ``_linear_weight_from_distance``): 1 for ``d <= tau_min``, linear to ``w_min`` at ``tau_max``,
    ``w_beyond`` for ``d > tau_max``."""
    if d <= cfg.tau_min:
        return 1.0
    if d > cfg.tau_max:
        return cfg.w_beyond
    span = cfg.tau_max - cfg.tau_min
    if span <= 0:
        return cfg.w_min
    return 1.0 - (d - cfg.tau_min) / span * (1.0 - cfg.w_min)


def ccpo_content(pred: Action, gt: GroundTruth, cfg: CCPOConfig = CCPOConfig()) -> float:
    """Content credit in ``[0, 1]`` for a prediction whose type already matches."""
    if gt.action.type in COORDINATE_TYPES:
        if pred.point is None:
            return 0.0
        d = min_target_distance(pred.point, gt, include_candidates=cfg.include_candidates)
        if d is None:
            return 0.0
        c = ccpo_distance_weight(d, cfg)
        if gt.action.text is not None:  # select: the option text must also match
            c *= float(text_matches(pred.text, gt.action.text, rule="contains"))
        return c
    return float(non_coordinate_args_match(pred, gt.action, text_rule="contains"))


def ccpo_reward(pred: ParseResult | Action | None, gt: GroundTruth, *, cfg: CCPOConfig = CCPOConfig()) -> RewardResult:
    """CCPO step reward ``alpha*format + beta*type + gamma*content``; range ``[0, alpha+beta+gamma]``.

    format = 1 when the output parsed; type = 1 when the action type matches; content (gated by
    type) from :func:`ccpo_content`.
    """
    pr = as_parse_result(pred)
    fmt = 1.0 if pr.ok else 0.0
    typ = 0.0
    content = 0.0
    if pr.ok:
        assert pr.action is not None
        if type_matches(pr.action, gt.action):
            typ = 1.0
            content = ccpo_content(pr.action, gt, cfg)
    total = cfg.alpha * fmt + cfg.beta * typ + cfg.gamma * content
    return RewardResult(total, {"format": fmt, "type": typ, "content": content})


def ccpo_code_score(
    pred: ParseResult | Action | None,
    gt: GroundTruth,
    *,
    format_weight: float = 0.1,
    type_miss_score: float = 0.1,
    min_weight: float = 0.5,
    tau_min: float = 0.1,
    tau_max: float = 0.5,
) -> float:
    """Transcription of the released code's score ``0.1*format + 0.9*action`` (reference only).

    action: 0 unparsed; ``type_miss_score`` wrong type; coordinate types: the code's weight
    (1 within tau_min, linear to ``min_weight`` at tau_max, ``min_weight`` beyond);
    other types: 1 if the arguments match else ``min_weight`` (the code's ``ratio = 0.5``).
    """
    pr = as_parse_result(pred)
    if not pr.ok:
        return 0.0
    assert pr.action is not None
    a = pr.action
    if not type_matches(a, gt.action):
        action = type_miss_score
    elif gt.action.type in COORDINATE_TYPES:
        d = None if a.point is None else min_target_distance(a.point, gt)
        if d is None:
            action = min_weight
        elif d <= tau_min:
            action = 1.0
        elif d > tau_max:
            action = min_weight
        else:
            action = 1.0 - (d - tau_min) / (tau_max - tau_min) * (1.0 - min_weight)
    else:
        action = 1.0 if non_coordinate_args_match(a, gt.action, text_rule="contains") else min_weight
    return format_weight * 1.0 + (1.0 - format_weight) * action
