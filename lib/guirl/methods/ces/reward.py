"""CES execution-feedback reward (Deng et al., "Training High-Level Schedulers with Execution-Feedback
Reinforcement Learning for Long-Horizon GUI Automation", arXiv 2511.22235, Sec. 4.3 and App. A.2;
released code ``verl/utils/reward_score/gui.py`` of hehehahi4/CES).

The trained agent (the Coordinator in stage 1, the State Tracker in stage 2) writes text; its
decision is executed by the frozen Executor, and the Executor's action is scored against the
ground truth (CES eq. 6, 7, 21-25):

``R = alpha1 * R_format + alpha2 * (gamma1 * R_type + gamma2 * R_param)``

with ``alpha = (0.1, 0.9)`` and ``gamma = (0.2, 0.8)`` (CES Sec. 5.1, App. B.2).

* ``R_format`` (eq. 22): 1 when the **trained agent's own output** strictly follows the
  ``<think>...</think><answer>...</answer>`` format (:func:`ces_format_ok`), else 0. Pass that
  output as ``agent_output`` (or the verdict as ``format_ok``). ``CESConfig.format_from =
  "executor"`` is the former behaviour (``R_format`` = "the Executor's action parsed"), kept as an
  option (CES-09 in ``docs/fidelity/ces.md``). The paper's State Tracker prompt and SFT target
  carry no tags (a self-contradiction listed there), so in stage 2 the format term rewards the
  tags the reward asks for, not the prompt's plain summary.
* ``R_type`` (eq. 24): the Executor's action type equals the gt type.
* ``R_param`` (eq. 25), the matching rule set ``CESConfig.rules``: ``"ces_reward"`` (paper
  default) -- click / long press right only with the point inside the gt box (a step without a
  gt box, where the paper is silent: within 0.14 of the gt point), type text by token F1 > 0.5,
  scroll by direction, any other action by its type; ``"ces_reward_code"`` (released code) --
  inside a gt or candidate box *or* within 0.14 (``CLICK_COORD_THRESHOLD``), and any scroll
  direction (``scroll()`` has no argument). ``R_param`` is 0 when the type is wrong.

Range ``[0, 1]``. The evaluator protocol ``"ces"`` differs from these rule sets
(``docs/metrics.md``, "Reward rules vs evaluator").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from guirl.actions.types import Action, ParseResult
from guirl.methods.ces.roles import parse_think_answer
from guirl.rewards.base import GroundTruth, RewardInputError, RewardResult, as_parse_result, match_gt

__all__ = ["CESConfig", "ces_format_ok", "ces_param_match", "ces_reward"]

_THINK_ANSWER = re.compile(r"\s*<think>(.*?)</think>\s*<answer>(.*?)</answer>\s*", re.DOTALL)


@dataclass(frozen=True)
class CESConfig:
    """CES reward weights (CES Sec. 5.1 and App. B.2), the matching rule set and where the format
    term comes from (``"agent"``: the trained agent's output, CES eq. 22; ``"executor"``: the
    Executor's parse, the former behaviour)."""

    alpha1: float = 0.1  # CES Sec. 5.1 / App. B.2: format weight
    alpha2: float = 0.9  # CES Sec. 5.1 / App. B.2: executor-reward weight
    gamma1: float = 0.2  # CES Sec. 5.1 / App. B.2: action-type weight
    gamma2: float = 0.8  # CES Sec. 5.1 / App. B.2: parameter weight
    rules: str = "ces_reward"  # guirl.matching.RULES; = METHOD.reward_rules ("ces_reward_code": released code)
    format_from: Literal["agent", "executor"] = "agent"  # CES eq. 22

    def __post_init__(self) -> None:
        if self.format_from not in ("agent", "executor"):
            raise ValueError(f"CESConfig.format_from must be 'agent' or 'executor', got {self.format_from!r}")

    @property
    def high(self) -> float:
        return self.alpha1 + self.alpha2 * (self.gamma1 + self.gamma2)


def ces_format_ok(text: str | None) -> bool:
    """CES eq. 22 ``CheckFormat``: the whole output is ``<think>...</think><answer>...</answer>``
    (white space around the tags allowed) with a non-empty answer. ``None`` is False."""
    if not isinstance(text, str):
        return False
    m = _THINK_ANSWER.fullmatch(text)
    return m is not None and parse_think_answer(text).ok and bool(m.group(2).strip())


def ces_param_match(pred: Action, gt: GroundTruth, cfg: CESConfig = CESConfig()) -> bool:
    """CES parameter check (``cfg.rules``, CES eq. 25) for a prediction whose type matches the gt."""
    return match_gt(pred, gt, cfg.rules).exact


def ces_reward(
    pred: ParseResult | Action | None,
    gt: GroundTruth,
    *,
    agent_output: str | None = None,
    format_ok: bool | None = None,
    cfg: CESConfig = CESConfig(),
) -> RewardResult:
    """CES step reward (module doc). ``pred``: the frozen Executor's parsed action.

    ``agent_output``: the trained agent's text (Coordinator or State Tracker), checked with
    :func:`ces_format_ok`; ``format_ok`` gives that verdict directly. With
    ``cfg.format_from == "agent"`` (default) one of them is required (a
    :class:`~guirl.rewards.base.RewardInputError` naming both otherwise); with ``"executor"`` they
    are ignored and the format term is whether the Executor's action parsed.
    """
    pr = as_parse_result(pred)
    if cfg.format_from == "executor":
        fmt = float(pr.ok)
    elif format_ok is not None:
        fmt = float(bool(format_ok))
    elif agent_output is not None:
        fmt = float(ces_format_ok(agent_output))
    else:
        raise RewardInputError(
            "ces reward: pass agent_output (the trained Coordinator / State Tracker text, CES eq. 22) or "
            "format_ok; CESConfig(format_from='executor') scores the Executor's parse instead"
        )
    typ = par = 0.0
    if pr.ok:
        assert pr.action is not None
        m = match_gt(pr.action, gt, cfg.rules)
        typ, par = float(m.type_match), float(m.exact)
    acc = cfg.gamma1 * typ + cfg.gamma2 * par
    total = cfg.alpha1 * fmt + cfg.alpha2 * acc
    return RewardResult(total, {"format": fmt, "type": typ, "param": par, "accuracy": acc})
