"""Co-EPG planning reward with the Confidence-based Dynamic Reward Ensemble Mechanism (C-DREM)
(Zhao et al., "Co-EPG: A Framework for Co-Evolution of Planning and Grounding in Autonomous GUI
Agents", AAAI 2026, arXiv 2511.10705, Sec. 3 "C-DREM").

The planning model emits an action type, a description of the target element and a value; each
of K grounding models turns the description into a point. C-DREM rewards the plan by how much of
the (confidence-weighted) grounding ensemble lands on the ground-truth element:

* confidence of grounding model i: ``c_i = mean_t log p_i(coordinate token t)`` (<= 0);
* ensemble weights ``w = softmax(prior_i * c_i)`` over the models;
* plan reward ``r_plan = sum_i w_i * [point_i hits the gt box]``;
* type reward ``r_type = [type matches]``; value reward ``r_value = [token F1(value, gt) > 0.5]``;
* final reward ``r = r_type * r_plan`` (coordinate actions) ``* r_value`` (actions with a value),
  ``r = r_type * r_value`` for value-only actions, ``r = r_type`` otherwise. Range ``[0, 1]``.

Caveats (the paper text and code were not readable in this session; Co-EPG's code is not
released): the formula above is the project brief's. With ``confidence="logprob"`` (default, the
brief) ``prior * c_i`` is <= 0, so a larger prior *lowers* a model's weight unless its
log-probability is 0; ``confidence="prob"`` uses ``c_i = exp(mean log p)`` in ``(0, 1]``, under
which a larger prior raises the weight. Which one the paper means must be checked against its
Eq. for C-DREM before reporting numbers. The hit test uses the gt box; without a box it falls
back to 0.14 around the gt point (our choice, not the paper's; the rule set ``"coepg_reward"``). Priors have no
published default here: the tests use 1:1:2 as the brief's worked example.

Inputs are plain numbers (points and per-token log-probabilities), so the function is pure; the
grounding models themselves are run elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from guirl.actions.types import COORDINATE_TYPES, TEXT_TYPES, Action, ParseResult
from guirl.geometry import Point
from guirl.matching import arguments_match, click_match, get_rules, gt_point, text_match, types_match
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result

__all__ = [
    "GroundingOutput",
    "CoEPGConfig",
    "grounding_confidence",
    "ensemble_weights",
    "coepg_plan_reward",
    "coepg_reward",
]


@dataclass(frozen=True)
class GroundingOutput:
    """One grounding model's answer: a normalised point (``None`` if it produced none) and the
    log-probabilities (natural log) of the tokens that spell its coordinates."""

    point: Point | None
    token_logprobs: tuple[float, ...] = ()

    @classmethod
    def from_any(cls, x: GroundingOutput | Mapping[str, Any]) -> GroundingOutput:
        """Accept an instance or a dict ``{"point": [x, y] | None, "token_logprobs": [...]}``."""
        if isinstance(x, GroundingOutput):
            return x
        if not isinstance(x, Mapping) or "point" not in x:
            raise ValueError(f"grounding output must have 'point' and 'token_logprobs', got {x!r}")
        pt = x["point"]
        return cls(
            point=None if pt is None else (float(pt[0]), float(pt[1])),
            token_logprobs=tuple(float(v) for v in x.get("token_logprobs", ())),
        )


@dataclass(frozen=True)
class CoEPGConfig:
    """C-DREM settings. ``priors`` (one per grounding model; empty = all 1) have no published default
    we could read. ``rules`` names the matching rule set: the hit test of a grounding point (gt
    box; within 0.14 of the gt point only when the gt has no box, our choice) and the value rule
    (token F1 ``> 0.5``, strict as the brief states)."""

    priors: tuple[float, ...] = ()
    confidence: Literal["logprob", "prob"] = "logprob"
    rules: str = "coepg_reward"  # guirl.matching.RULES; = METHOD.reward_rules


def grounding_confidence(token_logprobs: Sequence[float], mode: Literal["logprob", "prob"] = "logprob") -> float:
    """Mean log-probability of the coordinate tokens (``mode="prob"``: its exp, the geometric-mean
    token probability). An empty sequence (no coordinates produced) gives ``-inf`` (``0`` for prob)."""
    if len(token_logprobs) == 0:
        return -math.inf if mode == "logprob" else 0.0
    m = sum(token_logprobs) / len(token_logprobs)
    if m > 1e-9:
        raise ValueError(f"log-probabilities must be <= 0, mean is {m}")
    return m if mode == "logprob" else math.exp(m)


def ensemble_weights(confidences: Sequence[float], priors: Sequence[float] | None = None) -> list[float]:
    """``softmax(prior_i * c_i)`` over models; ``-inf`` logits get weight 0; all ``-inf`` -> all 0."""
    k = len(confidences)
    if k == 0:
        return []
    pri = [1.0] * k if not priors else [float(p) for p in priors]
    if len(pri) != k:
        raise ValueError(f"{len(pri)} priors for {k} grounding models")
    if any(p <= 0 for p in pri):
        raise ValueError(f"priors must be > 0, got {pri}")
    logits = [p * c for p, c in zip(pri, confidences)]
    finite = [z for z in logits if math.isfinite(z)]
    if not finite:
        return [0.0] * k
    mx = max(finite)
    ex = [math.exp(z - mx) if math.isfinite(z) else 0.0 for z in logits]
    s = sum(ex)
    return [e / s for e in ex]


def coepg_plan_reward(
    grounding: Sequence[GroundingOutput | Mapping[str, Any]],
    gt: GroundTruth,
    cfg: CoEPGConfig = CoEPGConfig(),
) -> tuple[float, list[float], list[bool]]:
    """C-DREM plan reward ``sum_i w_i * hit_i``; returns ``(reward, weights, hits)``."""
    outs = [GroundingOutput.from_any(g) for g in grounding]
    conf = [grounding_confidence(o.token_logprobs, cfg.confidence) for o in outs]
    if cfg.confidence == "prob":
        # a model with no coordinates (confidence 0) must not get weight: mask it like -inf
        conf = [c if o.point is not None else -math.inf for c, o in zip(conf, outs)]
    w = ensemble_weights(conf, cfg.priors or None)
    rule = get_rules(cfg.rules).click
    target = gt_point(gt.action, gt.box)
    hits = [click_match(o.point, target, rule, gt_box=gt.box, candidate_boxes=gt.candidate_boxes) for o in outs]
    return float(sum(wi for wi, h in zip(w, hits) if h)), w, hits


def coepg_reward(
    pred: ParseResult | Action | None,
    gt: GroundTruth,
    *,
    grounding: Sequence[GroundingOutput | Mapping[str, Any]] = (),
    cfg: CoEPGConfig = CoEPGConfig(),
) -> RewardResult:
    """Co-EPG planning reward in ``[0, 1]`` (module doc). ``grounding`` holds one output per
    grounding model for the planner's target description (needed for coordinate actions)."""
    pr = as_parse_result(pred)
    comps = {"format": 0.0, "type": 0.0, "plan": 0.0, "value": 0.0}
    if not pr.ok:
        return RewardResult(0.0, comps)
    assert pr.action is not None
    a, g = pr.action, gt.action
    comps["format"] = 1.0
    rules = get_rules(cfg.rules)
    if not types_match(a, g, rules):
        return RewardResult(0.0, comps)
    comps["type"] = 1.0
    total = 1.0
    if g.type in COORDINATE_TYPES:
        plan, _, _ = coepg_plan_reward(grounding, gt, cfg)
        comps["plan"] = plan
        total *= plan
    else:
        comps["plan"] = 1.0
    has_value = g.type in TEXT_TYPES or g.text is not None
    if has_value:
        comps["value"] = 1.0 if text_match(a.text, g.text, rules.text) else 0.0
        total *= comps["value"]
    elif g.type not in COORDINATE_TYPES:
        # scroll / press / terminate / wait: their argument is the "value" of the plan
        comps["value"] = 1.0 if arguments_match(a, g, rules)[0] else 0.0
        total *= comps["value"]
    else:
        comps["value"] = 1.0
    return RewardResult(total, comps)
