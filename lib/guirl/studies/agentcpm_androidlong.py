"""Notebook 07 (``07_agentcpm_androidlong``): AgentCPM-GUI's three stages with the compact JSON
action space, and AndroidLong's memory-in-reasoning agents trained with online GRPO on long loops.
The two papers' parts are ``guirl.studies.parts.agentcpm_androidlong.agentcpm`` and ``.androidlong``
(this module names what the notebook calls); the stage table, the RL curves, the reward rise, the
paired online table and the sentences are :mod:`guirl.studies.shared` (``stages``, ``paired``).

**AgentCPM-GUI** (``methods/agentcpm``):

* data (Sec. 2.4): :func:`dedup` (intra-query de-duplication of 07's training trajectories by
  image-feature cosine similarity, :mod:`guirl.methods.agentcpm.dedup`), :func:`dedup_sweep`, and
  :func:`write_agentcpm_data`: the kept trajectories without the steps the paper's schema cannot
  write (open app, answer, recent apps: :func:`guirl.methods.agentcpm.data.compact_episode`), as a
  data folder whose ``train/images`` is a link to the source's;
* stages (:func:`stage_one`, :func:`agentcpm_stages`): Stage I (Sec. 2.3) is notebook 01's
  grounding model where the profile trains one (``grounding.enabled``, the tiny profile: reused,
  its point answers in 01's output format, so the compact JSON SFT learns its own syntax and
  [0, 1000] grid on top), else 07's own ``grounding`` stage (:func:`agentcpm_grounding_stage`)
  from the base model on the converted data set's Text2Point / Bbox2Text rows
  (:mod:`guirl.data.grounding`) in the compact JSON format with AgentCPM-GUI's prompt
  (:func:`guirl.methods.agentcpm.config.grounding_updates`); Stage II SFT in the ``agentcpm``
  format from the Stage I model (:func:`guirl.methods.agentcpm.config.sft_updates`), Stage III RFT
  = the generic ``grpo`` role with ``rl.reward: agentcpm``
  (:func:`guirl.methods.agentcpm.config.rft_updates`), one engine;
* Table 1 (:func:`grounding_rows`, :func:`table1_models`, :func:`evaluate_grounding`, :func:`table1`): Fun2Point /
  Text2Point / Bbox2Text on MiniGUI test screens; Table 2 (:func:`compact_splits`,
  :func:`rescore`, :func:`table2`): TM / EM under the ``agentcpm`` protocol, other notebooks'
  prediction files re-scored through the unified mapping; Table 3: SFT vs RFT paired; tokens per
  action (:func:`token_table`).

**AndroidLong** (``methods/androidlong``):

* four models (:func:`androidlong_configs`, :func:`androidlong_stages`): 01's main agent continued
  by SFT on the expert's trajectories without / with the memory in its reasoning
  (:func:`guirl.methods.androidlong.memory.memory_records`, a ``records`` stage each), then online
  GRPO on long-loop tasks with a Subgoal-SR reward (role ``androidlong``);
* Table 6 (:func:`evaluate_online`, :func:`table6`, ``shared.paired.online_paired``) on MiniGUI's
  long-loop tasks, and the same table on its other categories (:data:`TASK_SETS`); Tables 8-9 and
  Figures 7-11 (:func:`by_group`, :func:`plot_distribution`, :func:`plot_by_group`) and the App. D.1
  taxonomy (:func:`error_table`) over both task sets (:func:`combined`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from guirl.config import Config
from guirl.studies.parts.agentcpm_androidlong.agentcpm import (
    ACPM_LABELS,
    GROUNDING_TASKS,
    STAGE_ONE,
    Dedup,
    agentcpm_grounding_stage,
    agentcpm_stages,
    compact_splits,
    dedup,
    dedup_sweep,
    evaluate_grounding,
    grounding_rows,
    mapping_agreement,
    paper_rows_23,
    rescore,
    screenshot_tops,
    stage_one,
    table1,
    table1_models,
    table2,
    token_table,
    upstream_predictions,
    write_agentcpm_data,
)
from guirl.studies.parts.agentcpm_androidlong.androidlong import (
    AL_ROWS,
    TASK_SETS,
    androidlong_agent,
    androidlong_configs,
    androidlong_stages,
    by_group,
    combined,
    error_table,
    evaluate_online,
    paper_apps,
    plot_by_group,
    plot_distribution,
    table6,
)

__all__ = [
    "ACPM_LABELS",
    "agentcpm_grounding_stage",
    "agentcpm_stages",
    "AL_ROWS",
    "androidlong_agent",
    "androidlong_configs",
    "androidlong_stages",
    "by_group",
    "combined",
    "compact_splits",
    "Dedup",
    "dedup",
    "dedup_sweep",
    "error_table",
    "evaluate_grounding",
    "evaluate_online",
    "grounding_rows",
    "GROUNDING_TASKS",
    "mapping_agreement",
    "on_steps",
    "paper_apps",
    "paper_cells",
    "paper_rows_23",
    "plot_by_group",
    "plot_distribution",
    "plot_rl_curves",
    "rescore",
    "screenshot_tops",
    "STAGE_ONE",
    "stage_one",
    "RUN",
    "run_folder",
    "table1",
    "table1_models",
    "table2",
    "table6",
    "TASK_SETS",
    "token_table",
    "tokenizer",
    "upstream_predictions",
    "write_agentcpm_data",
]

RUN = "07_agentcpm_androidlong"


def run_folder(cfg: Config) -> Path:
    """``runs/<profile>/07_agentcpm_androidlong``."""
    from guirl.paths import runs_dir

    return runs_dir(cfg.profile) / RUN


def plot_rl_curves(curves: pd.DataFrame):
    """Mean reward per RL step, one panel per stage (rewards in each method's units)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    names = list(dict.fromkeys(curves["stage"])) or ["(none)"]
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3), squeeze=False)
    for ax, name in zip(axes[0], names):
        sns.lineplot(data=curves[curves["stage"] == name], x="step", y="reward", marker="o", ax=ax)
        ax.set_title(name)
        ax.set_xlabel("RL step")
    fig.tight_layout()
    return fig


def on_steps(records: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records whose (split, episode, step) also appears in ``reference``."""
    keys = {(r["split"], r["episode_id"], r["step_id"]) for r in reference}
    return [dict(r) for r in records if (r["split"], r["episode_id"], r["step_id"]) in keys]


def paper_cells(table: pd.DataFrame, paper_row: str, model: str, columns: Sequence[str]) -> pd.DataFrame:
    """Our ``model``'s cells of ``table`` (one row per model) as the paper's row ``paper_row``."""
    sel = table[table["model"] == model]
    if len(sel) != 1:
        raise KeyError(f"paper_cells: no single row for model {model!r}")
    return pd.DataFrame([{"row": paper_row, "column": c, "ours": float(sel.iloc[0][c])} for c in columns])


def tokenizer(cfg: Config, result: Mapping[str, Any]) -> Any:
    """The tokenizer of a trained stage (the tiny model's: Qwen2.5-VL's vocabulary)."""
    from guirl.models import load_processor

    folder = Path(result["base_model"]) if result.get("adapter") else Path(result["final"])
    return load_processor(folder, min_pixels=cfg.model.min_pixels, max_pixels=cfg.model.max_pixels).tokenizer
