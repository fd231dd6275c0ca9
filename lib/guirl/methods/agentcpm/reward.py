"""AgentCPM-GUI RFT reward in ``{-1, 0, 1}`` (Zhang et al., "AgentCPM-GUI: Building Mobile-Use Agents
with Reinforcement Fine-Tuning", arXiv 2506.01391, Sec. 2.5.1, GRPO).

``-1`` when the output cannot be parsed (format error: malformed structure or missing fields),
``0`` when it parses but the action is wrong, ``1`` when type and arguments are right (Sec. 2.5.1).
Correctness is the matching rule set ``AgentCPMConfig.rules`` (:data:`guirl.matching.RULES`):

* ``"agentcpm_reward"`` (default, the paper): a POINT is right only inside the gt box (Sec.
  2.5.1, ACPM-15 in ``docs/fidelity/agentcpm.md``); on a step without a gt box, where the paper
  is silent, within 0.14 of the gt point;
* ``"agentcpm_reward_code"``: inside the gt box, else within 0.14 of the gt point (the released
  evaluator's ``_TAP_DISTANCE_THRESHOLD`` applied to the reward; the former default).

Both compare text by containment after lower/strip, scroll by direction (in one convention),
press by key and terminate by status (the released evaluator's argument rules; the paper states
none). The evaluator protocol ``"agentcpm"`` (TM / EM of Table 2) accepts 1.2x candidate boxes
that contain the gt point, else 0.14 (``docs/metrics.md``, "Reward rules vs evaluator").

The format check (Sec. 2.5.1: "malformed structure or missing fields") is ``AgentCPMConfig.schema``:

* ``"paper"`` (default): the output must pass the App. C.2 schema as AgentCPM-GUI's pipeline reads
  it (the strict reading ``agentcpm_paper`` of :mod:`guirl.actions.formats.agentcpm`: one JSON object
  and nothing else, integer coordinates in 0-1000, no key beyond the schema's, PRESS in HOME / BACK /
  ENTER, no ``start`` status); anything it rejects is a format failure (-1), and the action the
  strict reading gives is the one scored (ACPM-02, ACPM-05, ACPM-06);
* ``"released"``: the released schema (``APPSELECT`` and ``start`` accepted; strict reading
  ``agentcpm``);
* ``"tolerant"``: whatever this project's tolerant parser reads (fences, prose, float coordinates).

The check needs the model's text (``ParseResult.raw``); a bare :class:`Action`, or a parse result
without text, is scored as given.

Not reproduced: the released ``rft/trainer/utils/gui_eval.py`` trains with shaped, partly
continuous terms (schema check, key-set match, Manhattan-distance click credit); this module is
the three-valued reward the paper states. The AndroidControl evaluation mode (0.04 radius, 5
nearest boxes) is a metric, not this reward.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from guirl.actions.types import Action, ParseResult
from guirl.rewards.base import GroundTruth, RewardResult, as_parse_result, match_gt

__all__ = ["SCHEMAS", "AgentCPMConfig", "agentcpm_action_correct", "agentcpm_reward", "schema_read"]

#: Format checks of the reward (module doc): the strict pipeline each one reads with (``None``: the
#: tolerant parser's reading stands).
SCHEMAS: tuple[str, ...] = ("paper", "released", "tolerant")
_PIPELINES = {"paper": "agentcpm_paper", "released": "agentcpm", "tolerant": None}


@dataclass(frozen=True)
class AgentCPMConfig:
    """Reward levels (AgentCPM-GUI Sec. 2.5.1) and the matching rule set the reward trains with."""

    format_error: float = -1.0  # AgentCPM-GUI Sec. 2.5.1: format failure
    wrong: float = 0.0  # AgentCPM-GUI Sec. 2.5.1: format right, answer wrong
    right: float = 1.0  # AgentCPM-GUI Sec. 2.5.1: both right
    rules: str = "agentcpm_reward"  # guirl.matching.RULES; = METHOD.reward_rules ("agentcpm_reward_code": 0.14)
    schema: str = "paper"  # AgentCPM-GUI Sec. 2.5.1 + App. C.2: the format check (SCHEMAS)

    def __post_init__(self) -> None:
        if self.schema not in SCHEMAS:
            raise ValueError(f"AgentCPMConfig.schema {self.schema!r}: use one of {list(SCHEMAS)}")


def schema_read(pr: ParseResult, schema: str = "paper") -> ParseResult:
    """``pr`` read again by the format check ``schema`` (module doc): the strict reading of its text
    (a failure names what the schema rejects), or ``pr`` itself for ``"tolerant"``, a failed parse or
    a result without text."""
    pipeline = _PIPELINES[schema]
    if pipeline is None or not pr.ok or not pr.raw:
        return pr
    from guirl.actions.formats import FormatContext, get_format

    strict = get_format("agentcpm").parse(pr.raw, FormatContext(strict=True, pipeline=pipeline))
    return strict if not strict.ok else replace(strict, thought=strict.thought or pr.thought)


def agentcpm_action_correct(pred: Action, gt: GroundTruth, cfg: AgentCPMConfig = AgentCPMConfig()) -> bool:
    """Type and arguments right under ``cfg.rules``."""
    return match_gt(pred, gt, cfg.rules).exact


def agentcpm_reward(
    pred: ParseResult | Action | None, gt: GroundTruth, *, cfg: AgentCPMConfig = AgentCPMConfig()
) -> RewardResult:
    """``-1`` unparsable or rejected by the format check ``cfg.schema``, ``0`` wrong, ``1`` right
    (module doc)."""
    pr = schema_read(as_parse_result(pred), cfg.schema)
    if not pr.ok:
        return RewardResult(cfg.format_error, {"format": 0.0, "type": 0.0, "exact": 0.0})
    assert pr.action is not None
    m = match_gt(pr.action, gt, cfg.rules)
    typ, exact = float(m.type_match), float(m.exact)
    return RewardResult(cfg.right if exact else cfg.wrong, {"format": 1.0, "type": typ, "exact": exact})
