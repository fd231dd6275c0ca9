"""Notebook 03's models as policies and agents: a model folder (full weights or a LoRA adapter) at
Co-EPG's pixel budget, a grounder with eq. 6's confidence, the P-G dual agent, a GRPO checkpoint as a
loadable folder, and what identifies a model folder in a data file's record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guirl.config import Config
from guirl.methods.coepg.config import coepg_section, pixel_budget
from guirl.methods.coepg.prompts import planner_settings

__all__ = ["model_id", "model_policy", "dual_agent", "checkpoint_model"]


def model_id(folder: str | Path) -> str:
    """What identifies a model folder in a data file's record: the sha256 of its stage's
    fingerprint (the stage that wrote it), else its path."""
    folder = Path(folder)
    for f in (folder / "stage_fingerprint.json", folder.parent / "stage_fingerprint.json"):
        if f.is_file():
            return hashlib.sha256(f.read_bytes()).hexdigest()[:16]
    return str(folder)


def _load(folder: str | Path, cfg: Config, lo: int, hi: int) -> tuple[Any, Any]:
    """``(model, processor)`` of a full-model folder or a LoRA adapter folder (merged into its base)."""
    from guirl.models import load_policy

    folder = Path(folder)
    adapter = folder / "adapter_config.json"
    kw = dict(min_pixels=lo, max_pixels=hi, dtype=cfg.model.torch_dtype, device=cfg.runtime.device)
    if adapter.is_file():
        base = json.loads(adapter.read_text())["base_model_name_or_path"]
        return load_policy(base, folder, **kw)
    return load_policy(folder, **kw)


def model_policy(cfg: Config, folder: str | Path, *, max_new_tokens: int) -> Any:
    """A greedy-by-default :class:`~guirl.rollout.HFPolicy` of a model folder at Co-EPG's pixel
    budget, ``eval.batch_size`` prompts per call."""
    from guirl.rollout import HFPolicy

    lo, hi = pixel_budget(cfg)
    model, processor = _load(folder, cfg, lo, hi)
    return HFPolicy(model, processor, max_new_tokens=max_new_tokens, batch_size=cfg.eval.batch_size)


def _grounder(cfg: Config, folder: str | Path) -> Any:
    from guirl.methods.coepg.grounding import load_grounder

    lo, hi = pixel_budget(cfg)
    sec = coepg_section(cfg)
    return load_grounder(
        folder,
        planner_settings(cfg),
        min_pixels=lo,
        max_pixels=hi,
        max_new_tokens=sec.grounder_max_new_tokens,
        batch_size=cfg.eval.batch_size,
        dtype=cfg.model.torch_dtype,
        device=cfg.runtime.device,
    )


def dual_agent(cfg: Config, planner: str | Path, grounder: str | Path) -> Any:
    """The P-G dual model ``{planner, grounder}`` (model folders) as an agent writing
    ``sft.output_format``."""
    from guirl.methods.coepg.agent import PlannerGrounderAgent

    sec = coepg_section(cfg)
    lo, hi = pixel_budget(cfg)
    return PlannerGrounderAgent(
        model_policy(cfg, planner, max_new_tokens=sec.planner_max_new_tokens),
        model_policy(cfg, grounder, max_new_tokens=sec.grounder_max_new_tokens),
        planner_settings(cfg),
        min_pixels=lo,
        max_pixels=hi,
        output_format=cfg.sft.output_format,
    )


def checkpoint_model(result: Mapping[str, Any], step: int, out: Path) -> Path:
    """A loadable model folder of GRPO checkpoint ``step`` (the engine's ``checkpoint-<step>``: its
    weights over the run's start model, :func:`guirl.train.rl.checkpoint_weights`, so a checkpoint
    saved under DeepSpeed loads too), written once to ``out``."""
    import shutil

    from guirl.train.rl import checkpoint_weights

    src = Path(result["final"]).parent / f"checkpoint-{step}"
    if (out / "config.json").is_file():
        return out
    weights = checkpoint_weights(src)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(Path(result["base_model"]), tmp)
    shutil.copy2(weights, tmp / "model.safetensors")
    for f in tmp.glob("model-*.safetensors"):
        f.unlink()
    (tmp / "model.safetensors.index.json").unlink(missing_ok=True)
    tmp.rename(out)
    return out
