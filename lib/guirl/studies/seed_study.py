"""Notebook 08 (``08_seed_study``): training seeds as an axis of 01's agents.

* :func:`train_seeds` / :func:`seeded` / :func:`seed_start`: the training seeds of
  ``eval.n_train_seeds``, the run config at one of them and where it starts. A **training seed**
  re-draws what training draws: with ``eval.train_seed_scope: all`` the grounding and SFT data
  order (TRL's ``seed`` / ``data_seed``) and, for the random-weight tiny model (``model.path:
  tiny``), its initial weights (``guirl.models.build_tiny_model(seed=...)``; the shipped
  ``tiny-base`` and a paper checkpoint are one set of weights for every seed); with ``sft`` the
  SFT data order only, from notebook 01's grounding model. The data set, the test steps and evaluation stay those of the run's own
  ``seed``, so every seed is scored on the same steps (a paired comparison). Seed ``cfg.seed`` is
  notebook 01's run; the others train with :func:`guirl.studies.shared.agents.train_agents`.
* :func:`evaluate_seeds`: every agent of every seed (and optionally the zero-shot model) on the
  same test steps; records carry ``seed``.
* :func:`evaluate_other_goal` / :func:`other_goal`: the same agents with each test episode's goal
  replaced by another episode's (:func:`guirl.data.splits.swap_goals`); paired with the true
  goal, it measures what reading the goal is worth to each agent.
* :func:`seed_table`: step SR per (model, history, split) as the mean over seeds, the
  seed-to-seed standard deviation and a 95% two-way bootstrap interval over seeds and test steps
  (:func:`guirl.metrics.paired.paired_difference` against 0), with a permutation test of the seed
  spread; :func:`seed_targets`: the agents' in-domain mean and spread against stated targets.
* :func:`seed_conclusions`: the paired comparisons per seed, and whether each seed alone reaches
  the all-seed verdict; :func:`plot_seed_spread`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.config import Config
from guirl.data.splits import Split, swap_goals
from guirl.metrics.paired import paired_difference, paired_matrix, seed_spread_test
from guirl.studies.shared.agents import GROUNDING, sft_agents, zero_shot_source
from guirl.studies.shared.inputs import base_model_dir, upstream_result
from guirl.studies.shared.paired import PAIRED_COLUMNS, paired_table

__all__ = [
    "evaluate_other_goal",
    "evaluate_seeds",
    "other_goal",
    "plot_seed_spread",
    "seed_conclusions",
    "seed_start",
    "seed_table",
    "seed_targets",
    "seeded",
    "train_seeds",
]


def train_seeds(cfg: Config) -> list[int]:
    """The ``eval.n_train_seeds`` training seeds: ``seed``, ``seed + 1``, ..."""
    return [cfg.seed + k for k in range(cfg.eval.n_train_seeds)]


def seed_start(cfg: Config, seed: int) -> dict[str, Any]:
    """Where training seed ``seed`` of ``cfg`` starts: ``train_agents``' ``base_model`` and
    ``grounding`` keywords, by ``eval.train_seed_scope``.

    * ``"all"``: the seed re-draws everything training draws: the base model of this seed
      (:func:`guirl.studies.shared.inputs.base_model_dir`: the random tiny model built with it; the
      shipped ``tiny-base`` is the same for every seed) and, when ``grounding.enabled``, its own
      grounding run.
    * ``"sft"``: the seed re-draws SFT only: every seed starts from notebook 01's grounding model
      (the run's own seed; the base model itself without grounding). A paper profile's seed does
      this in either scope, since its base is one pretrained checkpoint and it has no grounding.

    Seed ``cfg.seed`` is notebook 01's run in both scopes (:func:`guirl.studies.shared.agents.upstream_agents`)."""
    if cfg.eval.train_seed_scope == "all" or seed == cfg.seed:
        return {"base_model": base_model_dir(seeded(cfg, seed)), "grounding": cfg.grounding.enabled}
    if not cfg.grounding.enabled:
        return {"base_model": base_model_dir(cfg), "grounding": False}
    return {"base_model": Path(upstream_result(cfg, "01_sft", GROUNDING)["final"]), "grounding": False}


def seeded(cfg: Config, seed: int) -> Config:
    """``cfg`` with ``seed`` replaced (the training seed; ``Config.replace``). Pass it to training
    only: the data set and evaluation keep the run's own seed
    (:func:`guirl.studies.shared.inputs.dataset_dir` of the run's config)."""
    return cfg.replace({"seed": int(seed)})


def evaluate_seeds(
    cfg: Config,
    stages_by_seed: Mapping[int, Mapping[str, Mapping[str, Any]]],
    splits: Mapping[str, Split],
    *,
    history: str,
    zero_shot: bool = True,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Prediction records of every agent (and, with ``zero_shot``, of the model it started from),
    for every training seed, on the same test steps (``eval.max_test_steps`` per split) at one
    ``history`` setting; each record carries ``seed``. Agents are prompted at their own
    instruction level (their config from :func:`guirl.studies.shared.agents.sft_agents`)."""
    from guirl.studies.shared import evaluation as ev

    records: list[dict[str, Any]] = []
    agents = sft_agents(cfg)
    for seed, stages in stages_by_seed.items():
        labels = {"seed": int(seed)}
        if zero_shot:
            src = zero_shot_source(stages)
            records += ev.evaluation_grid(
                cfg,
                {"zero-shot": lambda src=src: ev.eval_policy(cfg, src)},
                splits,
                histories=[history],
                labels=labels,
                progress=progress,
            )
        for agent in agents:
            records += ev.evaluation_grid(
                agent.cfg,
                {agent.name: lambda a=agent, st=stages: ev.eval_policy(a.cfg, st[a.name])},
                splits,
                histories=[history],
                labels=labels,
                progress=progress,
            )
    return records


def other_goal(model: str) -> str:
    """The record label of ``model`` evaluated with other episodes' goals (:func:`evaluate_other_goal`)."""
    return f"{model} | other goal"


def evaluate_other_goal(
    cfg: Config,
    stages_by_seed: Mapping[int, Mapping[str, Mapping[str, Any]]],
    splits: Mapping[str, Split],
    *,
    history: str,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """:func:`evaluate_seeds` (agents only) on the same test steps with every episode's goal swapped
    for another episode's (:func:`guirl.data.splits.swap_goals`, seed ``cfg.seed``: the same swap
    for every training seed); records are labelled :func:`other_goal` of the agent's name.

    Paired against the agent's records under the true goal (``paired_table(cfg, records,
    [(other_goal(name), name)])``), the difference is the step SR the agent owes to the goal: near
    0 for an agent that acts from the screen alone (or from a step instruction, which is kept)."""
    swapped = {name: swap_goals(split, cfg.seed) for name, split in splits.items()}
    records = evaluate_seeds(cfg, stages_by_seed, swapped, history=history, zero_shot=False, progress=progress)
    return [{**r, "model": other_goal(r["model"])} for r in records]


def seed_table(
    records: Sequence[dict[str, Any]],
    *,
    n_boot: int,
    boot_seed: int,
    by: Sequence[str] = ("model", "history", "split"),
) -> pd.DataFrame:
    """Step SR over training seeds, one row per group of ``by`` (in order of first appearance).

    Columns: the ``by`` fields, ``n_seeds``, ``n_steps`` (the protocol's counted steps, the same
    for every seed), ``SR`` (%, mean over seeds and steps), ``seed_std`` (sample standard
    deviation of the per-seed SR over seeds, points; ``nan`` with one seed), ``SR_lo`` /
    ``SR_hi`` (95% two-way percentile bootstrap over seeds and steps), ``half_width``
    (``(SR_hi - SR_lo) / 2``), ``per_seed`` (each seed's SR, in seed order) and, from a
    permutation test of the seeds at each step (:func:`guirl.metrics.paired.seed_spread_test`,
    ``n_boot`` draws, seed ``boot_seed``), ``seed_std_null`` (points: the mean seed std that the
    test steps alone give when the seeds are equally good) and ``seed_std_p`` (the p-value of
    ``seed_std`` against it; below 0.05 the seeds differ by more than the steps explain; ``nan``
    with one seed). Records need
    ``seed``, ``episode_id``, ``step_id`` and ``exact``; a seed that lacks a step another seed
    has raises ``ValueError`` naming the group (the seeds would not be comparable)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    rows = []
    for key, group in groups.items():
        counted = [r for r in group if r.get("counted", True)]
        m, seeds, steps = paired_matrix(
            counted, value="exact", seed_key="seed", step_keys=("episode_id", "step_id"), name=f"records {key}"
        )
        per_seed = 100.0 * m.mean(axis=1)
        d = paired_difference(np.zeros_like(m), m, n_boot=n_boot, seed=boot_seed)
        spread = seed_spread_test(m, n_perm=n_boot, seed=boot_seed)
        rows.append(
            {
                **dict(zip(by, key)),
                "n_seeds": len(seeds),
                "n_steps": len(steps),
                "SR": 100.0 * float(m.mean()),
                "seed_std": float(np.std(per_seed, ddof=1)) if len(seeds) > 1 else math.nan,
                "SR_lo": 100.0 * d.lo,
                "SR_hi": 100.0 * d.hi,
                "half_width": 50.0 * (d.hi - d.lo),
                "per_seed": ", ".join(f"{s}: {v:.1f}" for s, v in zip(seeds, per_seed)),
                "seed_std_null": 100.0 * spread.null_mean,
                "seed_std_p": spread.p_value,
            }
        )
    return pd.DataFrame(rows)


def seed_conclusions(cfg: Config, records: Sequence[dict[str, Any]], pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Would one training seed alone reach the conclusion all seeds reach? :func:`paired_table` on
    each seed's records (interval over test steps only), with ``seed``, ``verdict_all_seeds``
    (the verdict over every seed and step) and ``same_conclusion``."""
    overall = paired_table(cfg, records, pairs)[["A", "B", "split", "history", "verdict"]]
    seeds = sorted({r["seed"] for r in records})
    frames = [paired_table(cfg, [r for r in records if r["seed"] == s], pairs).assign(seed=s) for s in seeds]
    per_seed = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*PAIRED_COLUMNS, "seed"])
    out = per_seed.merge(overall, on=["A", "B", "split", "history"], suffixes=("", "_all_seeds"), how="left")
    out["same_conclusion"] = out["verdict"] == out["verdict_all_seeds"]
    return out[
        [
            "A",
            "B",
            "seed",
            "split",
            "history",
            "diff",
            "lo",
            "hi",
            "resolved",
            "verdict",
            "verdict_all_seeds",
            "same_conclusion",
        ]
    ]


#: Columns :func:`seed_targets` adds.
TARGET_COLUMNS = ("mean_ok", "std_ok", "seeds_differ")


def seed_targets(
    table: pd.DataFrame,
    agents: Sequence[str],
    *,
    mean_at_least: float,
    std_at_most: float,
    split: str = "test_in_domain",
) -> pd.DataFrame:
    """The ``agents``' rows of :func:`seed_table` on ``split`` against two targets: the mean step SR
    over seeds at least ``mean_at_least`` (``mean_ok``) and the seed-to-seed standard deviation at
    most ``std_at_most`` points (``std_ok``); ``seeds_differ``: the seed spread is more than the test
    steps alone give (permutation ``seed_std_p`` < 0.05)."""
    rows = table[(table["split"] == split) & table["model"].isin(list(agents))].assign(
        mean_ok=lambda d: d["SR"] >= mean_at_least,
        std_ok=lambda d: d["seed_std"] <= std_at_most,
        seeds_differ=lambda d: d["seed_std_p"] < 0.05,
    )
    keep = ["model", "history", "SR", "seed_std", "seed_std_null", "seed_std_p", "half_width", *TARGET_COLUMNS]
    return rows[keep].reset_index(drop=True)


def plot_seed_spread(table: pd.DataFrame, per_seed: pd.DataFrame, *, history: str):
    """Step SR per training seed (grey points) and the mean over seeds with its 95% interval over
    seeds and steps (black), one panel per split; ``table`` is :func:`seed_table`'s, ``per_seed``
    the step metrics per ``(model, split, seed)``. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    splits = list(dict.fromkeys(table["split"]))
    names = list(dict.fromkeys(table["model"]))
    fig, axes = plt.subplots(1, len(splits), figsize=(4.5 * len(splits), 3.2), sharey=True, squeeze=False)
    for ax, split in zip(axes[0], splits):
        pts = per_seed[per_seed["split"] == split]
        sns.stripplot(data=pts, x="model", y="SR", order=names, color="0.55", size=5, jitter=0.08, ax=ax)
        rows = table[table["split"] == split].set_index("model").loc[names]
        ax.errorbar(
            np.arange(len(names)) + 0.2,
            rows["SR"],
            yerr=[rows["SR"] - rows["SR_lo"], rows["SR_hi"] - rows["SR"]],
            fmt="o",
            color="black",
            capsize=4,
        )
        ax.set_title(split)
        ax.set_xlabel("")
        ax.tick_params(axis="x", labelrotation=20)
    axes[0][0].set_ylabel(f"step SR (%), {history}")
    fig.tight_layout()
    return fig
