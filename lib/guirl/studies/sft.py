"""Notebook 01 (``01_sft``): grounding pre-training and the SFT agents, their training curves, and
training length as an axis.

The agents themselves (which ones, their configs and stages) are
:mod:`guirl.studies.shared.agents`, which notebook 08 shares; evaluation is
:mod:`guirl.studies.shared.evaluation`.

* :func:`stage_overview` / :func:`loss_curves` / :func:`plot_loss_curves`: what each stage
  trained (steps, seconds, records, where it resumed) and its loss curve.
* :func:`checkpoint_curve` / :func:`curve_table` / :func:`plot_curve`: every checkpoint a stage
  kept (``sft.save_total_limit: null`` keeps them all) scored on the same test steps, TM / GR / SR
  with 95% intervals against the optimizer step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from guirl.config import Config
from guirl.data.splits import Split

__all__ = [
    "stage_overview",
    "loss_curves",
    "plot_loss_curves",
    "checkpoint_steps",
    "checkpoint_curve",
    "curve_table",
    "plot_curve",
]


def stage_overview(stages: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per trained stage (``train_agents``' result): optimizer steps, training seconds,
    training records and the checkpoint it resumed from (``None``: trained from the start or
    reused finished)."""
    return pd.DataFrame(
        [
            {
                "stage": name,
                "steps": r["global_step"],
                "seconds": r["train_seconds"],
                "records": r["n_records"],
                "resumed_from": r["resumed_from"],
            }
            for name, r in stages.items()
        ]
    )


def loss_curves(stages: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Long table ``stage, step, loss`` of every stage's logged training loss."""
    return pd.DataFrame(
        [
            {"stage": name, "step": h["step"], "loss": h["loss"]}
            for name, r in stages.items()
            for h in r["log_history"]
            if "loss" in h
        ],
        columns=["stage", "step", "loss"],
    )


def plot_loss_curves(curves: pd.DataFrame):
    """One panel per stage of :func:`loss_curves`: the training loss against the optimizer step."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    names = list(dict.fromkeys(curves["stage"]))
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(5 * max(1, len(names)), 3), squeeze=False)
    for ax, name in zip(axes[0], names):
        sns.lineplot(data=curves[curves["stage"] == name], x="step", y="loss", marker=".", ax=ax)
        ax.set_title(f"{name} loss")
        ax.set_xlabel("optimizer step")
    fig.tight_layout()
    return fig


#: A training stage's checkpoint folder: ``checkpoint-<optimizer step>`` (transformers' naming).
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


def checkpoint_steps(stage_dir: Path) -> list[int]:
    """Optimizer steps of the ``checkpoint-<step>`` folders in a training stage's output folder,
    ascending. A stage keeps ``sft.save_total_limit`` of them (``null``: every ``save_steps``-th
    step); none raises ``FileNotFoundError`` naming the folder."""
    stage_dir = Path(stage_dir)
    found = sorted(
        int(m.group(1)) for p in stage_dir.glob("checkpoint-*") if p.is_dir() and (m := _CHECKPOINT.fullmatch(p.name))
    )
    if not found:
        raise FileNotFoundError(
            f"{stage_dir}: no checkpoint-<step> folder -- train the stage with sft.save_total_limit: null "
            "(and sft.save_steps at the spacing wanted) to keep its checkpoints"
        )
    return found


def checkpoint_curve(
    cfg: Config,
    stage_dir: Path,
    splits: Mapping[str, Split],
    *,
    history: str,
    steps: Sequence[int] | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Prediction records of a stage's checkpoints (``steps``, default all of
    :func:`checkpoint_steps`) on the same test steps (``eval.max_test_steps`` per split) at one
    ``history`` setting, so checkpoints compare paired. ``cfg`` is the stage's own config (its
    instruction level prompts the model). Each record carries ``step`` (the checkpoint's optimizer
    step) and the model name ``"step <n>"``; a step the folder does not hold raises ``ValueError``
    naming the folder and the steps it holds.

    A checkpoint of a longer run is the model a run of ``n`` steps would give only where the
    learning-rate schedule up to ``n`` does not depend on ``max_steps``: ``constant_with_warmup``
    with the same warmup length (``sft.warmup_ratio`` is a fraction of ``max_steps``, rounded up:
    0.07 of 280 and 0.0285714 of 700 are both 20 steps); cosine and linear decay differ."""
    from guirl.studies.shared import evaluation as ev

    stage_dir = Path(stage_dir)
    kept = checkpoint_steps(stage_dir)
    wanted = list(kept if steps is None else steps)
    missing = [n for n in wanted if n not in kept]
    if missing:
        raise ValueError(f"{stage_dir}: no checkpoint at step(s) {missing}; it holds {kept}")
    records: list[dict[str, Any]] = []
    for n in wanted:
        records += ev.evaluation_grid(
            cfg,
            {f"step {n}": lambda n=n: ev.eval_policy(cfg, stage_dir / f"checkpoint-{n}")},
            splits,
            histories=[history],
            labels={"step": n},
            progress=progress,
        )
    return records


def curve_table(cfg: Config, records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """TM / GR / SR (%) with 95% bootstrap bounds per (``step``, history, split) of
    :func:`checkpoint_curve`'s records (:func:`guirl.studies.shared.evaluation.step_metrics`), sorted by split,
    history and step."""
    from guirl.studies.shared import evaluation as ev

    table = ev.step_metrics(cfg, records, by=("step", "history", "split"))
    return table.sort_values(["split", "history", "step"], kind="stable", ignore_index=True)


def plot_curve(table: pd.DataFrame, metrics: Sequence[str] = ("SR", "TM", "GR")):
    """One panel per (split, history) of :func:`curve_table`: each metric against the optimizer
    step, with its 95% interval as a band; returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    groups = list(table.groupby(["split", "history"], sort=False))
    palette = dict(zip(metrics, sns.color_palette(n_colors=len(metrics))))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.2), squeeze=False, sharey=True)
    for ax, ((split, history), g) in zip(axes[0], groups):
        for metric in metrics:
            sns.lineplot(x=g["step"], y=g[metric], marker="o", label=metric, color=palette[metric], ax=ax)
            ax.fill_between(g["step"], g[f"{metric}_lo"], g[f"{metric}_hi"], alpha=0.2, color=palette[metric])
        ax.set_title(f"{split}, {history}")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("%")
    fig.tight_layout()
    return fig
