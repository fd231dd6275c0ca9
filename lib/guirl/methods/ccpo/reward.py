"""CCPO step reward: format + type + distance-based accuracy (CCPO Sec. 3.4, eqs. 11-13, App. A.2.1).

``r = alpha * r_format + beta * r_type + gamma * r_acc`` (CCPO eq. 11):

* ``r_format`` (Sec. 3.4): 1 when the response follows the required format, i.e. it holds an
  ``<action>...</action>`` envelope whose body is a JSON object, whether or not that object is
  a valid action (``format_rule="envelope"``). The released code scores format only for an
  output that parses into a valid action (``format_rule="parsed"``).
* ``r_type``: 1 when the predicted action type equals the annotated one.
* ``r_acc`` (paid only when format and type are right, Sec. 3.4):

  - coordinate actions (A_wc: click, long press, select, hover, and scroll with an annotated
    start point, Sec. 3.3 "we treat scroll as a coordinate action"): the distance credit of
    :func:`ccpo_distance_weight` at ``d = ||c_hat - c||_2`` (eq. 12: Euclidean distance between
    the normalised predicted point and the normalised **annotated point**), times "the other
    arguments match" (a select's option text, a scroll's direction). 1 for ``d <= tau_min``,
    ``w_min`` for ``d >= tau_max``, linear in between; ``tau_min = 0.04`` (App. A.2.1: the value
    of every main-paper experiment; 0.1 was the alternative tried on AC and AITW);
  - every other action (eq. 13): 1 when type and every argument are equal (exact match after
    lower-casing and collapsing spaces), else 0. A scroll without an annotated point is scored
    by its direction here.

Values the paper does not give (``docs/fidelity/ccpo.md``, "Values the paper does not give"):
``alpha, beta, gamma``, ``tau_max`` and ``w_min``. They come from the released code
(``CCPO/verl/utils/reward_score/gui_traj_rewarrd.py``: score ``0.1 * format + 0.9 * action``,
``MAX_TOLERANCE_DISTANCE_THRESHOLD = 0.5``, ``MIN_WEIGHT = 0.5``). That score equals the linear
form with ``alpha = 0.19, beta = 0.36, gamma = 0.45`` and a credit curve that falls from 1 to 0
at ``tau_max`` (the code's ``MIN_WEIGHT = 0.5`` folded into ``beta``): type wrong ->
``0.1 + 0.9 * 0.1 = 0.19``; type right, far -> ``0.1 + 0.9 * 0.5 = 0.55 = 0.19 + 0.36``;
correct -> 1. :meth:`CCPOConfig.from_code_constants` builds those weights from the code's
constants and :func:`ccpo_code_score` transcribes the code, so the tests can prove the identity.

The released code as a named variant, :meth:`CCPOConfig.code` (``variant="code"`` in the ``ccpo``
config section): ``tau_min = 0.1`` (``TOLERANCE_DISTANCE_THRESHOLD``), the distance to the
nearest of the gt point, gt box and candidate boxes (0 inside a box), non-coordinate text by
containment, format = the output parsed, scroll scored by direction only (matching rule set
``"ccpo_reward_code"``). The code's HARMFUL/NEUTRAL annotation overrides are not modelled (no
such labels here).

``distance_credit=False`` is CCPO "w/o CR" (Table 17, the ablation of Table 5): ``r_acc`` of a
coordinate action is binary, 1 within ``tau_min`` else 0.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Literal

from guirl.actions.types import COORDINATE_TYPES, Action, ActionType, ParseResult
from guirl.matching import arguments_match, get_rules
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result, match_gt

__all__ = [
    "CCPOConfig",
    "VARIANTS",
    "is_coordinate_gt",
    "format_ok",
    "ccpo_distance_weight",
    "ccpo_content",
    "ccpo_reward",
    "ccpo_match",
    "ccpo_code_score",
]

#: Reward variants: the paper's (default) and the released code's (:meth:`CCPOConfig.code`).
VARIANTS: tuple[str, ...] = ("paper", "code")

_ACTION_ENVELOPE = re.compile(r"<action>(.*?)</action>", re.DOTALL)


@dataclass(frozen=True)
class CCPOConfig:
    """Hyper-parameters of the CCPO reward (module doc; defaults are the paper's, eq. 11-13, A.2.1).

    ``alpha, beta, gamma``: weights of format, type and accuracy (eq. 11). ``tau_min, tau_max``:
    normalised distances of the credit curve; ``w_min`` the credit at ``tau_max``, ``w_beyond``
    after it. ``rules``: the matching rule set (:data:`guirl.matching.RULES`) that measures the
    distance and compares the other arguments. ``format_rule``: ``"envelope"`` (paper) or
    ``"parsed"`` (code). ``scroll_is_coordinate``: a scroll with an annotated point is scored by
    the distance of its start point (paper, Sec. 3.3) instead of its direction only (code).
    ``distance_credit``: ``False`` is "w/o CR" (binary accuracy within ``tau_min``).
    """

    alpha: float = 0.19  # not in the paper: released code 0.1*format + 0.9*action (module doc)
    beta: float = 0.36
    gamma: float = 0.45
    tau_min: float = 0.04  # CCPO App. A.2.1 (every main-paper experiment)
    tau_max: float = 0.5  # not in the paper: released code MAX_TOLERANCE_DISTANCE_THRESHOLD
    w_min: float = 0.0  # the code's MIN_WEIGHT = 0.5 folded into beta (module doc)
    w_beyond: float = 0.0
    rules: str = "ccpo_reward"  # guirl.matching.RULES; = METHOD.reward_rules
    format_rule: Literal["envelope", "parsed"] = "envelope"
    scroll_is_coordinate: bool = True
    distance_credit: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.tau_min <= self.tau_max:
            raise ValueError(f"need 0 <= tau_min <= tau_max, got {self.tau_min}, {self.tau_max}")
        for k in ("w_min", "w_beyond"):
            v = getattr(self, k)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{k} must be in [0, 1], got {v}")
        if min(self.alpha, self.beta, self.gamma) < 0:
            raise ValueError("alpha, beta, gamma must be >= 0")
        if self.format_rule not in ("envelope", "parsed"):
            raise ValueError(f"format_rule must be 'envelope' or 'parsed', got {self.format_rule!r}")
        get_rules(self.rules)  # an unknown rule set fails here, naming the registered ones

    @classmethod
    def code(cls) -> CCPOConfig:
        """The released code's reward (module doc): tau_min 0.1, nearest-target distance,
        containment, format = parsed, scroll by direction."""
        return replace(
            cls.from_code_constants(), rules="ccpo_reward_code", format_rule="parsed", scroll_is_coordinate=False
        )

    @classmethod
    def variant(cls, name: str) -> CCPOConfig:
        """``"paper"`` (the defaults) or ``"code"`` (:meth:`code`)."""
        if name == "paper":
            return cls()
        if name == "code":
            return cls.code()
        raise ValueError(f"unknown CCPO reward variant {name!r}; expected one of {VARIANTS}")

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


def is_coordinate_gt(gt: Action, cfg: CCPOConfig = CCPOConfig()) -> bool:
    """Whether the annotated action is scored by distance (A_wc, CCPO Sec. 3.3): click, long
    press, select, hover; a scroll with an annotated start point when ``cfg.scroll_is_coordinate``."""
    if gt.type in COORDINATE_TYPES:
        return True
    return cfg.scroll_is_coordinate and gt.type is ActionType.SCROLL and gt.point is not None


def format_ok(pred: ParseResult | Action | None, cfg: CCPOConfig = CCPOConfig()) -> bool:
    """``r_format`` (module doc): a parsed action always passes; otherwise, under
    ``format_rule="envelope"``, the raw output passes when its ``<action>`` body is a JSON object."""
    pr = as_parse_result(pred)
    if pr.ok:
        return True
    if cfg.format_rule == "parsed" or not pr.raw:
        return False
    m = _ACTION_ENVELOPE.search(pr.raw)
    if m is None:
        return False
    body = m.group(1).strip()
    if body.startswith("```"):
        body = re.sub(r"^```(?:json)?\s*|\s*```$", "", body)
    try:
        return isinstance(json.loads(body), dict)
    except json.JSONDecodeError:
        return False


def ccpo_distance_weight(d: float, cfg: CCPOConfig = CCPOConfig()) -> float:
    """Accuracy credit of a point at normalised distance ``d`` from its target (CCPO Sec. 3.4,
    the piecewise ``r_acc``): 1 for ``d <= tau_min``, linear to ``w_min`` at ``tau_max``,
    ``w_beyond`` for ``d > tau_max``. With ``distance_credit=False``: 1 within ``tau_min``, else 0."""
    if d <= cfg.tau_min:
        return 1.0
    if not cfg.distance_credit:
        return 0.0
    if d > cfg.tau_max:
        return cfg.w_beyond
    span = cfg.tau_max - cfg.tau_min
    if span <= 0:
        return cfg.w_min
    return 1.0 - (d - cfg.tau_min) / span * (1.0 - cfg.w_min)


def _content(pred: Action, gt: GroundTruth, cfg: CCPOConfig) -> tuple[float, float | None]:
    m = match_gt(pred, gt, cfg.rules)
    args_ok, _ = arguments_match(pred, gt.action, get_rules(cfg.rules))
    if is_coordinate_gt(gt.action, cfg):
        if m.distance is None:
            return 0.0, None
        return ccpo_distance_weight(m.distance, cfg) * float(args_ok), m.distance
    return float(args_ok), m.distance


def ccpo_content(pred: Action, gt: GroundTruth, cfg: CCPOConfig = CCPOConfig()) -> float:
    """``r_acc`` in ``[0, 1]`` for a prediction whose type already matches (module doc)."""
    return _content(pred, gt, cfg)[0]


def ccpo_reward(pred: ParseResult | Action | None, gt: GroundTruth, *, cfg: CCPOConfig = CCPOConfig()) -> RewardResult:
    """CCPO step reward ``alpha*format + beta*type + gamma*accuracy``; range ``[0, alpha+beta+gamma]``.

    Components: ``format``, ``type``, ``content`` (``r_acc``) and, when the prediction and the
    target both have a point, ``distance`` (normalised, eq. 12; the x axis of CCPO Fig. 6).
    """
    pr = as_parse_result(pred)
    fmt = 1.0 if format_ok(pr, cfg) else 0.0
    typ = 0.0
    content = 0.0
    dist: float | None = None
    if pr.ok:
        assert pr.action is not None
        if match_gt(pr.action, gt, cfg.rules).type_match:
            typ = 1.0
            content, dist = _content(pr.action, gt, cfg)
    total = cfg.alpha * fmt + cfg.beta * typ + cfg.gamma * content
    comps = {"format": fmt, "type": typ, "content": content}
    if dist is not None and math.isfinite(dist):
        comps["distance"] = dist
    return RewardResult(total, comps)


def ccpo_match(pred: ParseResult | Action | None, gt: GroundTruth, cfg: CCPOConfig = CCPOConfig()) -> bool:
    """Whether a step "matched" for the semi-online patch module and the step returns: the action
    parsed, its type matches and ``r_acc == 1`` (within ``tau_min`` for a coordinate action, an
    exact match otherwise)."""
    pr = as_parse_result(pred)
    if not pr.ok:
        return False
    assert pr.action is not None
    if not match_gt(pr.action, gt, cfg.rules).type_match:
        return False
    return _content(pr.action, gt, cfg)[0] >= 1.0


def ccpo_code_score(
    pred: ParseResult | Action | None,
    gt: GroundTruth,
    *,
    format_weight: float = 0.1,
    type_miss_score: float = 0.1,
    min_weight: float = 0.5,
    tau_min: float = 0.1,
    tau_max: float = 0.5,
    rules: str = "ccpo_reward_code",
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
