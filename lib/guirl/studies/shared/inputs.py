"""Where a run's inputs are: the base model, the prepared data, the test splits, and the stages
other notebooks trained. They only resolve and (for the offline defaults) build; they hold no
experiment logic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guirl.config import Config
from guirl.data.splits import Split, load_splits
from guirl.paths import data_dir

__all__ = ["base_model_dir", "minigui_dir", "dataset_dir", "eval_splits", "upstream_result"]


def base_model_dir(cfg: Config) -> Path:
    """The checkpoint folder of ``cfg.model``: the shipped pretrained tiny model for ``path:
    tiny-base`` (checked and unpacked once, :func:`guirl.models.tiny_base.tiny_base_dir`), the
    cached random-weight tiny build for ``path: tiny`` (built offline on first use, from ``seed``),
    else the local folder (a clear error if it is missing)."""
    from guirl.models import build_tiny_model, resolve_checkpoint
    from guirl.models.tiny_base import tiny_base_dir

    if cfg.model.is_tiny_base:
        return tiny_base_dir()
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


def eval_splits(cfg: Config, *, only: list[str] | None = None) -> dict[str, Split]:
    """The test splits of the run's prepared data (every split but ``train``), in file order;
    ``only``: these names (a ``KeyError`` naming the splits there are when one is missing)."""
    splits = {k: v for k, v in load_splits(dataset_dir(cfg)).items() if k != "train"}
    if only is None:
        return splits
    missing = [name for name in only if name not in splits]
    if missing:
        raise KeyError(f"no test split {missing} in {dataset_dir(cfg)}; it has {sorted(splits)}")
    return {name: splits[name] for name in only}


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
