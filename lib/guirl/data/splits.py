"""Split folders of a prepared dataset, whichever layout wrote it.

Two layouts exist (both written by ``00_data_prep``):

* MiniGUI (``build_minigui_dataset``): ``<root>/<split>/episodes.jsonl`` with screenshot paths
  relative to ``<root>/<split>``;
* a converted public dataset (``guirl.data.loaders.convert_dataset``): ``<root>/episodes.jsonl``
  holding every split (``Episode.split``) and ``<root>/manifest.json`` whose ``image_root`` is the
  folder screenshot paths are relative to.

Both writers record in ``manifest.json`` how many episodes and steps they wrote (MiniGUI per split
in ``counts``, a converted dataset in ``n_episodes`` / ``n_steps``); :func:`load_splits` checks the
files it reads against them, so a file cut short at a line boundary is an error, not half a data
set. :func:`check_written` does the same for any other file a manifest counts.

No test episode reaches training: training reads ``train`` only, evaluation every split but
``train`` and ``validation`` (:func:`is_test_split`), and :func:`load_splits` refuses a folder
where one episode id is in ``train`` and in another split (:func:`check_disjoint`). The loaders
take each split from the data set's official split files or the papers' rule
(:mod:`guirl.data.loaders._splits`); :func:`subsplits` gives the views of AndroidControl's
(overlapping) test subsplits.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from guirl.data.schema import Episode, SchemaError, read_episodes

#: Splits that hold no test data: what training reads and the official validation split.
NOT_TEST: tuple[str, ...] = ("train", "validation")


@dataclass(frozen=True)
class Split:
    """The episodes of one split and the folder their screenshot paths are relative to."""

    name: str
    episodes: tuple[Episode, ...]
    image_root: Path


def read_manifest(root: str | Path) -> dict:
    """``<root>/manifest.json`` (``{}`` when there is none)."""
    path = Path(root) / "manifest.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def check_written(path: Path, what: str, found: int, written: int | None) -> None:
    """Raise :class:`~guirl.data.schema.SchemaError` when ``path`` holds ``found`` ``what`` but its
    manifest says ``written`` were written (``None``: the manifest does not count them)."""
    if written is not None and found != int(written):
        raise SchemaError(
            f"{path}: {found} {what}, but manifest.json says {written} were written (the file was cut short or "
            "changed after it was written); write the data again (make nb-00_data_prep)"
        )


def _check_episodes(path: Path, episodes: tuple[Episode, ...] | list[Episode], counted: dict) -> None:
    check_written(path, "episodes", len(episodes), counted.get("episodes"))
    check_written(path, "steps", sum(len(e.steps) for e in episodes), counted.get("steps"))


def load_splits(root: str | Path) -> dict[str, Split]:
    """Every split under ``root`` (train first, then the others sorted by name), each file checked
    against the counts of ``manifest.json`` when it has them (module doc).

    A published folder (a link to a version, :mod:`guirl.data.publish`) is read at the version it
    points to when called, which a rebuild meanwhile leaves in place: the splits and their image
    folders are of one build. Raises :class:`~guirl.data.schema.SchemaError` naming ``root`` when
    neither layout is there, naming the file whose episode or step count differs from the
    manifest's, and naming the episodes that are in ``train`` and in another split
    (:func:`check_disjoint`).
    """
    from guirl.data.publish import use_published

    root = use_published(root) or Path(root)  # a published folder: the version it points to now, held
    manifest = read_manifest(root)
    per_split = sorted(p.parent for p in root.glob("*/episodes.jsonl"))
    out: dict[str, Split] = {}
    if per_split:
        counts = manifest.get("counts") or {}
        for folder in per_split:
            episodes = tuple(read_episodes(folder / "episodes.jsonl"))
            _check_episodes(folder / "episodes.jsonl", episodes, counts.get(folder.name) or {})
            out[folder.name] = Split(folder.name, episodes, folder)
    elif (root / "episodes.jsonl").exists():
        image_root = Path(manifest["image_root"]) if "image_root" in manifest else root
        episodes = list(read_episodes(root / "episodes.jsonl"))
        _check_episodes(
            root / "episodes.jsonl", episodes, {"episodes": manifest.get("n_episodes"), "steps": manifest.get("n_steps")}
        )
        groups: dict[str, list[Episode]] = {}
        for ep in episodes:
            groups.setdefault(ep.split, []).append(ep)
        out = {k: Split(k, tuple(v), image_root) for k, v in groups.items()}
    else:
        raise SchemaError(
            f"{root}: no episodes.jsonl and no <split>/episodes.jsonl; prepare the data first "
            "(make nb-00_data_prep, with -p source NAME for a public dataset)"
        )
    check_disjoint({k: v.episodes for k, v in out.items()}, root)
    return dict(sorted(out.items(), key=lambda kv: (kv[0] != "train", kv[0])))


def train_split(root: str | Path) -> Split:
    """The ``train`` split of the data folder ``root`` (:func:`load_splits`); a ``ValueError``
    naming the folder and the splits it has when there is none (a stage trains on it)."""
    splits = load_splits(root)
    if "train" not in splits:
        raise ValueError(f"{root}: no 'train' split (found {sorted(splits)}); training reads the train split")
    return splits["train"]


def is_test_split(name: str) -> bool:
    """Whether split ``name`` is test data (every split but :data:`NOT_TEST`)."""
    return name not in NOT_TEST


#: The test split a paper-comparison table reads, in order of preference: MiniGUI's in-domain
#: split, then a converted data set's single ``test`` split (AndroidControl, GUI-Odyssey, AITZ,
#: AMEX), then Mind2Web's cross-task split (the in-domain one of its three).
PRIMARY_TEST_SPLITS: tuple[str, ...] = ("test_in_domain", "test", "test_task")


def primary_test_split(names: Iterable[str]) -> str:
    """The split of ``names`` (a run's test splits) that the notebooks' paper-comparison tables read
    (:data:`PRIMARY_TEST_SPLITS`, else the first test split); a ``ValueError`` naming the splits
    when ``names`` holds no test split."""
    names = [n for n in names if is_test_split(n)]
    for name in PRIMARY_TEST_SPLITS:
        if name in names:
            return name
    if not names:
        raise ValueError("no test split to compare with the papers (a prepared data set has test splits: run 00)")
    return names[0]


def check_disjoint(groups: dict[str, Sequence[Episode]], where: str | Path) -> None:
    """Raise :class:`~guirl.data.schema.SchemaError` naming ``where`` and the episode ids when an
    episode id of ``groups["train"]`` is also in another split (a test episode would be trained
    on)."""
    train = {e.episode_id for e in groups.get("train", ())}
    for name, eps in groups.items():
        if name == "train":
            continue
        both = sorted(train & {e.episode_id for e in eps})
        if both:
            raise SchemaError(
                f"{where}: episode(s) {both[:5]} are in 'train' and in {name!r}; a test episode must never be "
                "trained on: convert the data again with its official split files (make nb-00_data_prep)"
            )


def subsplits(split: Split, key: str = "test_subsplits") -> dict[str, Split]:
    """Views of ``split`` by the subsplit names its episodes list in ``Episode.extra[key]``
    (AndroidControl's ``IDD``, ``app_unseen``, ``task_unseen``, ``category_unseen``; an episode
    may be in several), named ``"<split>/<subsplit>"``, sorted by name; ``{}`` when no episode
    lists one."""
    names = sorted({n for e in split.episodes for n in (e.extra.get(key) or ())})
    return {
        f"{split.name}/{n}": replace(
            split, name=f"{split.name}/{n}", episodes=tuple(e for e in split.episodes if n in (e.extra.get(key) or ()))
        )
        for n in names
    }


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
