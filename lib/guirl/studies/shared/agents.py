"""The SFT agents of notebook 01 as stage records: grounding pre-training, then the main agent and
the Low-level executor (notebook 08 trains them again per training seed).

* :func:`sft_agents`: the agents of a run config, main agent first: the one at the level of
  ``sft.use_step_instruction`` (folder :data:`MAIN_SFT_DIR`, which later notebooks start from)
  and, with ``sft.executor`` set, a Low-level executor (folder :data:`LOW_EXECUTOR_DIR`) whose
  config is the main one with the step instruction and the executor's own recipe
  (``Config.replace``). With ``sft.mix_histories: false`` (default) each trains on the first
  setting of ``sft.histories``; :func:`history_agents` are the main agent's models of the other
  settings (folders ``sft_<setting>``, CCPO's separate 1AO / 3AO SFT models), and
  :func:`sft_result` reads back the SFT model of one setting, the one RL at that setting starts
  from.
* :func:`agent_stages`: the :class:`~guirl.train.launch.Stage` records that train them;
  :func:`planned_stages` all of them by label (grounding included), before anything trains;
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
from guirl.train.sft import FINAL_DIR

__all__ = [
    "GROUNDING",
    "MAIN_SFT_DIR",
    "LOW_EXECUTOR_DIR",
    "SFTAgent",
    "instruction_level",
    "sft_agents",
    "history_stage_dir",
    "history_agents",
    "evaluated_histories",
    "sft_result",
    "grounding_stage",
    "agent_stages",
    "planned_stages",
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
    history: str | None = None  # the one setting it trains on; None: every setting of sft.histories (mixed)


def _one_setting(cfg: Config, history: str) -> dict[str, Any]:
    """The ``Config.replace`` updates that train one history setting with its own recipe."""
    recipe = (cfg.sft.history_recipes or {}).get(history)
    return {"sft.histories": [history], "sft.history_recipes": None, **(recipe.updates() if recipe else {})}


def instruction_level(use_step_instruction: bool) -> str:
    """``"Low"`` with the step instruction in the prompt, ``"High"`` with the goal only."""
    return "Low" if use_step_instruction else "High"


def sft_agents(cfg: Config) -> list[SFTAgent]:
    """The main agent and the Low-level executor, main agent first (module doc); each trains on
    the first setting of ``sft.histories`` (every setting with ``sft.mix_histories``)."""
    main_level = instruction_level(cfg.sft.use_step_instruction)
    h0 = None if cfg.sft.mix_histories else cfg.sft.histories[0]
    one = _one_setting(cfg, h0) if h0 else {}
    agents = [SFTAgent(f"SFT ({main_level})", main_level, cfg.replace(one) if one else cfg, MAIN_SFT_DIR, h0)]
    if cfg.sft.executor is not None:
        low = {"sft.use_step_instruction": True, "sft.executor": None, **cfg.sft.executor.updates()}
        if h0:
            low = {**{k: v for k, v in one.items() if k in ("sft.histories", "sft.history_recipes")}, **low}
        agents.append(SFTAgent("SFT (Low)", "Low", cfg.replace(low), LOW_EXECUTOR_DIR, h0))
    return agents


def history_stage_dir(history: str) -> str:
    """Folder (under ``01_sft``) of the main agent's model of a setting other than the first."""
    return f"{MAIN_SFT_DIR}_{history}"


def history_agents(cfg: Config) -> list[SFTAgent]:
    """The main agent's models of the settings of ``sft.histories`` after the first (none with
    ``sft.mix_histories``): same level and recipe (with ``sft.history_recipes[setting]`` on top),
    trained on that setting only, in :func:`history_stage_dir`; named ``SFT (<level>, <setting>)``."""
    if cfg.sft.mix_histories:
        return []
    level = instruction_level(cfg.sft.use_step_instruction)
    return [
        SFTAgent(f"SFT ({level}, {h})", level, cfg.replace(_one_setting(cfg, h)), history_stage_dir(h), h)
        for h in cfg.sft.histories[1:]
    ]


