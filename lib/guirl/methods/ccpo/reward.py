"""CCPO reward: format + type + distance-based content credit ("Compress to Focus", Song et al. 2026,
arXiv 2601.11631, Sec. "Distance-Based Advantage"; released code ``CCPO/verl/utils/reward_score/
gui_traj_rewarrd.py`` and ``gui_utils/utils_reward.py`` of HiThink-Research/CCPO).

Source of the numbers. The arXiv text of the paper could not be read from the stored corpus in
this session, so the shape and constants below come from the released code:

* ``TOLERANCE_DISTANCE_THRESHOLD = 0.1`` (tau_min), ``MAX_TOLERANCE_DISTANCE_THRESHOLD = 0.5``
  (tau_max), ``MIN_WEIGHT = 0.5`` (w_min): a coordinate action whose type matches earns action
  credit 1 within tau_min of the target, linearly falling to w_min at tau_max, and w_min beyond
  (the code's docstring says "0 beyond tau_max", its body returns w_min; we follow the body and
  expose ``w_beyond`` to get the docstring's variant).
* distance = min over the gt point and the gt / candidate boxes (distance to a box is 0 inside
  it): the matching rule set ``"ccpo_reward"`` (``CCPOConfig.rules``, ``distance_to=
  "nearest_target"``). CCPO eq. 12 measures to the gt point only.
* action score: 0 unparsable, 0.1 parsed with the wrong type, 0.5 type right but arguments wrong
  (non-coordinate), distance weight for coordinate actions, 1 correct; total
  ``0.1 * format + 0.9 * action``.

The brief's linear form ``alpha * format + beta * type + gamma * content`` reproduces that score
exactly with ``alpha = 0.19, beta = 0.36, gamma = 0.45`` and a content term that is 1 within
tau_min, linear to 0 at tau_max, 0 beyond (i.e. ``content = (w - 0.5) / 0.5`` of the code's
weight ``w``): type wrong -> 0.1 + 0.9*0.1 = 0.19; type right, far -> 0.1 + 0.9*0.5 = 0.55 =
0.19 + 0.36; correct -> 1.0. ``CCPOConfig.from_code_constants`` builds that mapping from the code's
constants; :func:`ccpo_code_score` is a direct transcription used in the tests to prove it.
Non-coordinate arguments use containment after lower/strip (``check_text``), as in the code and
the rule set ``"ccpo_reward"``; CCPO eq. 13 states exact match, and the evaluator protocol
``"ccpo"`` uses token F1 >= 0.5, so ``type "milk"`` earns full credit here but is wrong under
``"ccpo"`` (``docs/metrics.md``, "Reward rules vs evaluator").
The code's HARMFUL/NEUTRAL annotation overrides are not modelled (no such labels here).
"""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import COORDINATE_TYPES, Action, ParseResult
from guirl.matching import arguments_match, get_rules
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result, match_gt

__all__ = ["CCPOConfig", "ccpo_distance_weight", "ccpo_content", "ccpo_reward", "ccpo_code_score"]


@dataclass(frozen=True)
class CCPOConfig:
    """Hyper-parameters of the CCPO reward (defaults reproduce the released code, see module doc).

    ``alpha, beta, gamma``: weights of format, type and content. ``tau_min, tau_max`` normalised
    distances; the content curve is 1 up to ``tau_min``, linear to ``w_min`` at ``tau_max`` and
    ``w_beyond`` after it. ``rules``: the matching rule set (:data:`guirl.matching.RULES`) that
    measures the distance and compares the other arguments.
    """

    alpha: float = 0.19
    beta: float = 0.36
    gamma: float = 0.45
    tau_min: float = 0.1  # CCPO code TOLERANCE_DISTANCE_THRESHOLD
    tau_max: float = 0.5  # CCPO code MAX_TOLERANCE_DISTANCE_THRESHOLD
    w_min: float = 0.0  # content at tau_max; the code's MIN_WEIGHT=0.5 is folded into beta (module doc)
    w_beyond: float = 0.0
    rules: str = "ccpo_reward"  # guirl.matching.RULES; = METHOD.reward_rules

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
    """Content credit in ``[0, 1]`` for a prediction whose type already matches: the distance
    credit times "the other arguments match" for coordinate actions, else "the arguments match"."""
    m = match_gt(pred, gt, cfg.rules)
    args_ok, _ = arguments_match(pred, gt.action, get_rules(cfg.rules))
    if gt.action.type in COORDINATE_TYPES:
        if m.distance is None:
            return 0.0
        return ccpo_distance_weight(m.distance, cfg) * float(args_ok)  # select: the option text too
    return float(args_ok)


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
        if match_gt(pr.action, gt, cfg.rules).type_match:
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
    rules: str = "ccpo_reward",
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
    m = match_gt(a, gt, rules)
    if not m.type_match:
        action = type_miss_score
    elif gt.action.type in COORDINATE_TYPES:
        d = m.distance
        if d is None:
            action = min_weight
        elif d <= tau_min:
            action = 1.0
        elif d > tau_max:
            action = min_weight
        else:
            action = 1.0 - (d - tau_min) / (tau_max - tau_min) * (1.0 - min_weight)
    else:
        action = 1.0 if m.exact else min_weight
    return format_weight * 1.0 + (1.0 - format_weight) * action
