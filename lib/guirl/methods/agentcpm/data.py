"""AgentCPM-GUI's action space over recorded episodes, and the unified re-scoring of predictions.

* :func:`schema_error` / :func:`compact_episode`: the compact JSON of the paper (App. C.2 schema:
  POINT / to / duration / PRESS HOME, BACK, ENTER / TYPE / STATUS) has no open-app, answer or
  recent-apps action. AgentCPM-GUI leaves what its action space lacks out of its scores (B.5.2,
  B.6.2: "ignored in evaluation"); its data has none. A recorded episode is therefore used with
  those steps left out (step ids kept; the history of the next step shows the step before).
* :data:`FORMAT_FAMILIES` / :func:`rescore`: a prediction written in another family's format,
  parsed with that format, mapped into the unified action space
  (:func:`guirl.methods.agentcpm.mapping.to_unified`) and scored against the ground truth mapped
  the same way, under an evaluator protocol (``agentcpm``: AgentCPM-GUI's TM / EM): App. B end to
  end, on prediction files other notebooks wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from guirl.actions.types import Action, ActionError, ActionType
from guirl.data.schema import Episode, Step
from guirl.methods.agentcpm.mapping import IgnoredInEvaluation, to_unified

__all__ = ["FORMAT_FAMILIES", "compact_episode", "rescore", "schema_error"]

#: The mapping family (:data:`guirl.methods.agentcpm.mapping.FAMILIES`) of each output format that
#: has one: ``ccpo`` writes Qwen2.5-VL ``mobile_use`` arguments, so it maps as Qwen2.5-VL (Table 6).
FORMAT_FAMILIES: dict[str, str] = {
    "agentcpm": "agentcpm",
    "ccpo": "qwen_mobile_use",
    "qwen_mobile_use": "qwen_mobile_use",
    "uitars": "uitars",
    "osatlas": "osatlas",
    "osgenesis": "osgenesis",
    "odyssey": "odyssey",
    "aguvis": "aguvis",
}

_PAPER_KEYS = frozenset({"back", "home", "enter"})


def schema_error(action: Action) -> str | None:
    """Why the paper's compact JSON (App. C.2 schema) cannot write ``action``, or ``None``."""
    t = action.type
    if t in (ActionType.OPEN_APP, ActionType.ANSWER, ActionType.SELECT, ActionType.HOVER):
        return f"no {t.value!r} action in AgentCPM-GUI's schema"
    if t is ActionType.PRESS and action.key not in _PAPER_KEYS:
        return f"PRESS {action.key!r} is not HOME, BACK or ENTER"
    if t is ActionType.LONG_PRESS and action.duration_ms is not None and action.duration_ms <= 200:
        return "a POINT with a duration of at most 200 ms is a click"
    return None


def compact_episode(episode: Episode) -> Episode | None:
    """``episode`` without the steps :func:`schema_error` rejects (``None`` when none is left);
    ``extra["left_out"]`` counts them."""
    keep: list[Step] = [s for s in episode.steps if schema_error(s.action) is None]
    if not keep:
        return None
    left = len(episode.steps) - len(keep)
    return replace(episode, steps=tuple(keep), extra={**episode.extra, "left_out": left})


def rescore(
    record: Mapping[str, Any],
    step: Step,
    output_format: str,
    *,
    protocol: str = "agentcpm",
    variant: str = "paper",
    low_instruction: bool = False,
    min_pixels: int,
    max_pixels: int,
) -> dict[str, Any] | None:
    """A prediction record (:mod:`guirl.metrics.records`; its ``output`` text) re-scored through the
    unified action space: the output is parsed with ``output_format``, mapped from its family
    (:data:`FORMAT_FAMILIES`) with :func:`~guirl.methods.agentcpm.mapping.to_unified`
    (``variant``, ``low_instruction``) and scored under ``protocol`` against ``step`` (the recorded
    step: its action mapped from the ``agentcpm`` family, its boxes). ``None`` when the step is left
    out: its ground truth is outside the schema (:func:`schema_error`) or the prediction is an
    action the paper ignores in evaluation (``IgnoredInEvaluation``). A prediction the mapping
    cannot express is wrong, with the reason in ``score_reason``. Returns the record with
    ``type_match`` / ``grounding`` / ``exact`` / ``counted`` / ``parse_ok`` / ``score_reason``
    replaced and ``mapped_action`` added."""
    from guirl.actions.formats import get_format
    from guirl.metrics.step import score_step
    from guirl.prompts import format_context

    if output_format not in FORMAT_FAMILIES:
        raise KeyError(f"no mapping family for output format {output_format!r}; known: {sorted(FORMAT_FAMILIES)}")
    if schema_error(step.action) is not None:
        return None
    gt = to_unified(step.action, "agentcpm", variant=variant)  # type: ignore[arg-type]
    ctx = format_context(step.screen_size, min_pixels, max_pixels)
    parsed = get_format(output_format).parse(str(record["output"]), ctx)
    pred: Any = parsed
    why = ""
    if parsed.ok:
        assert parsed.action is not None
        try:
            pred = to_unified(
                parsed.action,
                FORMAT_FAMILIES[output_format],
                low_instruction=low_instruction,
                variant=variant,  # type: ignore[arg-type]
            )
        except IgnoredInEvaluation:
            return None
        except ActionError as e:
            pred, why = None, f"unmappable: {e}"
    score = score_step(
        pred, gt, protocol, gt_box=step.target_box, candidate_boxes=step.candidate_boxes, screen_size=step.screen_size
    )
    return {
        **record,
        "parse_ok": bool(parsed.ok),
        "type_match": score.type_match,
        "grounding": score.grounding,
        "exact": score.exact,
        "counted": score.counted,
        "score_reason": why or score.reason,
        "mapped_action": pred.to_dict() if isinstance(pred, Action) else None,
        "protocol": protocol,
    }
