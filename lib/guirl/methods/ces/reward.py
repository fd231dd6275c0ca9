"""CES execution-feedback reward (Deng et al., "Training High-Level Schedulers with Execution-Feedback
Reinforcement Learning for Long-Horizon GUI Automation", CVPR 2026, arXiv 2511.22235, Sec. 3
"staged execution-feedback RL"; released code ``verl/utils/reward_score/gui.py`` of hehehahi4/CES).

The Coordinator's instruction is executed by the frozen Executor; the Executor's action is scored
against the ground truth:

``r = alpha1 * r_format + alpha2 * (gamma1 * r_type + gamma2 * r_param)``

with ``alpha = (0.1, 0.9)`` and ``gamma = (0.2, 0.8)`` (code: ``format_reward * 0.1 +
accuracy_reward * 0.9`` and ``0.2 * action_match_score + 0.8 * param_match_score``). ``r_param`` by
action type (code ``compute_match_score``; the matching rule set ``"ces_reward"``,
``CESConfig.rules``): click/long_press inside the gt box or within 0.14 (``CLICK_COORD_THRESHOLD``)
of the gt point; type/open_app token F1 ``> 0.5`` (``TEXT_F1_THRESHOLD``, strict in the code and
in CES eq. 25); scroll: direction (CES eq. 25; the code's ``scroll()`` has no argument and always
scores 1: the rule set ``"ces_reward_code"`` reproduces that); press: the key (part of the verb);
other types: 1 once the type matches. ``r_param`` is 0 when the type is wrong. Range ``[0, 1]``.
CES eq. 25 says a click is right inside the gt box, "consistent with" its SR metric; the
evaluator protocol ``"ces"`` differs from this rule set (``docs/metrics.md``).

Here ``pred`` is the Executor's parsed action; ``r_format`` is whether the *Coordinator* output
was well-formed, passed as ``format_ok`` (defaults to "the executor action parsed").
"""

from __future__ import annotations

from dataclasses import dataclass

from guirl.actions.types import Action, ParseResult
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result, match_gt

__all__ = ["CESConfig", "ces_param_match", "ces_reward"]


@dataclass(frozen=True)
class CESConfig:
    """CES weights (defaults from the released code and CES Sec. 4.1) and the matching rule set."""

    alpha1: float = 0.1  # CES code gui_navigator_score: format weight
    alpha2: float = 0.9  # CES code gui_navigator_score: accuracy weight
    gamma1: float = 0.2  # CES code acc_reward: action-type weight
    gamma2: float = 0.8  # CES code acc_reward: parameter weight
    rules: str = "ces_reward"  # guirl.matching.RULES; = METHOD.reward_rules

    @property
    def high(self) -> float:
        return self.alpha1 + self.alpha2 * (self.gamma1 + self.gamma2)


def ces_param_match(pred: Action, gt: GroundTruth, cfg: CESConfig = CESConfig()) -> bool:
    """CES parameter check (``cfg.rules``) for a prediction whose type matches the gt."""
    return match_gt(pred, gt, cfg.rules).exact


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
        m = match_gt(pr.action, gt, cfg.rules)
        typ, par = float(m.type_match), float(m.exact)
    acc = cfg.gamma1 * typ + cfg.gamma2 * par
    total = cfg.alpha1 * fmt + cfg.alpha2 * acc
    return RewardResult(total, {"format": fmt, "type": typ, "param": par, "accuracy": acc})
