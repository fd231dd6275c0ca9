"""Notebook 01's SFT agents as functions, and training seeds as an axis (notebook 08).

* :func:`train_agents`: grounding pre-training (``grounding.enabled``) and then every SFT agent
  of :func:`guirl.workflow.sft_agents` (the main agent, the Low-level executor), each an
  ``accelerate launch`` subprocess (:func:`guirl.train.launch.run_stage`; a finished stage is
  reused, an interrupted one resumes). Notebook 01 calls it once; notebook 08 once per seed.
* :func:`train_seeds` / :func:`seeded` / :func:`seed_start`: the training seeds of
  ``eval.n_train_seeds``, the run config at one of them and where it starts. A **training seed**
  re-draws what training draws: with ``eval.train_seed_scope: all`` the tiny model's random
  initial weights (``guirl.models.build_tiny_model(seed=...)``), the grounding and SFT data order
  (TRL's ``seed`` / ``data_seed``); with ``sft`` the SFT data order only, from notebook 01's
  grounding model. The data set, the test steps and evaluation stay those of the run's own
  ``seed``, so every seed is scored on the same steps (a paired comparison).
* :func:`evaluate_seeds`: every agent of every seed (and optionally the zero-shot model) on the
  same test steps; records carry ``seed``.
* :func:`evaluate_other_goal` / :func:`other_goal`: the same agents with each test episode's goal
  replaced by another episode's (:func:`guirl.data.splits.swap_goals`); paired with the true
  goal, it measures what reading the goal is worth to each agent.
* :func:`seed_table`: step SR per (model, history, split) as the mean over seeds, the
  seed-to-seed standard deviation and a 95% two-way bootstrap interval over seeds and test steps
  (:func:`guirl.metrics.paired.paired_difference` against 0).
* :func:`paired_table`: differences between models paired over seeds and steps
  (:func:`guirl.evaluation.paired_gain_table`); :func:`seed_conclusions`: the same per seed, and
  whether each seed alone reaches the all-seed verdict.
* Training length as an axis: :func:`checkpoint_curve` scores every checkpoint a stage kept
  (``sft.save_total_limit: null`` keeps them all) on the same test steps, :func:`curve_table` /
  :func:`plot_curve` give TM / GR / SR with 95% intervals against the optimizer step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.config import Config
from guirl.data.splits import Split, swap_goals
from guirl.metrics.paired import paired_difference, paired_matrix, seed_spread_test
from guirl.workflow import base_model_dir, sft_agents, upstream_result

__all__ = [
    "GROUNDING",
    "PAIRED_COLUMNS",
    "checkpoint_curve",
    "checkpoint_steps",
    "curve_table",
    "evaluate_other_goal",
    "evaluate_seeds",
    "other_goal",
    "paired_table",
    "plot_curve",
    "seed_conclusions",
    "seed_start",
    "seed_table",
    "seeded",
    "train_agents",
    "train_seeds",
    "upstream_agents",
    "zero_shot_source",
]

#: Key of the grounding stage in :func:`train_agents`' result (agents are keyed by their name).
GROUNDING = "grounding"


def train_agents(
    cfg: Config, *, data_dir: Path, base_model: Path, run_dir: Path, grounding: bool | None = None
) -> dict[str, dict[str, Any]]:
    """Train (or reuse) grounding and every SFT agent of ``cfg`` under ``run_dir``.

    Returns ``{"grounding": result, "<agent name>": result, ...}`` (``grounding`` only when it
    trains), each a stage's ``result.json``. ``grounding`` (default ``grounding.enabled``): train
    the grounding stage from ``base_model`` first; ``False`` where ``base_model`` is already a
    grounding model (:func:`seed_start`). The agents start from the grounding model (else from
    ``base_model``) and train in ``run_dir / agent.stage_dir``, side by side when
    ``runtime.parallel_stages`` > 1 (:func:`guirl.train.launch.run_stages`)."""
    from guirl.train.launch import run_stage, run_stages

    out: dict[str, dict[str, Any]] = {}
    start = Path(base_model)
    if cfg.grounding.enabled if grounding is None else grounding:
        out[GROUNDING] = run_stage(
            cfg, "grounding", data_dir=data_dir, base_model=start, output_dir=run_dir / "grounding"
        )
        start = Path(out[GROUNDING]["final"])
    agents = sft_agents(cfg)
    jobs = [
        dict(cfg=a.cfg, stage="sft", data_dir=data_dir, base_model=start, output_dir=run_dir / a.stage_dir)
        for a in agents
    ]
    for agent, result in zip(agents, run_stages(jobs, parallel=cfg.runtime.parallel_stages)):
        out[agent.name] = result
    return out


def zero_shot_source(stages: Mapping[str, Mapping[str, Any]]) -> str:
    """What the SFT agents started from (the zero-shot model): the grounding model when there is
    one, else the base model of the first agent."""
    if GROUNDING in stages:
        return str(stages[GROUNDING]["final"])
    first = next(iter(stages.values()))
    return str(first["base_model"])


def upstream_agents(cfg: Config) -> dict[str, dict[str, Any]]:
    """The stages notebook 01 trained at the run's own seed (under ``runs/<profile>/01_sft``),
    keyed as :func:`train_agents` keys them; :func:`guirl.workflow.upstream_result`'s error
    (naming the file and ``make nb-01_sft``) when 01 has not run."""
    stages = ([(GROUNDING, "grounding")] if cfg.grounding.enabled else []) + [
        (a.name, a.stage_dir) for a in sft_agents(cfg)
    ]
    return {name: upstream_result(cfg, "01_sft", folder) for name, folder in stages}


def train_seeds(cfg: Config) -> list[int]:
    """The ``eval.n_train_seeds`` training seeds: ``seed``, ``seed + 1``, ..."""
    return [cfg.seed + k for k in range(cfg.eval.n_train_seeds)]


def seed_start(cfg: Config, seed: int) -> dict[str, Any]:
    """Where training seed ``seed`` of ``cfg`` starts: ``train_agents``' ``base_model`` and
    ``grounding`` keywords, by ``eval.train_seed_scope``.

    * ``"all"``: the seed re-draws everything training draws: the tiny model built with this seed
      (:func:`guirl.workflow.base_model_dir`) and, when ``grounding.enabled``, its own grounding run.
    * ``"sft"``: the seed re-draws SFT only: every seed starts from notebook 01's grounding model
      (the run's own seed; the base model itself without grounding). A paper profile's seed does
      this in either scope, since its base is one pretrained checkpoint and it has no grounding.

    Seed ``cfg.seed`` is notebook 01's run in both scopes (:func:`upstream_agents`)."""
    if cfg.eval.train_seed_scope == "all" or seed == cfg.seed:
        return {"base_model": base_model_dir(seeded(cfg, seed)), "grounding": cfg.grounding.enabled}
    if not cfg.grounding.enabled:
        return {"base_model": base_model_dir(cfg), "grounding": False}
    return {"base_model": Path(upstream_result(cfg, "01_sft", GROUNDING)["final"]), "grounding": False}


def seeded(cfg: Config, seed: int) -> Config:
    """``cfg`` with ``seed`` replaced (the training seed). Pass it to training only: the data set
    and evaluation keep the run's own seed (``guirl.workflow.dataset_dir(cfg)``)."""
    return cfg.model_copy(update={"seed": int(seed)})


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
    instruction level (their config from :func:`guirl.workflow.sft_agents`)."""
    from guirl import evaluation as ev

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


#: Columns of :func:`paired_table`.
PAIRED_COLUMNS = ("A", "B", "split", "history", "A_SR", "B_SR", "diff", "lo", "hi", "resolved", "verdict")


def paired_table(cfg: Config, records: Sequence[dict[str, Any]], pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Step SR of model ``B`` minus model ``A`` for each ``(A, B)`` of ``pairs`` and each (split,
    history) both have, paired over the records' training seeds and test steps
    (:func:`guirl.evaluation.paired_gain_table`): :data:`PAIRED_COLUMNS` plus ``n_seeds`` /
    ``n_steps``. No pairs: an empty table with those columns."""
    from guirl import evaluation as ev

    columns = [*PAIRED_COLUMNS, "n_seeds", "n_steps"]
    frames = [
        ev.paired_gain_table(cfg, records, baseline=a, model=b).rename(columns={a: "A_SR", b: "B_SR"}).assign(A=a, B=b)
        for a, b in pairs
    ]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


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
    from guirl import evaluation as ev

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
    :func:`checkpoint_curve`'s records (:func:`guirl.evaluation.step_metrics`), sorted by split,
    history and step."""
    from guirl import evaluation as ev

    table = ev.step_metrics(cfg, records, by=("step", "history", "split"))
    return table.sort_values(["split", "history", "step"], kind="stable", ignore_index=True)


def plot_curve(table: pd.DataFrame, metrics: Sequence[str] = ("SR", "TM", "GR")):
    """One panel per (split, history) of :func:`curve_table`: each metric against the optimizer
    step, with its 95% interval as a band; returns the figure."""
    import matplotlib.pyplot as plt

    groups = list(table.groupby(["split", "history"], sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.2), squeeze=False, sharey=True)
    for ax, ((split, history), g) in zip(axes[0], groups):
        for metric in metrics:
            ax.plot(g["step"], g[metric], marker="o", label=metric)
            ax.fill_between(g["step"], g[f"{metric}_lo"], g[f"{metric}_hi"], alpha=0.2)
        ax.set_title(f"{split}, {history}")
        ax.set_xlabel("optimizer step")
    axes[0][0].set_ylabel("%")
    axes[0][0].legend()
    fig.tight_layout()
    return fig
