"""Notebook 07's AndroidLong part (:mod:`guirl.studies.agentcpm_androidlong` is the notebook's module):
01's main agent continued by SFT without / with memory and online GRPO on long loops (four models),
their online evaluation (Table 6 on MiniGUI's long-loop tasks, the same table on the other task
categories), the breakdowns by app and category of both task sets (Tables 8-9, Figures 7-11) and the
error taxonomy (App. D.1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.config import Config
from guirl.data.splits import load_splits
from guirl.train.launch import SFT_ENTRY, Stage

__all__ = [
    "AL_ROWS",
    "androidlong_configs",
    "androidlong_stages",
    "androidlong_agent",
    "TASK_SETS",
    "evaluate_online",
    "combined",
    "table6",
    "by_group",
    "plot_distribution",
    "plot_by_group",
    "error_table",
    "paper_apps",
]

#: AndroidLong Table 6 rows by (memory, stage).
AL_ROWS = {
    (False, "sft"): "SFT (no memory)",
    (False, "grpo"): "+ GRPO (no memory)",
    (True, "sft"): "SFT (with memory)",
    (True, "grpo"): "+ GRPO (with memory)",
}


def _task_sets() -> dict[str, tuple[str, ...]]:
    from guirl.env.tasks import CATEGORIES
    from guirl.methods.androidlong.rl import TASK_CATEGORY

    return {"long_loop": (TASK_CATEGORY,), "other": tuple(c for c in CATEGORIES if c != TASK_CATEGORY)}


#: The online task sets of 07's AndroidLong evaluation by name: ``long_loop``, AndroidLong's long
#: looping tasks (Table 6; MiniGUI's category its GRPO trains on), and ``other``, MiniGUI's other five
#: categories (the same table as a separate one: how the long-loop training carries over).
TASK_SETS: dict[str, tuple[str, ...]] = _task_sets()


# ============================================================================ AndroidLong: stages
def androidlong_configs(cfg: Config) -> dict[bool, Config]:
    """The run config of the models without (``False``) and with (``True``) memory
    (:func:`guirl.methods.androidlong.config.variant_updates`)."""
    from guirl.methods.androidlong.config import variant_updates

    return {memory: cfg.replace(variant_updates(cfg, memory=memory)) for memory in (False, True)}


def androidlong_stages(
    cfgs: Mapping[bool, Config], *, data_dir: Path, start: Path, run_dir: Path
) -> tuple[list[Stage], list[Stage]]:
    """``(sft, grpo)``: per memory setting a ``records`` SFT stage from ``start`` (01's main agent) on
    the expert's training trajectories written without / with memory
    (:func:`guirl.methods.androidlong.memory.memory_records`, saved under ``run_dir``), and a GRPO
    stage (role ``androidlong``) from it. Folders ``androidlong_sft_<tag>`` / ``androidlong_grpo_<tag>``
    (tag ``nomem`` / ``mem``)."""
    from guirl.methods.androidlong.memory import memory_records
    from guirl.prompts import prompt_spec
    from guirl.train.data import write_records
    from guirl.train.rl import RL_ENTRY

    train = load_splits(data_dir)["train"]
    sft, grpo = [], []
    for memory, c in cfgs.items():
        tag = "mem" if memory else "nomem"
        m = c.model
        records = [
            r
            for h in c.sft.histories
            for r in memory_records(
                train.episodes,
                prompt_spec(c, h),
                memory=memory,
                image_root=train.image_root,
                min_pixels=m.min_pixels,
                max_pixels=m.max_pixels,
            )
        ]
        path = write_records(run_dir / f"androidlong_records_{tag}.jsonl", records)
        s = Stage(
            "records", SFT_ENTRY, c, {"data": data_dir, "records": path}, start, run_dir / f"androidlong_sft_{tag}"
        )
        sft.append(s)
        grpo.append(
            Stage(
                f"androidlong_{tag}",
                RL_ENTRY,
                c,
                {"data": data_dir},
                s.output_dir / "final",
                run_dir / f"androidlong_grpo_{tag}",
            )
        )
    return sft, grpo


# ============================================================================ AndroidLong: online
def androidlong_agent(cfg: Config, source: Any) -> Any:
    """The agent of one AndroidLong model: a :class:`~guirl.methods.androidlong.memory.MemoryAgent`
    when ``androidlong.memory``, else the plain policy (``source``: a stage result)."""
    from guirl.methods.androidlong.config import section
    from guirl.methods.androidlong.memory import MemoryAgent
    from guirl.prompts import prompt_spec
    from guirl.studies.shared.evaluation import eval_policy

    policy = eval_policy(cfg, source)
    if not section(cfg).memory:
        return policy
    spec = prompt_spec(cfg, cfg.eval.histories[0])
    return MemoryAgent(policy, spec, min_pixels=cfg.model.min_pixels, max_pixels=cfg.model.max_pixels)


def evaluate_online(
    cfgs: Mapping[bool, Config],
    results: Mapping[tuple[bool, str], Any],
    *,
    categories: Sequence[str] | None = None,
    progress: bool = False,
):
    """Every AndroidLong model (:data:`AL_ROWS`) played online on the same tasks and runs
    (:func:`guirl.studies.shared.evaluation.evaluate_online` with its own config: the AndroidLong
    protocol of ``eval``), ``{row: OnlineEvaluation}``; ``categories``: tasks of these MiniGUI
    categories only (a :data:`TASK_SETS` value; ``None``: every category)."""
    from guirl.studies.shared import evaluation as ev

    out = {}
    for (memory, stage), row in AL_ROWS.items():
        c = cfgs[memory]
        agent = androidlong_agent(c, results[(memory, stage)])
        out[row] = ev.evaluate_online(c, agent, categories=categories, progress=progress)
    return out


def combined(*evals: Mapping[str, Any]) -> dict[str, Any]:
    """The online evaluations of several task sets (:func:`evaluate_online` results with the same
    models) as one per model: its episodes of every set (task ids differ between sets:
    :func:`guirl.studies.shared.evaluation.online_prefix`), the runs of each set joined run by run,
    the summary over all of them. A model missing from a set is a ``ValueError`` naming it."""
    from guirl.metrics.summary import summarize_online
    from guirl.studies.shared.evaluation import OnlineEvaluation

    names = list(evals[0]) if evals else []
    out = {}
    for name in names:
        parts = []
        for i, e in enumerate(evals):
            if name not in e:
                raise ValueError(f"combined: model {name!r} is not in task set {i} (models: {sorted(e)})")
            parts.append(e[name])
        if len({p.history for p in parts}) != 1 or len({len(p.runs) for p in parts}) != 1:
            raise ValueError(f"combined: model {name!r} played its task sets with other histories or runs")
        runs = [[r for p in parts for r in p.runs[k]] for k in range(len(parts[0].runs))]
        merged = OnlineEvaluation(history=parts[0].history, runs=runs)
        merged.episodes = [row for p in parts for row in p.episodes]
        merged.summary = summarize_online(runs)
        out[name] = merged
    return out


def table6(evals: Mapping[str, Any]) -> pd.DataFrame:
    """AndroidLong Table 6 layout: per model Task SR and Subgoal SR (%) as mean and std over runs,
    ``mean ± std`` as text too, runs and tasks."""
    rows = []
    for name, ev in evals.items():
        s = ev.summary
        n_tasks = len({e["task_id"] for e in ev.episodes})
        rows.append(
            {
                "model": name,
                "Task SR": s["task_sr"],
                "Task SR std": s["task_sr_std"],
                "Subgoal SR": s["subgoal_sr"],
                "Subgoal SR std": s["subgoal_sr_std"],
                "Task SR (mean ± std)": f"{s['task_sr']:.1f} ± {s['task_sr_std']:.1f}",
                "n_runs": s["n_runs"],
                "n_tasks": n_tasks,
            }
        )
    return pd.DataFrame(rows)


def _task_apps(cfg: Config, task_sets: Sequence[Sequence[str] | None]) -> dict[str, str]:
    """The main app (``task.apps[0]``) of every online task of the runs of each task set (its
    categories; ``None``: every category)."""
    from guirl.studies.shared.evaluation import online_tasks

    return {
        t.task_id: t.apps[0]
        for cats in task_sets
        for k in range(cfg.eval.n_seeds)
        for t in online_tasks(cfg, k, same_tasks=cfg.eval.online_same_tasks, categories=cats)
    }


def by_group(
    cfg: Config, evals: Mapping[str, Any], key: str, task_sets: Sequence[Sequence[str] | None] = (None,)
) -> pd.DataFrame:
    """AndroidLong Tables 8-9 layout (``key="app"``; ``"category"``: the layout per task category of
    Figures 8-9): one row per (model, group) with ``Subgoal SR`` and ``Task SR`` as fractions (the
    tables' unit), ``Task SR std`` over runs and ``n_tasks``. A task's app is its main one;
    ``task_sets``: the categories of the task sets ``evals`` played (:data:`TASK_SETS` values;
    ``None``: every category), which say where its apps are read from."""
    apps = _task_apps(cfg, task_sets) if key == "app" else {}
    rows = []
    for name, ev in evals.items():
        df = pd.DataFrame(ev.episodes)
        if key == "app":
            missing = sorted(set(df["task_id"]) - set(apps))
            if missing:
                raise ValueError(
                    f"by_group: tasks {missing[:3]} of {name!r} are in none of the task sets {list(task_sets)}"
                )
        df["app"] = df["task_id"].map(apps) if key == "app" else None
        for group, g in df.groupby(key, sort=True):
            per_run = g.groupby("run")["success"].mean()
            rows.append(
                {
                    "model": name,
                    key: group,
                    "Subgoal SR": float(g["subgoal_rate"].mean()),
                    "Task SR": float(g["success"].astype(float).mean()),
                    "Task SR std": float(per_run.std(ddof=0)),
                    "n_tasks": int(g["task_id"].nunique()),
                }
            )
    return pd.DataFrame(rows)


def plot_distribution(evals: Mapping[str, Any]):
    """AndroidLong Figure 7 analogue: the distribution of Subgoal SR over (task, model) pairs (each
    task's Subgoal SR averaged over runs), one histogram per model, stacked. Returns ``(figure,
    data)``."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    rows = []
    for name, ev in evals.items():
        df = pd.DataFrame(ev.episodes).groupby("task_id")["subgoal_rate"].mean()
        rows += [{"model": name, "task_id": t, "subgoal_sr": float(v)} for t, v in df.items()]
    data = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(6, 3))
    sns.histplot(data=data, x="subgoal_sr", hue="model", bins=np.linspace(0, 1, 11), multiple="stack", ax=ax)
    ax.set_xlabel("Subgoal SR of a task (mean over runs)")
    ax.set_title("Subgoal SR over task-model pairs")
    fig.tight_layout()
    return fig, data


def plot_by_group(table: pd.DataFrame, key: str):
    """AndroidLong Figures 8-11 analogues: Task SR and Subgoal SR per ``key`` (category or app), one
    bar per model, two panels. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for ax, metric in zip(axes, ("Task SR", "Subgoal SR")):
        sns.barplot(data=table, x=key, y=metric, hue="model", ax=ax)
        ax.set_title(f"{metric} by {key}")
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=30)
        ax.set_ylim(0, 1)
    fig.tight_layout()
    return fig


def error_table(evals: Mapping[str, Any]) -> pd.DataFrame:
    """AndroidLong App. D.1: per model, how many of its online episodes (all runs) fail in each kind
    of :func:`guirl.methods.androidlong.errors.classify_failure`, and how many succeed."""
    from guirl.methods.androidlong.errors import error_counts

    return pd.DataFrame([{"model": name, **error_counts(ev.episodes)} for name, ev in evals.items()])


def paper_apps(by_app: pd.DataFrame) -> pd.DataFrame:
    """Our four models' per-app cells as AndroidLong's rows of Tables 8-9 (``AndroidLong (ours)
    <row>``) for the apps MiniGUI shares with AndroidLong (Calendar: Table 8, Contacts: Table 9)."""
    rows = []
    for app, table in (("calendar", "Table 8"), ("contacts", "Table 9")):
        for r in by_app[by_app["app"] == app].to_dict(orient="records"):
            for metric in ("Subgoal SR", "Task SR"):
                rows.append(
                    {
                        "table": table,
                        "row": f"AndroidLong (ours) {r['model']}",
                        "column": f"{app.capitalize()} {metric}",
                        "ours": float(r[metric]),
                    }
                )
    return pd.DataFrame(rows, columns=["table", "row", "column", "ours"])
