"""Small resolvers shared by the notebooks: where the base model and the data of a run are.

They only resolve and (for the offline defaults) build; they hold no experiment logic.
:func:`sft_agents` names the SFT agents of notebook 01 (High-level main agent, Low-level executor);
:func:`upstream_result` reads a stage another notebook trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guirl.config import EXECUTOR_KEYS, Config
from guirl.paths import data_dir


def base_model_dir(cfg: Config) -> Path:
    """The checkpoint folder of ``cfg.model``: the cached tiny build for ``path: tiny``
    (built offline on first use), else the local folder (a clear error if it is missing)."""
    from guirl.models import build_tiny_model, resolve_checkpoint

    if cfg.model.is_tiny:
        return build_tiny_model(seed=cfg.seed)
    return resolve_checkpoint(cfg.model.local_dir())


def minigui_dir(cfg: Config, *, rebuild: bool = False, progress: bool = True) -> Path:
    """The MiniGUI dataset folder of a run, ``data/<profile>/minigui``, with
    ``data.n_train_tasks + data.n_test_tasks`` tasks drawn with ``seed`` on
    ``data.width`` x ``data.height`` screens.

    Notebook ``00_data_prep`` builds it (``rebuild=True``: generated afresh, so a changed
    simulator or expert shows up); the notebooks that read 00's output reuse it when its
    manifest matches these settings, and build it only when it is missing or was built with
    other settings (for instance a notebook opened by hand before 00 ran). The sizes come only
    from the config, so 00 and its readers agree on them (one build per run of the pipeline).
    """
    from guirl.env.export import build_minigui_dataset

    out = data_dir(cfg.profile) / "minigui"
    total = cfg.data.n_train_tasks + cfg.data.n_test_tasks
    manifest = out / "manifest.json"
    if manifest.exists() and not rebuild:
        import json

        m = json.loads(manifest.read_text())
        if (m.get("n_tasks"), m.get("seed"), m.get("width"), m.get("height")) == (
            total,
            cfg.seed,
            cfg.data.width,
            cfg.data.height,
        ):
            return out
    build_minigui_dataset(
        out, n_tasks=total, seed=cfg.seed, width=cfg.data.width, height=cfg.data.height, progress=progress
    )
    return out


def dataset_dir(cfg: Config, *, progress: bool = True) -> Path:
    """The prepared dataset folder of a run: MiniGUI (built if missing) for ``data.source:
    minigui``, else the folder ``00_data_prep`` converted ``data.source`` into."""
    if cfg.data.source == "minigui":
        return minigui_dir(cfg, progress=progress)
    out = data_dir(cfg.profile) / cfg.data.source
    if not (out / "episodes.jsonl").exists():
        raise FileNotFoundError(
            f"{out}/episodes.jsonl: {cfg.data.source} has not been converted for profile {cfg.profile}; run "
            f"make nb-00_data_prep PROFILE={cfg.profile} ARGS='--experiment {cfg.data.source}' first (or "
            f"ARGS='--override data.source={cfg.data.source} --override data.path=<folder>')"
        )
    return out


#: Output folder (under ``runs/<profile>/01_sft``) of the SFT agent at each instruction level:
#: the main agent (the level of ``sft.use_step_instruction``) is in ``sft``, where later notebooks
#: look for it; the extra Low-level executor of ``sft.low_level_executor`` is in ``sft_low``.
MAIN_SFT_DIR = "sft"
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
    """The agents notebook 01 trains, main agent first: the one of ``sft.use_step_instruction``
    (folder :data:`MAIN_SFT_DIR`), then, with ``sft.low_level_executor``, a Low-level executor
    (folder :data:`LOW_EXECUTOR_DIR`) whose config differs only in ``sft.use_step_instruction`` and,
    for each executor key that is set (``sft.low_level_max_steps``, ``low_level_batch_size``,
    ``low_level_lr_scheduler_type``, ``low_level_learning_rate``; :data:`guirl.config.EXECUTOR_KEYS`),
    in the main agent's key it replaces."""
    main_level = instruction_level(cfg.sft.use_step_instruction)
    agents = [SFTAgent(f"SFT ({main_level})", main_level, cfg, MAIN_SFT_DIR)]
    if cfg.sft.low_level_executor:
        update: dict[str, Any] = {"use_step_instruction": True, "low_level_executor": False}
        for key, main_key in EXECUTOR_KEYS.items():
            update[key] = None
            if getattr(cfg.sft, key) is not None:
                update[main_key] = getattr(cfg.sft, key)
        sft = cfg.sft.model_copy(update=update)
        agents.append(SFTAgent("SFT (Low)", "Low", cfg.model_copy(update={"sft": sft}), LOW_EXECUTOR_DIR))
    return agents


def upstream_result(cfg: Config, notebook: str, stage: str) -> dict[str, Any]:
    """The ``result.json`` of stage ``stage`` written by notebook ``notebook`` for this profile
    (e.g. ``("01_sft", "sft")``, under ``runs/<profile>/``); a ``FileNotFoundError`` naming the
    file and the make target when that notebook has not run."""
    import json

    from guirl.paths import runs_dir

    path = runs_dir(cfg.profile) / notebook / stage / "result.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {stage} result of notebook {notebook}; run `make nb-{notebook}` first")
    return json.loads(path.read_text(encoding="utf-8"))
