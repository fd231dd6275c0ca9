"""Loaders of public GUI-agent datasets into the one episode schema (:mod:`guirl.data.schema`).

``load_dataset(name, path, **kw)`` dispatches to ``LOADERS[name]``; every loader returns a
:class:`LoadResult` (``episodes``, ``skipped``). Formats: ``docs/dataset-formats.md``.
Loaders of formats that embed screenshots (``androidcontrol``, ``mind2web``, ``guir1``) need
``image_dir``: the output folder that will hold ``episodes.jsonl``; the PNGs are written under
it and stored relative to it. The other loaders store paths relative to the dataset folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from guirl.data.loaders._common import DatasetFormatError, LoadResult
from guirl.data.loaders.aitz import load_aitz
from guirl.data.loaders.amex import load_amex
from guirl.data.loaders.androidcontrol import load_androidcontrol
from guirl.data.loaders.guiodyssey import load_guiodyssey
from guirl.data.loaders.guir1 import load_guir1
from guirl.data.loaders.mind2web import load_mind2web
from guirl.data.loaders.uis1 import load_ccpo_androidcontrol, load_ccpo_guiodyssey, load_ccpo_mind2web, load_uis1
from guirl.data.loaders._splits import SplitFileError
from guirl.data.grounding import grounding_samples, write_grounding_rows
from guirl.data.schema import write_episodes
from guirl.data.splits import check_disjoint

LOADERS: dict[str, Callable[..., LoadResult]] = {
    "androidcontrol": load_androidcontrol,
    "guiodyssey": load_guiodyssey,
    "aitz": load_aitz,
    "amex": load_amex,
    "mind2web": load_mind2web,
    "uis1": load_uis1,
    "ccpo_androidcontrol": load_ccpo_androidcontrol,
    "ccpo_guiodyssey": load_ccpo_guiodyssey,
    "ccpo_mind2web": load_ccpo_mind2web,
    "guir1": load_guir1,
}

#: Loaders whose format embeds the screenshots and so need ``image_dir``.
EMBEDS_IMAGES = frozenset({"androidcontrol", "mind2web", "guir1"})


def load_dataset(name: str, path: str | Path, *, skip_bad: bool = False, **kwargs: Any) -> LoadResult:
    """Load dataset ``name`` from ``path``; extra keyword arguments go to its loader
    (``image_dir``, ``image_root``, ``split``, ``off_screen``, ``screenshot_subdir``,
    ``scroll_convention``, ...). The result counts what loaded, what was adjusted and what was
    rejected (:meth:`LoadResult.counts`)."""
    if name not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(LOADERS)}")
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file or folder for data set {name!r}; point data.path at its download")
    return LOADERS[name](path, skip_bad=skip_bad, **kwargs)


def convert_dataset(
    name: str,
    path: str | Path,
    out_dir: str | Path,
    *,
    skip_bad: bool = False,
    grounding_seed: int = 0,
    grounding_per_screen: int = 3,
    **kwargs: Any,
) -> tuple[dict[str, Path], LoadResult]:
    """Load dataset ``name`` from ``path`` and write ``out_dir/episodes.jsonl``,
    ``out_dir/grounding_train.jsonl`` and ``out_dir/manifest.json``. Each episode carries its split
    (the data set's official split files or the papers' rule: :mod:`guirl.data.loaders._splits`);
    an episode id in ``train`` and in another split stops the conversion
    (:func:`guirl.data.splits.check_disjoint`).

    Screenshots of embedded formats are written under ``out_dir`` (``image_dir=out_dir``);
    for the others they stay in the dataset folder. ``grounding_train.jsonl`` holds AgentCPM-GUI
    Stage I grounding rows (Sec. 2.3: :func:`guirl.data.grounding.grounding_samples`, at most
    ``grounding_per_screen`` per screen, drawn with ``grounding_seed``) of the ``train`` split's
    screens only, their ``image`` paths relative to ``out_dir``; a data set without UI elements
    (GUI-Odyssey) writes an empty file. ``manifest.json`` records ``image_root`` (the folder the
    episodes' screenshot paths are relative to), the counts (``grounding_samples``: the rows) and
    every skipped record. Returns ``({"episodes": ..., "grounding": ..., "manifest": ...,
    "image_root": ...}, result)``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if name in EMBEDS_IMAGES:
        kwargs.setdefault("image_dir", out)
    res = load_dataset(name, path, skip_bad=skip_bad, **kwargs)
    groups: dict[str, list] = {}
    for ep in res.episodes:
        groups.setdefault(ep.split, []).append(ep)
    check_disjoint(groups, path)
    image_root = Path(kwargs["image_dir"]) if name in EMBEDS_IMAGES else Path(path)
    if image_root.is_file():
        image_root = image_root.parent
    ep_path = out / "episodes.jsonl"
    write_episodes(res.episodes, ep_path)
    prefix = os.path.relpath(image_root.resolve(), out.resolve())
    rows = grounding_samples(
        groups.get("train", []),
        image_prefix="" if prefix == "." else Path(prefix).as_posix(),
        seed=grounding_seed,
        per_screen=grounding_per_screen,
    )
    g_path = write_grounding_rows(out, rows)
    manifest = {
        "source": name,
        "path": str(path),
        "image_root": str(image_root.resolve()),
        "n_episodes": len(res.episodes),
        "n_steps": sum(len(e.steps) for e in res.episodes),
        "splits": {k: {"episodes": len(v), "steps": sum(len(e.steps) for e in v)} for k, v in sorted(groups.items())},
        "grounding_samples": len(rows),
        "skipped": [list(s) for s in res.skipped],
        "adjusted": [list(a) for a in res.adjusted],
        "counts": res.counts(),
    }
    man_path = out / "manifest.json"
    man_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return {"episodes": ep_path, "grounding": g_path, "manifest": man_path, "image_root": image_root}, res


__all__ = [
    "LOADERS",
    "EMBEDS_IMAGES",
    "load_dataset",
    "convert_dataset",
    "LoadResult",
    "DatasetFormatError",
    "SplitFileError",
    *[f"load_{n}" for n in LOADERS],
]
