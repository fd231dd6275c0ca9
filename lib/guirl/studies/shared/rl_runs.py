"""RL runs as stage records, and their logs read back (notebook 02 trains them; 05 and 06 read them).

* :class:`RLRun`: one RL run of a role at one history setting, with dotted config ``overrides``
  and the label it has in tables; :func:`rl_stage_config` derives its config
  (``Config.replace``: ``rl.role``, the role's own reward, ``rl.histories = [history]``, the
  overrides) and :func:`rl_stage` its :class:`~guirl.train.launch.Stage` on top of the SFT result
  of its history setting (one model per setting, as CCPO reports CCPO-3B-1AO and -3AO separately,
  each RL setting continuing from its own SFT model).
* :func:`run_rl_runs`: train (resume, or reuse) them one after the other.
* :func:`rl_log`: the per-step log of a stage as a data frame (reward / KL curves and the stage
  table are :mod:`guirl.studies.shared.stages`); :func:`rl_policies`: their evaluation policies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from guirl.config import Config
from guirl.train.launch import Stage, run_stages
from guirl.train.rl import LOG_FILE, RL_ENTRY, read_log

__all__ = [
    "RL_METHODS",
    "LABELS",
    "RLRun",
    "stage_name",
    "rl_stage_config",
    "rl_stage",
    "run_rl_runs",
    "rl_log",
    "rl_policies",
]

#: The two RL roles notebook 02 compares, in table order.
RL_METHODS: tuple[str, ...] = ("semi_online", "ccpo")
#: Row labels as the paper prints them.
LABELS: dict[str, str] = {"semi_online": "SO-RL", "ccpo": "CCPO"}


def stage_name(role: str, history: str, tag: str = "") -> str:
    """Folder / stage label of an RL stage, e.g. ``ccpo_3AO`` or ``ccpo_3AO_min``."""
    return f"{role}_{history}" + (f"_{tag}" if tag else "")


@dataclass(frozen=True)
class RLRun:
    """One RL run: ``role`` (``rl.role``, e.g. ``semi_online`` / ``ccpo``) at ``history`` with
    dotted config ``overrides``; ``name`` is its stage folder and ``label`` its row in the tables."""

    role: str
    history: str
    label: str
    tag: str = ""
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return stage_name(self.role, self.history, self.tag)


def rl_stage_config(cfg: Config, role: str, history: str, overrides: Mapping[str, Any] | None = None) -> Config:
    """The config of one RL stage: ``rl.role = role``, ``rl.reward = null`` (the role's own
    reward: UI-S1's for ``semi_online``, the ``ccpo`` section's for ``ccpo``), ``rl.histories =
    [history]``, then ``overrides`` (dotted keys, e.g. ``{"ccpo.compress": "min"}``); validated,
    so an unknown role or key is a one-line ``ConfigError``."""
    return cfg.replace({"rl.role": role, "rl.reward": None, "rl.histories": [history], **dict(overrides or {})})


def _base_model(sft: Mapping[str, Any] | str | Path) -> Path:
    """The model folder of an SFT result (``result.json`` content or a folder)."""
    if isinstance(sft, Mapping):
        return Path(sft["final"])
    return Path(sft)


def rl_stage(cfg: Config, run: RLRun, *, sft: Mapping[str, Any] | str | Path, data_dir: Path, run_dir: Path) -> Stage:
    """The stage of ``run``, starting from the SFT result ``sft`` of the same history setting
    (CCPO A.1.2: RL continues from the SFT model), in ``run_dir / run.name``."""
    return Stage(
        name=run.name,
        entry=RL_ENTRY,
        cfg=rl_stage_config(cfg, run.role, run.history, dict(run.overrides)),
        inputs={"data": data_dir},
        base_model=_base_model(sft),
        output_dir=Path(run_dir) / run.name,
    )


def run_rl_runs(
    cfg: Config,
    runs: Sequence[RLRun],
    *,
    sft: Mapping[str, Mapping[str, Any] | str | Path],
    data_dir: Path,
    run_dir: Path,
    echo: bool = False,
) -> dict[str, dict[str, Any]]:
    """Train (resume, or reuse) each run's stage, one after the other, each from the SFT result of
    its history setting (``sft``: ``{history: result.json or folder}``, e.g. from
    :func:`guirl.studies.shared.agents.sft_result`; CCPO A.1.2); ``{run.name: result.json}``."""
    missing = sorted({run.history for run in runs} - set(sft))
    if missing:
        raise KeyError(f"run_rl_runs: no SFT model for history {missing} (sft has {sorted(sft)})")
    stages = [rl_stage(cfg, run, sft=sft[run.history], data_dir=data_dir, run_dir=run_dir) for run in runs]
    return dict(zip((run.name for run in runs), run_stages(stages, parallel=1, echo=echo, progress=True)))


def rl_log(result: Mapping[str, Any] | str | Path) -> pd.DataFrame:
    """The per-step log of an RL stage (its ``result.json`` content, the stage folder or the log
    file) as a data frame, one row per step (``guirl.train.rl.LOG_FIELDS`` plus the role's)."""
    if isinstance(result, Mapping):
        path = Path(result["log"])
    else:
        path = Path(result)
        if path.is_dir():
            path = path / LOG_FILE
    return pd.DataFrame(read_log(path))


def rl_policies(cfg: Config, runs: Sequence[RLRun], results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{run.label: builder}`` for :func:`guirl.studies.shared.evaluation.evaluation_grid` (one
    model in memory at a time)."""
    from guirl.studies.shared.evaluation import eval_policy

    return {run.label: (lambda r=results[run.name]: eval_policy(cfg, r)) for run in runs}
