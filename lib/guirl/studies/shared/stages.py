"""What notebooks show of the stages they trained: one table of their results, their RL logs as
curves, and whether RL moved the reward (02, 03, 04 and 07 use the same three).

* :func:`sft_schedule`: one row per SFT stage before it trains: records, epochs or step budget,
  batch, processes and the optimizer steps that makes.
* :func:`rl_schedule`: one row per RL stage before it trains: its role, RL steps, prompts and
  samples per step and the optimizer updates that makes.
* :func:`stage_table`: one row per stage result (SFT or RL): steps, records or samples, seconds,
  the step it resumed from, why it was skipped.
* :func:`rl_curves`: the per-step logs of RL stages as one table, keyed by the run's labels.
* :func:`reward_rise`: the mean reward of the last steps minus the first, with a bootstrap interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from guirl.studies.shared.rl_runs import rl_log
from guirl.train.launch import SFT_ENTRY, Stage

__all__ = [
    "STAGE_COLUMNS",
    "RL_SCHEDULE_COLUMNS",
    "sft_schedule",
    "rl_schedule",
    "stage_table",
    "rl_curves",
    "reward_rise",
]

#: Columns of :func:`stage_table`, in order.
STAGE_COLUMNS = (
    "stage",
    "kind",
    "role",
    "steps",
    "records",
    "generated",
    "trained",
    "seconds",
    "resumed_from",
    "skipped",
)


def sft_schedule(stages: Mapping[str, Stage]) -> pd.DataFrame:
    """The optimizer steps of each SFT stage of ``stages`` (``{label: Stage}``; RL stages are left
    out: their length is their config's ``rl.max_steps``), resolved before it trains
    (:func:`guirl.train.sft.stage_schedule`): ``stage`` (the label), ``kind`` (grounding / sft /
    records), ``records``, ``epochs`` (empty where a step budget sets the length),
    ``per_device_batch``, ``grad_accum``, ``processes``, ``global_batch``, ``optimizer_steps`` and
    ``from`` (``epochs`` or ``max_steps``). A stage's ``global_step`` once trained equals its
    ``optimizer_steps``."""
    from guirl.train.sft import stage_schedule

    rows = [
        {"stage": label, "kind": s.name, **stage_schedule(s.cfg, s.name, s.data_dir, s.other_inputs)}
        for label, s in stages.items()
        if s.entry == SFT_ENTRY
    ]
    return pd.DataFrame(rows)


#: Columns of :func:`rl_schedule`, in order.
RL_SCHEDULE_COLUMNS = (
    "stage",
    "role",
    "rl_steps",
    "prompts_per_step",
    "group_size",
    "samples_per_step",
    "mini_batches",
    "optimizer_updates",
)


def rl_schedule(stages: Mapping[str, Stage]) -> pd.DataFrame:
    """The length of each RL stage of ``stages`` (``{label: Stage}``; SFT stages are left out:
    :func:`sft_schedule`), read from the config it will train with, before it trains: ``stage``
    (the label), ``role`` (``rl.role``), ``rl_steps`` (``rl.max_steps``, which a paper's recipe
    resolves from its epochs before the stage is built; a finished stage's ``global_step`` equals
    it), ``prompts_per_step``, ``group_size``, ``samples_per_step`` (prompts x group: the rollouts of
    one step), ``mini_batches`` (optimizer updates per step, :mod:`guirl.train.rl`) and
    ``optimizer_updates`` (``rl_steps x mini_batches``)."""
    from guirl.train.rl import RL_ENTRY

    rows = []
    for label, s in stages.items():
        if s.entry != RL_ENTRY:
            continue
        rl = s.cfg.rl
        rows.append(
            {
                "stage": label,
                "role": rl.role,
                "rl_steps": rl.max_steps,
                "prompts_per_step": rl.prompts_per_step,
                "group_size": rl.group_size,
                "samples_per_step": rl.prompts_per_step * rl.group_size,
                "mini_batches": rl.mini_batches,
                "optimizer_updates": rl.max_steps * rl.mini_batches,
            }
        )
    return pd.DataFrame(rows, columns=list(RL_SCHEDULE_COLUMNS))


def _is_rl(result: Mapping[str, Any]) -> bool:
    return "samples_generated" in result or "role" in result


def stage_table(results: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per stage (``{label: result.json content}``): ``kind`` (``sft`` / ``rl``), ``role``
    (RL), optimizer ``steps``, ``records`` (SFT), samples ``generated`` / ``trained`` (RL),
    training ``seconds``, ``resumed_from`` (``None``: trained from the start or reused finished)
    and ``skipped`` (why a stage had nothing to train on; ``None`` otherwise)."""
    rows = []
    for name, r in results.items():
        rl = _is_rl(r)
        rows.append(
            {
                "stage": name,
                "kind": "rl" if rl else "sft",
                "role": r.get("role"),
                "steps": r.get("global_step"),
                "records": None if rl else r.get("n_records"),
                "generated": r.get("samples_generated") if rl else None,
                "trained": r.get("samples_trained"),
                "seconds": r.get("train_seconds"),
                "resumed_from": r.get("resumed_from"),
                "skipped": r.get("skipped"),
            }
        )
    return pd.DataFrame(rows, columns=list(STAGE_COLUMNS))


def rl_curves(
    results: Mapping[Any, Mapping[str, Any] | str | Path],
    columns: Sequence[str] = ("reward", "kl"),
    *,
    keys: Sequence[str] = ("stage",),
) -> pd.DataFrame:
    """Long table ``<keys>, step, <columns>`` of RL stages' logs (:func:`~guirl.studies.shared.rl_runs.rl_log`):
    ``results`` maps a run's labels (one value, or a tuple of ``len(keys)`` values, e.g.
    ``(method, history)``) to its result; a column a log does not have is left out."""
    frames = []
    for label, res in results.items():
        values = label if isinstance(label, tuple) else (label,)
        if len(values) != len(keys):
            raise ValueError(f"rl_curves: label {label!r} does not match the key columns {list(keys)}")
        df = rl_log(res)
        part = df[["step", *[c for c in columns if c in df]]].copy()
        for i, (key, value) in enumerate(zip(keys, values)):
            part.insert(i, key, value)
        frames.append(part)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*keys, "step"])


