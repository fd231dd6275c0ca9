"""Where a run's inputs are: the base model, the prepared data, the test splits, and the stages
other notebooks trained. They only resolve and (for the offline defaults) build; they hold no
experiment logic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from guirl.config import Config
from guirl.data.splits import Split, is_test_split, load_splits
from guirl.paths import data_dir

__all__ = ["base_model_dir", "minigui_dir", "dataset_dir", "eval_splits", "paper_model_size", "upstream_result"]


def paper_model_size(cfg: Config) -> str:
    """``"7B"`` or ``"3B"``: the papers' model size whose rows a notebook prints beside its own, the
    size in ``model.path`` (``Qwen2.5-VL-7B-Instruct`` -> ``7B``); the tiny profile's model stands
    beside the papers' smaller size, 3B."""
    import re

    return "7B" if re.search(r"(?<![0-9])7b(?![0-9a-z])", cfg.model.path.lower()) else "3B"


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
    """The MiniGUI dataset folder of a run, published at ``data/<profile>/minigui``, with
    ``data.n_train_tasks + data.n_test_tasks`` tasks drawn with ``seed`` on
    ``data.width`` x ``data.height`` screens.

    Notebook ``00_data_prep`` builds it (``rebuild=True``: generated afresh, so a changed
    simulator or expert shows up); the notebooks that read 00's output reuse it when its
    manifest matches these settings, and build it only when it is missing or was built with
    other settings (for instance a notebook opened by hand before 00 ran). The sizes come only
    from the config, so 00 and its readers agree on them (one build per run of the pipeline).

    The folder is published whole (:mod:`guirl.data.publish`): the path returned is the version
    ``data/<profile>/minigui`` points to, which never changes while this process runs; a rebuild
    (here or in another notebook) writes a new version and repoints the link once it is
    complete, so a reader never sees mixed or short data. Two builds take turns.
    """
    from guirl.data.publish import build_lock, publish, use_published
    from guirl.env import export

    out = data_dir(cfg.profile) / "minigui"
    total = cfg.data.n_train_tasks + cfg.data.n_test_tasks
    wanted = (total, cfg.seed, cfg.data.width, cfg.data.height)

    def current() -> Path | None:
        folder = use_published(out)
        if folder is None or not (folder / "manifest.json").is_file():
            return None
        m = json.loads((folder / "manifest.json").read_text())
        return folder if (m.get("n_tasks"), m.get("seed"), m.get("width"), m.get("height")) == wanted else None

    if not rebuild and (found := current()) is not None:
        return found
    with build_lock(out):
        if not rebuild and (found := current()) is not None:  # built by another process meanwhile
            return found
        return publish(
            out,
            lambda folder: export.build_minigui_dataset(
                folder, n_tasks=total, seed=cfg.seed, width=cfg.data.width, height=cfg.data.height, progress=progress
            ),
        )


def dataset_dir(cfg: Config, *, progress: bool = True) -> Path:
    """The prepared dataset folder of a run: MiniGUI (built if missing) for ``data.source:
    minigui``, else the folder ``00_data_prep`` converted ``data.source`` into (the version
    published at ``data/<profile>/<source>``: :mod:`guirl.data.publish`)."""
    if cfg.data.source == "minigui":
        return minigui_dir(cfg, progress=progress)
    from guirl.data.publish import use_published

    out = use_published(data_dir(cfg.profile) / cfg.data.source) or data_dir(cfg.profile) / cfg.data.source
    if not (out / "episodes.jsonl").exists():
        raise FileNotFoundError(
            f"{out}/episodes.jsonl: {cfg.data.source} has not been converted for profile {cfg.profile}; run "
            f"make nb-00_data_prep PROFILE={cfg.profile} ARGS='--experiment {cfg.data.source}' first (or "
            f"ARGS='--override data.source={cfg.data.source} --override data.path=<folder>')"
        )
    return out


def eval_splits(cfg: Config, *, only: list[str] | None = None) -> dict[str, Split]:
    """The test splits of the run's prepared data (every split but ``train`` and ``validation``:
    :func:`guirl.data.splits.is_test_split`), in file order; ``only``: these names (a ``KeyError``
    naming the splits there are when one is missing)."""
    splits = {k: v for k, v in load_splits(dataset_dir(cfg)).items() if is_test_split(k)}
    if only is None:
        return splits
    missing = [name for name in only if name not in splits]
    if missing:
        raise KeyError(f"no test split {missing} in {dataset_dir(cfg)}; it has {sorted(splits)}")
    return {name: splits[name] for name in only}


def upstream_result(cfg: Config, notebook: str, stage: str) -> dict[str, Any]:
    """The ``result.json`` of stage ``stage`` written by notebook ``notebook`` for this profile
    (e.g. ``("01_sft", "sft")``, under ``runs/<profile>/``); a ``FileNotFoundError`` naming the
    file and the make target when that notebook has not run, a
    :class:`guirl.contenthash.StateFileError` naming it when it is torn or corrupt."""
    from guirl.contenthash import read_json_state
    from guirl.paths import runs_dir

    path = runs_dir(cfg.profile) / notebook / stage / "result.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {stage} result of notebook {notebook}; run `make nb-{notebook}` first")
    return read_json_state(path, f"the {stage} result of notebook {notebook}", f"run `make nb-{notebook}` again")
