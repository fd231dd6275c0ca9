"""Split folders of a prepared dataset, whichever layout wrote it.

Two layouts exist (both written by ``00_data_prep``):

* MiniGUI (``build_minigui_dataset``): ``<root>/<split>/episodes.jsonl`` with screenshot paths
  relative to ``<root>/<split>``;
* a converted public dataset (``guirl.data.loaders.convert_dataset``): ``<root>/episodes.jsonl``
  holding every split (``Episode.split``) and ``<root>/manifest.json`` whose ``image_root`` is the
  folder screenshot paths are relative to.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

from guirl.data.schema import Episode, SchemaError, read_episodes


@dataclass(frozen=True)
class Split:
    """The episodes of one split and the folder their screenshot paths are relative to."""

    name: str
    episodes: tuple[Episode, ...]
    image_root: Path


def load_splits(root: str | Path) -> dict[str, Split]:
    """Every split under ``root`` (train first, then the others sorted by name).

    Raises :class:`~guirl.data.schema.SchemaError` naming ``root`` when neither layout is there.
    """
    root = Path(root)
    per_split = sorted(p.parent for p in root.glob("*/episodes.jsonl"))
    out: dict[str, Split] = {}
    if per_split:
        for folder in per_split:
            out[folder.name] = Split(folder.name, tuple(read_episodes(folder / "episodes.jsonl")), folder)
    elif (root / "episodes.jsonl").exists():
        manifest = root / "manifest.json"
        image_root = Path(json.loads(manifest.read_text())["image_root"]) if manifest.exists() else root
        groups: dict[str, list[Episode]] = {}
        for ep in read_episodes(root / "episodes.jsonl"):
            groups.setdefault(ep.split, []).append(ep)
        out = {k: Split(k, tuple(v), image_root) for k, v in groups.items()}
    else:
        raise SchemaError(
            f"{root}: no episodes.jsonl and no <split>/episodes.jsonl; prepare the data first "
            "(make nb-00_data_prep, with -p source NAME for a public dataset)"
        )
    return dict(sorted(out.items(), key=lambda kv: (kv[0] != "train", kv[0])))


def swap_goals(split: Split, seed: int) -> Split:
    """``split`` with every episode's goal (``Episode.instruction``) replaced by another episode's.

    A counterfactual for "does the agent read the goal?": the screens, step instructions, ground
    truth and episode order stay, so every step is scored as before and pairs with its own step
    under the true goal. Episodes are visited in an order drawn with ``seed`` and each takes the
    goal of the next one in that cycle whose goal text differs from its own: when all goal texts
    differ, a permutation with no fixed point. An episode keeps its goal only when every goal of
    the split is the same text.
    """
    eps = split.episodes
    order = list(range(len(eps)))
    random.Random(seed).shuffle(order)
    goals = [eps[i].instruction for i in order]
    new: dict[int, str] = {}
    for pos, i in enumerate(order):
        own = eps[i].instruction
        nxt = (goals[(pos + k) % len(goals)] for k in range(1, len(goals)))
        new[i] = next((g for g in nxt if g != own), own)
    return replace(split, episodes=tuple(replace(ep, instruction=new[i]) for i, ep in enumerate(eps)))
