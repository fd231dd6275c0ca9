"""Co-EPG's own evaluation (Co-EPG Sec. 5.1, App. A; Tables 1-2 and 6-7).

* the protocol (:func:`eval_protocol`): on AndroidControl (and MiniGUI) ``coepg``, where a predicted
  point is mapped to the smallest visible element containing it and must be the gt point's element
  (App. A, UGround's mapping; :func:`guirl.metrics.scoring_boxes` gives the rule every element of the
  screen); on Multimodal-Mind2Web ``coepg_mind2web`` (Sec. 5.1: Ele.Acc, Op.F1, Step SR);
* the levels (:func:`eval_levels`): Table 2 reports AndroidControl at the High level (goal only)
  and the Low level (goal and step instruction, Table 12's low-level prompt), and their average;
  the dual model is put at a level with :func:`agent_at_level`;
* the tables: :func:`mind2web_table` (Table 1 / 6: Ele.Acc, Op.F1 and Step SR per test split, each
  macro-averaged over tasks as Mind2Web reports them, and Avg SR, the mean of the three Step SRs)
  and :func:`androidcontrol_table` (Table 2 / 7: Step Acc at High and Low and Avg Acc, their mean).

Records are the prediction records of :func:`guirl.studies.shared.evaluation.evaluate_offline`
(``model``, ``split``, ``exact``, ``gt_action``, ``pred_action``, ``gt_box``, ``episode_id``) with a
``level`` label (``"High"`` when absent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from guirl.methods.coepg.config import MIND2WEB_SOURCES
from guirl.methods.coepg.prompts import LOW_TEMPLATES, PlannerPromptSettings, at_level

__all__ = [
    "MIND2WEB_SOURCES",
    "MIND2WEB_SPLITS",
    "eval_protocol",
    "eval_levels",
    "agent_at_level",
    "level_spec",
    "mind2web_table",
    "androidcontrol_table",
]

#: Co-EPG Table 1's test splits, in its column order (cross-task, cross-website, cross-domain).
MIND2WEB_SPLITS: tuple[str, ...] = ("test_task", "test_website", "test_domain")


def eval_protocol(source: str) -> str:
    """The protocol Co-EPG scores ``source`` with (module doc): ``coepg_mind2web`` on Mind2Web,
    ``coepg`` (the method's ``eval_protocol``) elsewhere."""
    return "coepg_mind2web" if source in MIND2WEB_SOURCES else "coepg"


def eval_levels(settings: PlannerPromptSettings) -> tuple[str, ...]:
    """The instruction levels Co-EPG reports for a planner prompt: ``("High", "Low")`` for
    AndroidControl's Table 12 prompt (Table 2), ``("High",)`` for any other (Mind2Web's Table 9,
    this project's layout)."""
    return ("High", "Low") if settings.user_template in LOW_TEMPLATES else ("High",)


def agent_at_level(agent: Any, level: str) -> Any:
    """``agent`` answering at ``level``: a :class:`~guirl.methods.coepg.agent.PlannerGrounderAgent`
    copy whose planner prompt is the level's (:func:`guirl.methods.coepg.prompts.at_level`; the
    models are shared). Any other agent or policy is returned as is (its prompt spec sets the
    level: ``use_step_instruction``)."""
    from copy import copy

    from guirl.methods.coepg.agent import PlannerGrounderAgent

    if not isinstance(agent, PlannerGrounderAgent):
        return agent
    out = copy(agent)
    out.settings = at_level(agent.settings, level)
    return out


def _pct(x: float) -> float:
    return 100.0 * x if math.isfinite(x) else math.nan


def mind2web_table(
    records: Sequence[Mapping[str, Any]], models: Sequence[str], splits: Sequence[str] = MIND2WEB_SPLITS
) -> pd.DataFrame:
    """Co-EPG Table 1 / 6 layout (%): one row per model, ``"<split> Ele.Acc"``, ``"<split> Op.F1"``,
    ``"<split> Step SR"`` per test split (each metric averaged over a task's steps, then over tasks:
    :func:`guirl.metrics.mind2web.mind2web_metrics`), ``Avg SR`` (the mean of the splits' Step SR,
    Table 1's last column) and ``n_steps``. Steps are scored under ``coepg_mind2web``
    (:func:`guirl.metrics.mind2web.score_m2w_protocol_step`: the element is right when the point
    lies in the target's box, Op.F1 of the operation strings, Step SR both)."""
    from guirl.actions import Action
    from guirl.metrics.mind2web import mind2web_metrics, score_m2w_protocol_step

    rows = []
    for m in models:
        row: dict[str, Any] = {"model": m}
        srs, n = [], 0
        for sp in splits:
            mine = [r for r in records if r["model"] == m and r["split"] == sp]
            scores = [
                score_m2w_protocol_step(
                    str(r["episode_id"]),
                    Action.from_dict(r["pred_action"]) if r.get("pred_action") else None,
                    Action.from_dict(r["gt_action"]),
                    tuple(r["gt_box"]) if r.get("gt_box") else (0.0, 0.0, 0.0, 0.0),
                    "coepg_mind2web",
                )
                for r in mine
            ]
            met = mind2web_metrics(scores)
            row[f"{sp} Ele.Acc"] = _pct(float(met["ele_acc"]))
            row[f"{sp} Op.F1"] = _pct(float(met["op_f1"]))
            row[f"{sp} Step SR"] = _pct(float(met["step_sr"]))
            srs.append(row[f"{sp} Step SR"])
            n += int(met["n_steps"])
        row["Avg SR"] = sum(srs) / len(srs) if srs and all(math.isfinite(x) for x in srs) else math.nan
        row["n_steps"] = n
        rows.append(row)
    return pd.DataFrame(rows)


def androidcontrol_table(records: Sequence[Mapping[str, Any]], models: Sequence[str]) -> pd.DataFrame:
    """Co-EPG Table 2 / 7 layout (%): one row per model, ``High`` and ``Low`` (Step Acc: the share of
    exact steps at each level, the counted steps of every test split pooled), ``Avg Acc`` (their
    mean, Table 2's last column; NaN when a level was not evaluated), ``n High`` / ``n Low``."""
    rows = []
    for m in models:
        row: dict[str, Any] = {"model": m}
        for level in ("High", "Low"):
            vals = [
                float(r["exact"])
                for r in records
                if r["model"] == m and r.get("level", "High") == level and r.get("counted", True)
            ]
            row[level] = 100.0 * sum(vals) / len(vals) if vals else math.nan
            row[f"n {level}"] = len(vals)
        row["Avg Acc"] = (row["High"] + row["Low"]) / 2
        rows.append(row)
    return pd.DataFrame(rows, columns=["model", "High", "Low", "Avg Acc", "n High", "n Low"])


def level_spec(spec: Any, level: str) -> Any:
    """A :class:`~guirl.prompts.PromptSpec` at ``level``: the step instruction shown at ``"Low"``
    (an end-to-end model's prompt at Co-EPG's Low setting)."""
    return replace(spec, use_step_instruction=level == "Low")
