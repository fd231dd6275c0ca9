"""Prediction records: one flat, JSON-serialisable record per scored step.

:func:`prediction_record` parses a model output with the run's output format and scores it
against the recorded step under a named protocol (:func:`guirl.metrics.score_step`). An output
that cannot be parsed is wrong in every metric and is marked (``parse_ok`` false, with the
reason), never raised. Records carry the ground truth too (:data:`PREDICTION_FIELDS`), so
another evaluator can rescore a JSONL file of them (:func:`write_predictions`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from guirl.actions import Action
from guirl.actions.formats import get_format
from guirl.data.schema import Episode, Step
from guirl.metrics.protocols import get_protocol
from guirl.metrics.step import score_step
from guirl.prompts import format_context

__all__ = ["PREDICTION_FIELDS", "SCREEN_BOX_MODES", "scoring_boxes", "prediction_record", "write_predictions"]

#: Click rules that map a point to the element under it among every element of the screen
#: (Co-EPG App. A: "the smallest visible element" containing the point, UGround's mapping).
SCREEN_BOX_MODES = frozenset({"smallest_element"})

#: Fields of one prediction record (what public scorers read).
PREDICTION_FIELDS = (
    "model",
    "split",
    "history",
    "episode_id",
    "step_id",
    "image_width",
    "image_height",
    "gt_action",
    "gt_type",
    "gt_point",
    "gt_text",
    "gt_box",
    "output",
    "parse_ok",
    "parse_reason",
    "pred_action",
    "pred_type",
    "pred_point",
    "pred_text",
    "type_match",
    "grounding",
    "exact",
    "counted",
    "score_reason",
)


def scoring_boxes(step: Step, protocol: str) -> tuple[tuple[float, float, float, float], ...]:
    """The boxes ``protocol``'s click rule reads for ``step``: every element of the screen
    (``Step.elements``) for a rule of :data:`SCREEN_BOX_MODES` when the step has elements, else
    the step's candidate boxes (the boxes around the acted element, ``docs/dataset-formats.md``)."""
    mode = get_protocol(protocol).rules.click.box_mode
    if mode in SCREEN_BOX_MODES and step.elements:
        return tuple(e.box for e in step.elements)
    return tuple(step.candidate_boxes)


def _point(a: Action | None) -> list[float] | None:
    return list(a.point) if a is not None and a.point is not None else None


def prediction_record(
    *,
    model: str,
    split: str,
    history: str,
    episode: Episode,
    t: int,
    output: str,
    output_format: str,
    protocol: str,
    min_pixels: int,
    max_pixels: int,
) -> dict[str, Any]:
    """Parse and score one model ``output`` for step ``t`` of ``episode`` (never raises on bad output).

    ``model``, ``split`` and ``history`` (a tag such as ``"1AO"``) label the record;
    ``min_pixels`` / ``max_pixels`` give the coordinate space the model saw. Points are
    normalised to ``[0, 1]`` of the screen. ``grounding`` is ``None`` on steps without a
    ground-truth coordinate; ``counted`` is ``False`` on steps the protocol leaves out of its
    step-success denominator (e.g. GUI-R1's press / wait / terminate steps). The click rule reads
    :func:`scoring_boxes`.
    """
    step = episode.steps[t]
    ctx = format_context(step.screen_size, min_pixels, max_pixels)
    parsed = get_format(output_format).parse(output, ctx)
    score = score_step(
        parsed,
        step.action,
        protocol,
        gt_box=step.target_box,
        candidate_boxes=scoring_boxes(step, protocol),
        screen_size=step.screen_size,
    )
    pred = parsed.action
    return {
        "model": model,
        "split": split,
        "history": history,
        "episode_id": episode.episode_id,
        "step_id": step.step_id,
        "image_width": step.screen_size[0],
        "image_height": step.screen_size[1],
        "gt_action": step.action.to_dict(),
        "gt_type": step.action.type.value,
        "gt_point": _point(step.action),
        "gt_text": step.action.text,
        "gt_box": list(step.target_box) if step.target_box else None,
        "output": output,
        "parse_ok": parsed.ok,
        "parse_reason": parsed.reason,
        "pred_action": pred.to_dict() if pred else None,
        "pred_type": pred.type.value if pred else None,
        "pred_point": _point(pred),
        "pred_text": pred.text if pred else None,
        "type_match": score.type_match,
        "grounding": score.grounding,
        "exact": score.exact,
        "counted": score.counted,
        "score_reason": score.reason,
    }


def write_predictions(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """JSONL of records (sorted keys: stable bytes for the same predictions); parents created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n")
    return path
