"""One episode schema for MiniGUI and every public dataset.

Storage: a folder with ``episodes.jsonl`` (one :class:`Episode` per line, every key always
present so that ``datasets.load_dataset("json", ...)`` infers one stable schema) and the
screenshots as PNG files whose paths are stored relative to that folder.

Units: boxes are normalised ``(x1, y1, x2, y2)`` in ``[0, 1]`` of the screenshot,
``screen_size`` is ``(width, height)`` in pixels, actions are canonical
(:class:`guirl.actions.Action`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from guirl.actions import Action, ActionError

#: Split names the writers use: MiniGUI's four (``guirl.env.export``), the public data sets' official
#: ones (``train``, ``validation``, ``test``; Mind2Web's three test splits) (``guirl.data.loaders._splits``).
SPLITS = (
    "train",
    "validation",
    "test",
    "test_in_domain",
    "test_unseen_task",
    "test_unseen_app",
    "test_task",
    "test_website",
    "test_domain",
)


class SchemaError(ValueError):
    """A record does not fit the schema; the message names the file, line and key."""


def confined_screenshot(path: Any) -> str:
    """A stored screenshot path: a string that, when relative, stays inside the dataset folder it
    is relative to (``..`` out of it raises ``ValueError``, which :func:`read_episodes` names)."""
    if not isinstance(path, str):
        raise ValueError(f"screenshot: expected a path string, got {type(path).__name__}")
    if not os.path.isabs(path) and os.path.normpath(path).split(os.sep)[0] == "..":
        raise ValueError(f"screenshot: {path!r} leads outside the dataset folder (..); paths are relative to it")
    return path


@dataclass(frozen=True)
class UIElement:
    """One node of the accessibility tree: a normalised box and what a screen reader says."""

    element_id: str
    box: tuple[float, float, float, float]
    label: str = ""
    role: str = ""  # button, text, input, toggle, list_item, icon, ...
    clickable: bool = True
    scrollable: bool = False
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "element_id": self.element_id,
            "box": list(self.box),
            "label": self.label,
            "role": self.role,
            "clickable": self.clickable,
            "scrollable": self.scrollable,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "UIElement":
        return cls(**{**d, "box": tuple(d["box"])})


@dataclass(frozen=True)
class Step:
    """One screen and the ground-truth action taken on it."""

    step_id: int
    screenshot: str  # path relative to the dataset folder
    screen_size: tuple[int, int]  # (width, height) px
    action: Action
    low_level_instruction: str = ""
    target_box: tuple[float, float, float, float] | None = None
    candidate_boxes: tuple[tuple[float, float, float, float], ...] = ()
    elements: tuple[UIElement, ...] = ()
    screen_description: str = ""
    intention: str = ""
    progress_summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "screenshot": self.screenshot,
            "screen_size": list(self.screen_size),
            "action": json.dumps(self.action.to_dict(), sort_keys=True),
            "low_level_instruction": self.low_level_instruction,
            "target_box": list(self.target_box) if self.target_box is not None else None,
            "candidate_boxes": [list(b) for b in self.candidate_boxes],
            "elements": [e.to_dict() for e in self.elements],
            "screen_description": self.screen_description,
            "intention": self.intention,
            "progress_summary": self.progress_summary,
            "extra": json.dumps(self.extra, sort_keys=True),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Step":
        action = d["action"]
        action = json.loads(action) if isinstance(action, str) else action
        extra = d.get("extra") or {}
        extra = json.loads(extra) if isinstance(extra, str) else extra
        tb = d.get("target_box")
        return cls(
            step_id=int(d["step_id"]),
            screenshot=confined_screenshot(d["screenshot"]),
            screen_size=(int(d["screen_size"][0]), int(d["screen_size"][1])),
            action=Action.from_dict(action),
            low_level_instruction=d.get("low_level_instruction") or "",
            target_box=tuple(tb) if tb is not None else None,  # type: ignore[arg-type]
            candidate_boxes=tuple(tuple(b) for b in d.get("candidate_boxes") or ()),  # type: ignore[misc]
            elements=tuple(UIElement.from_dict(e) for e in d.get("elements") or ()),
            screen_description=d.get("screen_description") or "",
            intention=d.get("intention") or "",
            progress_summary=d.get("progress_summary") or "",
            extra=extra,
        )


@dataclass(frozen=True)
class Episode:
    """A task: a high-level instruction and its ground-truth trajectory."""

    episode_id: str
    instruction: str
    steps: tuple[Step, ...]
    source: str  # "minigui", "androidcontrol", "guiodyssey", ...
    split: str = "train"
    app: str = ""  # main app; cross-app tasks list all apps in ``apps``
    apps: tuple[str, ...] = ()
    category: str = ""  # item_creation, item_edition, information_query, compound, cross_app, long_loop
    subgoals: tuple[str, ...] = ()
    success: bool | None = None  # whether the recorded trajectory completed the task
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "instruction": self.instruction,
            "steps": [s.to_dict() for s in self.steps],
            "source": self.source,
            "split": self.split,
            "app": self.app,
            "apps": list(self.apps),
            "category": self.category,
            "subgoals": list(self.subgoals),
            "success": self.success,
            "extra": json.dumps(self.extra, sort_keys=True),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Episode":
        extra = d.get("extra") or {}
        extra = json.loads(extra) if isinstance(extra, str) else extra
        return cls(
            episode_id=str(d["episode_id"]),
            instruction=d["instruction"],
            steps=tuple(Step.from_dict(s) for s in d["steps"]),
            source=d["source"],
            split=d.get("split") or "train",
            app=d.get("app") or "",
            apps=tuple(d.get("apps") or ()),
            category=d.get("category") or "",
            subgoals=tuple(d.get("subgoals") or ()),
            success=d.get("success"),
            extra=extra,
        )


def write_episodes(episodes: Iterable[Episode], path: str | Path) -> int:
    """Write episodes as JSONL (sorted keys, so the bytes are deterministic). Returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for ep in episodes:
            f.write(json.dumps(ep.to_dict(), sort_keys=True, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_episodes(path: str | Path) -> Iterator[Episode]:
    """Read a JSONL written by :func:`write_episodes`.

    Raises :class:`SchemaError` naming the file, line and the failing key on the first bad
    record; nothing is skipped silently.
    """
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"{path}: no such file; build it first (make data PROFILE=...)")
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield Episode.from_dict(json.loads(line))
            except (KeyError, TypeError, ValueError, ActionError) as e:
                what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
                raise SchemaError(f"{path}:{lineno}: bad episode record: {what}") from e
