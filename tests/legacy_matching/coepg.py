"""Frozen copy of ``lib/guirl/methods/coepg/reward.py`` at commit c7e8c23 (before the matching engine); tests only."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from guirl.actions.types import COORDINATE_TYPES, TEXT_TYPES, Action, ParseResult
from guirl.geometry import Point
from legacy_matching.rewards_base import (
    GroundTruth,
    RewardResult,
    as_parse_result,
    click_hit,
    non_coordinate_args_match,
    text_matches,
    type_matches,
)

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
    we could read; ``value_f1_threshold`` 0.5 with a strict ``>`` as the brief states."""

    priors: tuple[float, ...] = ()
    confidence: Literal["logprob", "prob"] = "logprob"
    value_f1_threshold: float = 0.5
    hit_radius: float | None = 0.14  # fallback only when the gt has no box (not from the paper)


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
    radius = cfg.hit_radius if gt.box is None else None
    hits = [click_hit(o.point, gt, radius=radius, include_candidates=False) for o in outs]
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
    if not type_matches(a, g):
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
        ok = text_matches(a.text, g.text, rule="f1", f1_threshold=cfg.value_f1_threshold, f1_strict=True)
        comps["value"] = 1.0 if ok else 0.0
        total *= comps["value"]
    elif g.type not in COORDINATE_TYPES:
        # scroll / press / terminate / wait: their argument is the "value" of the plan
        comps["value"] = 1.0 if non_coordinate_args_match(a, g, text_rule="f1") else 0.0
        total *= comps["value"]
    else:
        comps["value"] = 1.0
    return RewardResult(total, comps)