def reward_rise(
    results: Mapping[str, Mapping[str, Any] | str | Path],
    names: Sequence[str] | None = None,
    *,
    window: int | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    scale: float = 1.0,
) -> pd.DataFrame:
    """Whether RL moved the reward: per RL stage (``names``, default every RL result), the mean
    reward of the last ``window`` steps minus the first ``window`` (default half of its steps, at
    least 1: a one-step run compares the step with itself), with a 95% percentile bootstrap
    interval resampling the steps of each window (``lo`` / ``hi``), ``resolved`` when it excludes 0.
    ``diff`` / ``lo`` / ``hi`` are multiplied by ``scale`` (100: points of a reward in [0, 1]);
    rewards are in each method's own units. A fixed ``window`` needs ``2 * window`` logged steps."""
    if window is not None and window < 1:
        raise ValueError(f"window={window}: need at least 1 step per window")
    rng = np.random.default_rng(seed)
    rows = []
    default = [n for n, r in results.items() if not isinstance(r, Mapping) or _is_rl(r)]
    for name in names if names is not None else default:
        rew = rl_log(results[name])["reward"].to_numpy(float)
        w = window if window is not None else max(1, len(rew) // 2)
        if len(rew) < (2 * w if window is not None else 1):
            raise ValueError(f"stage {name}: {len(rew)} logged steps, need {2 * w} for window={w}")
        first, last = rew[:w], rew[-w:]
        boot = last[rng.integers(0, w, (n_boot, w))].mean(1) - first[rng.integers(0, w, (n_boot, w))].mean(1)
        lo, hi = (scale * float(x) for x in np.quantile(boot, [0.025, 0.975]))
        rows.append(
            {
                "stage": name,
                "steps": len(rew),
                "window": w,
                "first": float(first.mean()),
                "last": float(last.mean()),
                "diff": scale * float(last.mean() - first.mean()),
                "lo": lo,
                "hi": hi,
                "resolved": bool(lo > 0 or hi < 0),
            }
        )
    return pd.DataFrame(rows)