def evaluated_histories(cfg: Config, agent: SFTAgent) -> list[str]:
    """The ``eval.histories`` settings notebook 01 scores ``agent`` at: a main-agent model at its
    own setting, plus (the first one) every evaluated setting no model trains on; a mixed main
    agent at every setting; the executor at the first evaluated setting."""
    evals = list(cfg.eval.histories)
    if agent.level != instruction_level(cfg.sft.use_step_instruction):
        return evals[:1]
    if agent.history is None:
        return evals
    own = [agent.history] if agent.history in evals else []
    if agent.stage_dir == MAIN_SFT_DIR:
        own += [h for h in evals if h not in cfg.sft.histories]
    return own


def sft_result(cfg: Config, history: str) -> dict[str, Any]:
    """The ``result.json`` of notebook 01's SFT model of ``history`` (the main agent's model
    trained on that setting; the mixed model with ``sft.mix_histories``): the model an RL stage at
    ``history`` starts from (CCPO App. A.1.2). A setting 01 trains no model for raises
    ``ValueError`` naming ``sft.histories``."""
    if cfg.sft.mix_histories:
        return upstream_result(cfg, "01_sft", MAIN_SFT_DIR)
    if history not in cfg.sft.histories:
        raise ValueError(
            f"no SFT model of {history}: notebook 01 trains one per setting of sft.histories {cfg.sft.histories} "
            f"-- add {history} to sft.histories (or set sft.mix_histories: true for one model on every setting)"
        )
    folder = MAIN_SFT_DIR if history == cfg.sft.histories[0] else history_stage_dir(history)
    return upstream_result(cfg, "01_sft", folder)


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


def agent_stages(cfg: Config, *, data_dir: Path, start: Path, run_dir: Path, histories: bool = False) -> list[Stage]:
    """One SFT stage per agent of :func:`sft_agents` (and, with ``histories``, of
    :func:`history_agents`, after them), each from ``start`` (the grounding model, or the base
    model) in ``run_dir / agent.stage_dir``."""
    return [
        Stage(
            name="sft",
            entry=SFT_ENTRY,
            cfg=agent.cfg,
            inputs={"data": data_dir},
            base_model=start,
            output_dir=Path(run_dir) / agent.stage_dir,
        )
        for agent in sft_agents(cfg) + (history_agents(cfg) if histories else [])
    ]


def planned_stages(
    cfg: Config,
    *,
    data_dir: Path,
    base_model: Path,
    run_dir: Path,
    grounding: bool | None = None,
    histories: bool = True,
) -> dict[str, Stage]:
    """The stages :func:`train_agents` trains, by the label it keys their results with, before any
    of them runs (the agents' base model is the grounding stage's ``final`` folder when it trains):
    what :func:`guirl.studies.shared.stages.sft_schedule` reads."""
    out: dict[str, Stage] = {}
    start = Path(base_model)
    if cfg.grounding.enabled if grounding is None else grounding:
        out[GROUNDING] = grounding_stage(cfg, data_dir=data_dir, base_model=start, run_dir=run_dir)
        start = out[GROUNDING].output_dir / FINAL_DIR
    agents = sft_agents(cfg) + (history_agents(cfg) if histories else [])
    stages = agent_stages(cfg, data_dir=data_dir, start=start, run_dir=run_dir, histories=histories)
    out.update(zip((a.name for a in agents), stages))
    return out


def train_agents(
    cfg: Config,
    *,
    data_dir: Path,
    base_model: Path,
    run_dir: Path,
    grounding: bool | None = None,
    histories: bool = True,
) -> dict[str, dict[str, Any]]:
    """Train (or reuse) grounding and every SFT agent of ``cfg`` under ``run_dir``.

    Returns ``{"grounding": result, "<agent name>": result, ...}`` (``grounding`` only when it
    trains), each a stage's ``result.json``. ``grounding`` (default ``grounding.enabled``): train
    the grounding stage from ``base_model`` first; ``False`` where ``base_model`` is already a
    grounding model. The agents (and, with ``histories``, the :func:`history_agents`, queued after
    them) start from the grounding model (else from ``base_model``) and train side by side when
    ``runtime.parallel_stages`` > 1 (:func:`guirl.train.launch.run_stages`)."""
    plan = planned_stages(
        cfg, data_dir=data_dir, base_model=base_model, run_dir=run_dir, grounding=grounding, histories=histories
    )
    out: dict[str, dict[str, Any]] = {}
    if GROUNDING in plan:  # first: the agents start from its final folder
        out[GROUNDING] = run_stage(plan.pop(GROUNDING))
    out.update(zip(plan, run_stages(list(plan.values()), parallel=cfg.runtime.parallel_stages)))
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
