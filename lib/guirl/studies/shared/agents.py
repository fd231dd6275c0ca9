"""The SFT agents of notebook 01 as stage records: grounding pre-training, then the main agent and
the Low-level executor (notebook 08 trains them again per training seed).

* :func:`sft_agents`: the agents of a run config, main agent first: the one at the level of
  ``sft.use_step_instruction`` (folder :data:`MAIN_SFT_DIR`, which later notebooks start from)
  and, with ``sft.executor`` set, a Low-level executor (folder :data:`LOW_EXECUTOR_DIR`) whose
  config is the main one with the step instruction and the executor's own recipe
  (``Config.replace``).
* :func:`agent_stages`: the :class:`~guirl.train.launch.Stage` records that train them;
  :func:`train_agents` runs them (grounding first, then the agents, side by side when
  ``runtime.parallel_stages`` > 1).
* :func:`upstream_agents` / :func:`zero_shot_source`: what notebook 01 trained, read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guirl.config import Config
from guirl.studies.shared.inputs import upstream_result
from guirl.train.launch import SFT_ENTRY, Stage, run_stage, run_stages

__all__ = [
    "GROUNDING",
    "MAIN_SFT_DIR",
    "LOW_EXECUTOR_DIR",
    "SFTAgent",
    "instruction_level",
    "sft_agents",
    "grounding_stage",
    "agent_stages",
    "train_agents",
    "zero_shot_source",
    "upstream_agents",
]

#: Key of the grounding stage in :func:`train_agents`' result (agents are keyed by their name), and its folder.
GROUNDING = "grounding"
#: Output folder (under ``runs/<profile>/01_sft``) of the main agent, where later notebooks look for it.
MAIN_SFT_DIR = "sft"
#: Output folder of the Low-level executor (``sft.executor``).
LOW_EXECUTOR_DIR = "sft_low"


@dataclass(frozen=True)
class SFTAgent:
    """One SFT agent of notebook 01: ``name`` (the model name in tables, e.g. ``"SFT (High)"``),
    ``level`` (``"High"``: goal only; ``"Low"``: goal and step instruction, AndroidControl's two
    settings), ``cfg`` (the run config at that level: prompts of training and evaluation follow
    ``cfg.sft.use_step_instruction``) and ``stage_dir`` (its folder under ``01_sft``)."""

    name: str
    level: str
    cfg: Config
    stage_dir: str


def instruction_level(use_step_instruction: bool) -> str:
    """``"Low"`` with the step instruction in the prompt, ``"High"`` with the goal only."""
    return "Low" if use_step_instruction else "High"


def sft_agents(cfg: Config) -> list[SFTAgent]:
    """The agents notebook 01 trains, main agent first (module doc)."""
    main_level = instruction_level(cfg.sft.use_step_instruction)
    agents = [SFTAgent(f"SFT ({main_level})", main_level, cfg, MAIN_SFT_DIR)]
    if cfg.sft.executor is not None:
        low = cfg.replace({"sft.use_step_instruction": True, "sft.executor": None, **cfg.sft.executor.updates()})
        agents.append(SFTAgent("SFT (Low)", "Low", low, LOW_EXECUTOR_DIR))
    return agents


def grounding_stage(cfg: Config, *, data_dir: Path, base_model: Path, run_dir: Path) -> Stage:
    """Grounding pre-training of ``base_model`` under ``run_dir / "grounding"``."""
    return Stage(
        name="grounding",
        entry=SFT_ENTRY,
        cfg=cfg,
        inputs={"data": data_dir},
        base_model=base_model,
        output_dir=Path(run_dir) / GROUNDING,
    )


def agent_stages(cfg: Config, *, data_dir: Path, start: Path, run_dir: Path) -> list[Stage]:
    """One SFT stage per agent of :func:`sft_agents`, each from ``start`` (the grounding model, or
    the base model) in ``run_dir / agent.stage_dir``."""
    return [
        Stage(
            name="sft",
            entry=SFT_ENTRY,
            cfg=agent.cfg,
            inputs={"data": data_dir},
            base_model=start,
            output_dir=Path(run_dir) / agent.stage_dir,
        )
        for agent in sft_agents(cfg)
    ]


def train_agents(
    cfg: Config, *, data_dir: Path, base_model: Path, run_dir: Path, grounding: bool | None = None
) -> dict[str, dict[str, Any]]:
    """Train (or reuse) grounding and every SFT agent of ``cfg`` under ``run_dir``.

    Returns ``{"grounding": result, "<agent name>": result, ...}`` (``grounding`` only when it
    trains), each a stage's ``result.json``. ``grounding`` (default ``grounding.enabled``): train
    the grounding stage from ``base_model`` first; ``False`` where ``base_model`` is already a
    grounding model. The agents start from the grounding model (else from ``base_model``) and
    train side by side when ``runtime.parallel_stages`` > 1 (:func:`guirl.train.launch.run_stages`)."""
    out: dict[str, dict[str, Any]] = {}
    start = Path(base_model)
    if cfg.grounding.enabled if grounding is None else grounding:
        out[GROUNDING] = run_stage(grounding_stage(cfg, data_dir=data_dir, base_model=start, run_dir=run_dir))
        start = Path(out[GROUNDING]["final"])
    stages = agent_stages(cfg, data_dir=data_dir, start=start, run_dir=run_dir)
    for agent, result in zip(sft_agents(cfg), run_stages(stages, parallel=cfg.runtime.parallel_stages)):
        out[agent.name] = result
    return out


def zero_shot_source(stages: dict[str, dict[str, Any]]) -> str:
    """What the SFT agents started from (the zero-shot model): the grounding model when there is
    one, else the base model of the first agent."""
    if GROUNDING in stages:
        return str(stages[GROUNDING]["final"])
    first = next(iter(stages.values()))
    return str(first["base_model"])


def upstream_agents(cfg: Config) -> dict[str, dict[str, Any]]:
    """The stages notebook 01 trained at the run's own seed (under ``runs/<profile>/01_sft``),
    keyed as :func:`train_agents` keys them; :func:`guirl.studies.shared.inputs.upstream_result`'s
    error (naming the file and ``make nb-01_sft``) when 01 has not run."""
    stages = ([(GROUNDING, GROUNDING)] if cfg.grounding.enabled else []) + [
        (a.name, a.stage_dir) for a in sft_agents(cfg)
    ]
    return {name: upstream_result(cfg, "01_sft", folder) for name, folder in stages}
