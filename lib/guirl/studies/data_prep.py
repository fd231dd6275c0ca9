"""Notebook 00 (``00_data_prep``): build MiniGUI or convert a public data set, and describe it (CCPO
Table 1 and Figure 5, AndroidLong Figures 4-6).

* :func:`prepare`: the run's episodes (``data.source``): MiniGUI generated afresh (the notebooks
  that read 00 reuse the folder), or a public data set converted with ``skip_bad=True`` (bad
  records counted and listed in the manifest); either is published whole
  (:mod:`guirl.data.publish`), so a notebook reading the previous data meanwhile keeps reading it.
* :func:`plot_action_types`, :func:`plot_categories_apps`, :func:`plot_lengths`,
  :func:`plot_samples`: the figures, from :mod:`guirl.data.stats`' tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from guirl import timing
from guirl.config import Config, resolve_repo_path

__all__ = ["Prepared", "prepare", "plot_action_types", "plot_categories_apps", "plot_lengths", "plot_samples"]


@dataclass(frozen=True)
class Prepared:
    """The run's data: its folder, every episode (all splits), each split's image folder, and how
    many bad records the conversion skipped (0 for MiniGUI)."""

    out_dir: Path
    episodes: list[Any]
    image_root: dict[str, Path]
    skipped: int


def prepare(cfg: Config) -> Prepared:
    """Build MiniGUI (``data.source: minigui``; generated afresh so a changed simulator or expert
    shows up) or convert ``data.source`` from ``data.path`` into ``data/<profile>/<source>``."""
    with timing.phase("data", "dataset"):
        return _prepare(cfg)


def _prepare(cfg: Config) -> Prepared:
    from guirl.data.loaders import convert_dataset
    from guirl.data.publish import build_lock, publish
    from guirl.data.splits import load_splits
    from guirl.env.export import MINIGUI_SPLITS
    from guirl.paths import data_dir
    from guirl.studies.shared.inputs import minigui_dir

    source = cfg.data.source
    if source == "minigui":
        out_dir = minigui_dir(cfg, rebuild=True)
        prepared = load_splits(out_dir)
        episodes = [e for split in MINIGUI_SPLITS for e in prepared[split].episodes]
        roots = {split: Path(prepared[split].image_root) for split in MINIGUI_SPLITS}
        return Prepared(out_dir, episodes, roots, 0)
    link = data_dir(cfg.profile) / source
    converted: dict[str, Any] = {}

    def convert(folder: Path) -> None:
        converted["paths"], converted["result"] = convert_dataset(
            source, resolve_repo_path(cfg.data.path), folder, skip_bad=True
        )

    with build_lock(link):  # published whole: a notebook reading the old version keeps it
        out_dir = publish(link, convert)
    paths, result = converted["paths"], converted["result"]
    roots = {e.split: Path(paths["image_root"]) for e in result.episodes}
    return Prepared(out_dir, list(result.episodes), roots, len(result.skipped))


def plot_action_types(actions: pd.DataFrame, source: str):
    """Horizontal bars of the share of steps per action type (CCPO Figure 5 analogue)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6, 3))
    sns.barplot(data=actions, y="action_type", x="share", color=sns.color_palette()[0], orient="h", ax=ax)
    ax.set_xlabel("share of steps")
    ax.set_ylabel("")
    ax.set_title(f"Action types ({source}, {int(actions['n_steps'].sum())} steps)")
    fig.tight_layout()
    return fig


def plot_categories_apps(categories: pd.DataFrame, apps: pd.DataFrame, *, top: int = 15):
    """Task categories (pie) and the ``top`` apps by tasks (bars), AndroidLong Figures 4-5 analogue."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    axes[0].pie(categories["n_tasks"], labels=categories["category"], autopct="%1.0f%%", textprops={"fontsize": 8})
    axes[0].set_title("Task categories")
    sns.barplot(data=apps.head(top), y="app", x="n_tasks", color=sns.color_palette()[0], orient="h", ax=axes[1])
    axes[1].set_xlabel("tasks")
    axes[1].set_ylabel("")
    axes[1].set_title("Apps")
    fig.tight_layout()
    return fig


def plot_lengths(lengths: pd.DataFrame):
    """Histograms of steps and subgoals per task (AndroidLong Figure 6 analogue)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(10, 3))
    for ax, col, label in zip(axes, ["n_steps", "n_subgoals"], ["steps per task", "subgoals per task"]):
        top = int(lengths[col].max()) if len(lengths) else 0
        sns.histplot(x=lengths[col], bins=list(range(0, top + 2)), discrete=True, shrink=0.85, ax=ax)
        ax.set_xlabel(label)
        ax.set_ylabel("tasks")
    fig.tight_layout()
    return fig


def plot_samples(picked: Sequence[tuple[Any, Any]], image_root: dict[str, Path]):
    """The picked ``(episode, step)`` screens with their ground-truth target box and action point
    (:func:`guirl.data.stats.draw_step`); returns ``(figure, data)`` for ``Report.figure``."""
    import matplotlib.pyplot as plt
    from PIL import Image

    from guirl.data import stats

    n = max(len(picked), 1)
    fig, axes = plt.subplots(1, n, figsize=(2.6 * n, 5), squeeze=False)
    for ax, (ep, step) in zip(axes[0], picked):
        with Image.open(image_root[ep.split] / step.screenshot) as im:
            ax.imshow(stats.draw_step(im, step))
        ax.set_title(f"{step.action.type.value}\n{ep.instruction[:28]}", fontsize=7)
    for ax in axes[0]:
        ax.axis("off")
    data = {
        "steps": [
            {"episode_id": e.episode_id, "step_id": s.step_id, "action": s.action.to_dict(), "target_box": s.target_box}
            for e, s in picked
        ]
    }
    return fig, data
