"""The official split files of the public data sets, and the papers' split rule where a data set
ships none. Every loader stamps each episode with its split (``Episode.split``); training reads
``train`` only (:func:`guirl.data.splits.load_splits` refuses a folder where an episode id is in
``train`` and in another split).

| data set | split | where it comes from |
|---|---|---|
| AndroidControl | ``train`` / ``validation`` / ``test`` from ``splits.json`` (episode ids); ``test_subsplits.json`` (``IDD``, ``app_unseen``, ``task_unseen``, ``category_unseen``, lists that may overlap) is kept per episode in ``Episode.extra["test_subsplits"]`` | the release (``gs://gresearch/android_control/``); CCPO App. A.2 uses "the official split", Co-EPG App. A "the standard data processing" of the data set's authors |
| GUI-Odyssey | ``splits/<name>_split.json``, ``{"train": [annotation file], "test": [...]}``; ``random_split`` unless another is named (``task``, ``device``, ``app``) | the release (``data/splits/``, read by its ``format_converter.py``, whose default is ``random_split.json``) |
| Multimodal-Mind2Web | the parquet file name's prefix: ``train``, ``test_task``, ``test_website``, ``test_domain`` | the Hub release's shard names; Co-EPG App. A (train 1,009 tasks, test 1,013 in three splits) |
| AITZ | the release folders ``<root>/train`` and ``<root>/test`` | CoAT's release layout |
| AMEX | no split files: every episode ``test`` | CES Sec. 5.1 / App. B.1: CES evaluates on AMEX and trains on GUI-Odyssey only (``split="train"`` makes it a training corpus, as AgentCPM-GUI Sec. 2.3 uses it) |
| converted files (UI-S1 / CCPO std JSONL, GUI-R1 parquet) | the file name: ``test`` / ``evaluation`` / ``eval`` -> ``test``, ``train`` -> ``train`` (:func:`split_from_file_name`) | the code bases publish their test and training files under such names (``android_control_evaluation_std.jsonl``, ``guio_test.jsonl``, ``androidcontrol_high_test.parquet``) |

A split file that is missing stops the conversion with one line naming the file and the fix; an
episode the split file does not list is a bad record (named, and counted with ``skip_bad``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = [
    "AC_SPLITS",
    "AC_SPLITS_FILE",
    "AC_TEST_SUBSPLITS",
    "AC_TEST_SUBSPLITS_FILE",
    "ODYSSEY_SPLIT_FILES",
    "ODYSSEY_DEFAULT_SPLIT",
    "MIND2WEB_SPLITS",
    "AITZ_SPLITS",
    "AMEX_DEFAULT_SPLIT",
    "SplitFileError",
    "read_androidcontrol_splits",
    "read_test_subsplits",
    "read_odyssey_split",
    "split_from_file_name",
]

#: AndroidControl's ``splits.json`` keys, in the release's order.
AC_SPLITS: tuple[str, ...] = ("train", "validation", "test")
AC_SPLITS_FILE = "splits.json"
#: AndroidControl's ``test_subsplits.json`` keys.
AC_TEST_SUBSPLITS: tuple[str, ...] = ("IDD", "app_unseen", "task_unseen", "category_unseen")
AC_TEST_SUBSPLITS_FILE = "test_subsplits.json"
#: GUI-Odyssey's four split files (``<root>/splits/<name>_split.json``).
ODYSSEY_SPLIT_FILES: tuple[str, ...] = ("random", "task", "device", "app")
ODYSSEY_DEFAULT_SPLIT = "random"  # GUI-Odyssey data/format_converter.py: split_fp default random_split.json
#: Multimodal-Mind2Web's shard-name prefixes.
MIND2WEB_SPLITS: tuple[str, ...] = ("train", "test_task", "test_website", "test_domain")
#: AITZ's release folders.
AITZ_SPLITS: tuple[str, ...] = ("train", "test")
#: AMEX ships no split: CES evaluates on all of it (CES Sec. 5.1, App. B.1).
AMEX_DEFAULT_SPLIT = "test"


class SplitFileError(ValueError):
    """A split file is missing or malformed; the message names the file and the fix."""


def _read(path: Path, what: str, fix: str) -> Any:
    if not path.is_file():
        raise SplitFileError(f"{path}: no {what}; {fix}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SplitFileError(f"{path}: not a JSON file ({e}); {fix}") from None


def read_androidcontrol_splits(path: str | Path) -> dict[str, str]:
    """``{episode id (str): "train" | "validation" | "test"}`` from AndroidControl's ``splits.json``
    (``{"train": [ids], "validation": [ids], "test": [ids]}``, integer episode ids). A missing key,
    an id that is not an integer, or an id in two splits is a :class:`SplitFileError` naming it."""
    path = Path(path)
    fix = (
        "AndroidControl ships its official split as splits.json beside the TFRecords "
        "(gs://gresearch/android_control/splits.json): put it there or pass splits_file=, "
        "or pass split=NAME to stamp every episode one split"
    )
    d = _read(path, "AndroidControl split file", fix)
    if not isinstance(d, dict):
        raise SplitFileError(f"{path}: expected an object with {list(AC_SPLITS)}, got {type(d).__name__}")
    out: dict[str, str] = {}
    for split in AC_SPLITS:
        ids = d.get(split)
        if not isinstance(ids, list):
            raise SplitFileError(f"{path}: key {split!r} must be a list of episode ids (keys present: {sorted(d)})")
        for v in ids:
            if isinstance(v, bool) or not isinstance(v, int):
                raise SplitFileError(f"{path}: {split!r} holds {v!r}, not an integer episode id")
            key = str(v)
            if key in out:
                raise SplitFileError(f"{path}: episode {v} is in {out[key]!r} and in {split!r}")
            out[key] = split
    return out


def read_test_subsplits(path: str | Path, splits: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """``{episode id: (subsplit names, sorted)}`` from AndroidControl's ``test_subsplits.json``
    (``{"IDD": [ids], "app_unseen": [...], ...}``); every listed id must be a ``test`` episode of
    ``splits`` (:func:`read_androidcontrol_splits`), else a :class:`SplitFileError`. ``{}`` when
    the file is absent (the subsplits are optional)."""
    path = Path(path)
    if not path.is_file():
        return {}
    d = _read(path, "AndroidControl test subsplit file", "remove it or replace it with the release's")
    if not isinstance(d, dict):
        raise SplitFileError(f"{path}: expected an object of id lists, got {type(d).__name__}")
    out: dict[str, list[str]] = {}
    for name, ids in d.items():
        if not isinstance(ids, list):
            raise SplitFileError(f"{path}: {name!r} must be a list of episode ids")
        for v in ids:
            if isinstance(v, bool) or not isinstance(v, int):
                raise SplitFileError(f"{path}: {name!r} holds {v!r}, not an integer episode id")
            if splits.get(str(v)) != "test":
                raise SplitFileError(
                    f"{path}: episode {v} of {name!r} is {splits.get(str(v), 'in no split')!r} in splits.json, not test"
                )
            out.setdefault(str(v), []).append(str(name))
    return {k: tuple(sorted(v)) for k, v in out.items()}


def read_odyssey_split(root: str | Path, name: str = ODYSSEY_DEFAULT_SPLIT) -> dict[str, str]:
    """``{annotation file name: "train" | "test"}`` from GUI-Odyssey's
    ``<root>/splits/<name>_split.json`` (``name`` one of :data:`ODYSSEY_SPLIT_FILES`). A file name
    in both lists is a :class:`SplitFileError`."""
    if name not in ODYSSEY_SPLIT_FILES:
        raise ValueError(f"GUI-Odyssey split {name!r}: use one of {ODYSSEY_SPLIT_FILES}")
    path = Path(root) / "splits" / f"{name}_split.json"
    fix = (
        "GUI-Odyssey ships its splits as splits/{random,task,device,app}_split.json beside annotations/ "
        "(OpenGVLab/GUI-Odyssey data/splits): put them there, or pass split=NAME to stamp every episode one split"
    )
    d = _read(path, "GUI-Odyssey split file", fix)
    if not isinstance(d, dict):
        raise SplitFileError(f"{path}: expected an object with 'train' and 'test', got {type(d).__name__}")
    out: dict[str, str] = {}
    for split in ("train", "test"):
        files = d.get(split)
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise SplitFileError(f"{path}: key {split!r} must be a list of annotation file names")
        for f in files:
            key = Path(f).name
            if key in out:
                raise SplitFileError(f"{path}: {f!r} is in {out[key]!r} and in {split!r}")
            out[key] = split
    return out


_TEST_WORDS = frozenset({"test", "evaluation", "eval"})


def split_from_file_name(path: str | Path) -> str:
    """The split a converted file's name states: ``test`` when a word of its stem (split at
    ``_``, ``-``, ``.``) is ``test``, ``evaluation`` or ``eval``; ``train`` when one is ``train``
    (e.g. ``android_control_evaluation_std.jsonl`` -> test, ``train-00000.parquet`` -> train). A
    name stating neither or both is a :class:`SplitFileError` naming the file and the fix."""
    import re

    words = set(re.split(r"[_\-.]+", Path(path).stem.lower()))
    test, train = bool(words & _TEST_WORDS), "train" in words
    if test != train:
        return "test" if test else "train"
    raise SplitFileError(
        f"{path}: the file name says {'both train and test' if test else 'neither train nor test'}; name the file "
        "after its split (..._test.jsonl, ..._train.jsonl) or pass split=NAME"
    )
