"""Co-EPG planning reward with the Confidence-based Dynamic Reward Ensemble Mechanism (C-DREM)
(Zhao et al., "Co-EPG: A Framework for Co-Evolution of Planning and Grounding in Autonomous GUI
Agents", AAAI 2026, arXiv 2511.10705, Sec. 4.3, eq. 3-9; App. B-C).

The planning model writes an action type, a description of the target element (the plan) and a
value; each of N grounding models turns the plan into a point. C-DREM rewards the plan by how
much of the confidence-weighted grounding ensemble lands on the ground-truth element:

* accuracy of grounding model j (eq. 3): ``Acc_j = [point_j inside the gt box]``;
* confidence (eq. 6): ``c_j = mean_l log p_j(coordinate token l)`` (<= 0);
* weights (eq. 5): ``w_j = softmax_j(sigma_j * c_j)`` with the static priors ``sigma``;
* plan reward (eq. 4): ``r_plan = sum_j w_j * Acc_j``;
* type reward (eq. 7) ``[type matches]``; value reward (eq. 8) ``[token F1(value, gt) > 0.5]``;
* final reward (eq. 9): 0 when the type or the value is wrong, else ``r_plan``. Range ``[0, 1]``.

Priors (App. B, App. C, Table 5): 1:1:2 for the ensemble (Qwen2.5-VL-72B-Instruct,
Qwen2.5-VL-32B-Instruct, the trained grounder phi_k), in that order; ``CoEPGConfig.priors``
defaults to ``(1.0, 1.0, 2.0)`` and the ``grounding`` outputs must come in the same order (a
different number of outputs is an error naming the priors). Table 5's other rows (1:1:1,
1:1:1.5, 1:1:3) are other values of the same field.

**Eq. 5 contradicts the text** (``docs/fidelity/coepg.md``, "Where the paper contradicts
itself"): ``c_j <= 0``, so a larger prior multiplies a non-positive number and, at equal
confidences, gives the model *less* weight, while Sec. 4.3 and App. C say the larger prior marks
the more important model. ``confidence="logprob"`` (default) is the literal equation;
``confidence="prob"`` uses ``c_j = exp(mean log p)`` in ``(0, 1]``, under which a larger prior
raises the weight (the evident intent). :func:`coepg_reward` reports both readings as the
components ``plan_logprob`` and ``plan_prob`` whatever the configured one, so a run can say
what the other reading would have paid.

Ablations (Sec. 5.4, Table 4) as ``CoEPGConfig.weighting``: ``"cdrem"`` (eq. 5, default),
``"average"`` (w/o Confidence & Prior Weights: ``w_j = 1 / N``), ``"prior"`` (w/o Confidence
Weights: ``w_j = sigma_j / sum_n sigma_n``; the paper does not say how priors alone are
normalised, so the priors are read as shares) and ``"single"`` (w/o C-DREM: the trained grounder
alone, the last output, weight 1). A grounder that produced no usable point (nothing parses as a
point on the screen, whatever digits its answer had) hits nothing under any weighting; under
``"cdrem"`` it also gets weight 0 in both readings of eq. 5, so the weights of the grounders that
answered sum to 1.

Steps with a target (:func:`grounded_gt`): coordinate actions and Mind2Web's typing steps, whose
TYPE acts on an element (Table 9). Paper silent: a step without a gt box is a hit within 0.14 of
the gt point (the rule set ``"coepg_reward"``); r_plan of an action without a target (scroll,
navigate, wait, AndroidControl's input_text, ...) is 1,
so the reward reduces to the type and value gates. Inputs are plain numbers (points and
per-token log-probabilities), so the function is pure; the grounding models run elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from guirl.actions.types import COORDINATE_TYPES, TEXT_TYPES, Action, ActionType, ParseResult
from guirl.geometry import Point
from guirl.matching import arguments_match, click_match, get_rules, gt_point, text_match, types_match
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result

__all__ = [
    "ENSEMBLE",
    "PAPER_PRIORS",
    "WEIGHTINGS",
    "GroundingOutput",
    "CoEPGConfig",
    "grounding_confidence",
    "ensemble_weights",
    "coepg_plan_reward",
    "coepg_reward",
    "grounded_gt",
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


#: The grounding ensemble of Co-EPG's main experiments, in the order of :data:`PAPER_PRIORS`
#: (App. B lists the models, App. C gives the ratio in this order).
ENSEMBLE: tuple[str, ...] = ("Qwen2.5-VL-72B-Instruct", "Qwen2.5-VL-32B-Instruct", "trained grounder phi_k")
#: Static priors 1:1:2 (Co-EPG App. B line 379, App. C and Table 5: best of 1:1:1 .. 1:1:3).
PAPER_PRIORS: tuple[float, ...] = (1.0, 1.0, 2.0)


#: The plan-reward weightings: C-DREM (eq. 5) and the three ablations of Table 4 (module doc).
WEIGHTINGS: tuple[str, ...] = ("cdrem", "average", "prior", "single")
Weighting = Literal["cdrem", "average", "prior", "single"]


@dataclass(frozen=True)
class CoEPGConfig:
    """C-DREM settings. ``priors``: one static prior per grounding model, in the order the
    ``grounding`` outputs come (default 1:1:2 for :data:`ENSEMBLE`, Co-EPG App. B; ``()`` = all 1,
    for an ensemble of any size). ``confidence``: ``"logprob"`` (eq. 5-6 literally) or ``"prob"``
    (the intent, module doc). ``rules`` names the matching rule set: the hit test of a grounding
    point (gt box, eq. 3; within 0.14 of the gt point only when the gt has no box, ours) and the
    value rule (token F1 ``> 0.5``, eq. 8). ``weighting``: :data:`WEIGHTINGS` (C-DREM or a Table 4
    ablation, module doc)."""

    priors: tuple[float, ...] = PAPER_PRIORS  # Co-EPG App. B / App. C: 72B : 32B : phi_k = 1 : 1 : 2
    confidence: Literal["logprob", "prob"] = "logprob"  # Co-EPG eq. 5-6 as printed
    rules: str = "coepg_reward"  # guirl.matching.RULES; = METHOD.reward_rules
    weighting: Weighting = "cdrem"  # Co-EPG Sec. 4.3; Table 4 ablates the other three

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting {self.weighting!r} is not one of {WEIGHTINGS}")


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
    """Co-EPG eq. 5: ``softmax(prior_i * c_i)`` over models; ``-inf`` logits get weight 0; all
    ``-inf`` -> all 0. ``priors`` ``None`` or empty: all 1."""
    k = len(confidences)
    if k == 0:
        return []
    pri = [1.0] * k if not priors else [float(p) for p in priors]
    if len(pri) != k:
        raise ValueError(
            f"{len(pri)} priors {tuple(pri)} for {k} grounding outputs; CoEPGConfig.priors has one prior per "
            f"grounding model in the order of the outputs (Co-EPG App. B: {', '.join(ENSEMBLE)} = 1:1:2), "
            "or () for equal priors"
        )
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
    """C-DREM plan reward ``sum_i w_i * hit_i`` (Co-EPG eq. 3-6); returns ``(reward, weights, hits)``."""
    outs = [GroundingOutput.from_any(g) for g in grounding]
    w = _weights(outs, cfg.priors, cfg.confidence, cfg.weighting)
    rule = get_rules(cfg.rules).click
    target = gt_point(gt.action, gt.box)
    hits = [click_match(o.point, target, rule, gt_box=gt.box, candidate_boxes=gt.candidate_boxes) for o in outs]
    return float(sum(wi for wi, h in zip(w, hits) if h)), w, hits


def _weights(
    outs: Sequence[GroundingOutput],
    priors: Sequence[float],
    mode: Literal["logprob", "prob"],
    weighting: Weighting = "cdrem",
) -> list[float]:
    n = len(outs)
    if weighting == "average":
        return [1.0 / n] * n if n else []
    if weighting == "single":
        return [0.0] * (n - 1) + [1.0] if n else []
    if weighting == "prior":
        pri = [1.0] * n if not priors else [float(p) for p in priors]
        ensemble_weights([0.0] * n, pri)  # the same checks of the priors as eq. 5
        return [p / sum(pri) for p in pri]
    conf = [grounding_confidence(o.token_logprobs, mode) for o in outs]
    # under either reading, a model without a usable point gets weight 0 (its logit is -inf), even
    # when its answer had digits (a confidence): its share would otherwise be taken from the others
    conf = [c if o.point is not None else -math.inf for c, o in zip(conf, outs)]
    return ensemble_weights(conf, priors or None)


def coepg_reward(
    pred: ParseResult | Action | None,
    gt: GroundTruth,
    *,
    grounding: Sequence[GroundingOutput | Mapping[str, Any]] = (),
    cfg: CoEPGConfig = CoEPGConfig(),
) -> RewardResult:
    """Co-EPG planning reward in ``[0, 1]`` (module doc). ``grounding`` holds one output per
    grounding model for the planner's target description, in the order of ``cfg.priors`` (needed
    for coordinate actions). Components: ``format``, ``type``, ``plan`` (the configured reading
    of eq. 5), ``value``, and ``plan_logprob`` / ``plan_prob``, the plan reward under each reading
    of eq. 5 (both reported, module doc)."""
    pr = as_parse_result(pred)
    comps = {"format": 0.0, "type": 0.0, "plan": 0.0, "value": 0.0, "plan_logprob": 0.0, "plan_prob": 0.0}
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
    if grounded_gt(g):
        plan, _, _ = coepg_plan_reward(grounding, gt, cfg)
        other = "prob" if cfg.confidence == "logprob" else "logprob"
        comps["plan"] = comps[f"plan_{cfg.confidence}"] = plan
        comps[f"plan_{other}"] = coepg_plan_reward(grounding, gt, replace(cfg, confidence=other))[0]
        total *= plan
    else:
        comps["plan"] = comps["plan_logprob"] = comps["plan_prob"] = 1.0
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


def grounded_gt(gt: Action) -> bool:
    """Whether a ground-truth step has a target element the plan must name (its plan reward, eq. 3-4):
    a coordinate action (click, long press, select, hover), or a typing step with a point
    (Multimodal-Mind2Web's TYPE acts on an element, Co-EPG Table 9; AndroidControl's input_text has
    none and is judged by its value alone)."""
    return gt.type in COORDINATE_TYPES or (gt.type is ActionType.TYPE and gt.point is not None)
