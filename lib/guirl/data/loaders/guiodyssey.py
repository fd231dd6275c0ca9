"""GUI-Odyssey loader: one JSON file per episode.

Units: CLICK/LONG_PRESS ``info`` ``[[x, y]]`` and ``sam2_bbox`` ``[x1, y1, x2, y2]`` are in
``[0, 1000]`` and divided by 1000. SCROLL ``info`` is ``[[x1, y1], [x2, y2]]`` (start and end of
the finger motion, 0-1000), stored with ``convention="finger"`` and the direction GUI-Odyssey's
own converter gives it (``data/format_converter.py::decode_action``: the dominant axis of
start -> end, a tie vertical, and a zero-length swipe ``DOWN``). ``device_info`` ``w``/``h`` give
the screen size in pixels.

Annotations: ``description`` -> ``screen_description``, ``intention`` -> ``intention``,
``context`` -> ``progress_summary``, ``low_level_instruction`` -> ``low_level_instruction``,
``ps`` -> ``step.extra["ps"]``.

Splits: ``Episode.split`` comes from the release's ``splits/<name>_split.json`` (``train`` /
``test`` lists of annotation file names; ``split_file="random"`` by default, or ``task``,
``device``, ``app``: :mod:`guirl.data.loaders._splits`); an annotation file that split does not
list is a bad record. ``split=NAME`` stamps every episode ``NAME`` instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guirl.actions import Action, ActionType
from guirl.data.loaders._splits import ODYSSEY_DEFAULT_SPLIT, read_odyssey_split
from guirl.data.loaders._common import (
    check_path,
    Ctx,
    LoadResult,
    collect,
    list_files,
    norm_box,
    norm_point,
    numbers,
    opt,
    read_json_file,
    report_skipped,
    req,
    screen_size,
)
from guirl.data.schema import Episode, Step

NAME = "guiodyssey"
SCALE = 1000.0  # GUI-Odyssey coordinates are in [0, 1000] (docs/dataset-formats.md)
_KEYS = {"KEY_HOME": "home", "KEY_BACK": "back", "KEY_APPSELECT": "recent"}


def _point(ctx: Ctx, key: str, v: Any) -> tuple[float, float]:
    x, y = numbers(ctx, key, v, 2)
    return norm_point(ctx, key, x, y, SCALE, SCALE)


def odyssey_direction(start: tuple[float, float], end: tuple[float, float]) -> str:
    """``decode_action``'s scroll direction: LEFT/RIGHT by the sign of dx, UP/DOWN by the sign
    of dy (``dy < 0`` is UP, so a zero-length swipe is DOWN), the larger |delta| wins and a tie
    goes to UP/DOWN. Returned lower-case (finger convention)."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    lr = "left" if dx < 0 else "right"
    ud = "up" if dy < 0 else "down"
    return lr if abs(dx) > abs(dy) else ud


def action_from_annotation(ctx: Ctx, step: dict) -> Action:
    """The canonical action of one GUI-Odyssey step annotation (``action``, ``info``)."""
    return _action(ctx, step)


def step_from_annotation(s: dict, *, screen_size: tuple[int, int], ctx: Ctx | None = None, screenshot: str = "") -> Step:
    """One GUI-Odyssey step annotation (``action``, ``info``, ``sam2_bbox``) as a :class:`Step`."""
    ctx = ctx or Ctx("<record>", "step")
    action = _action(ctx, s)
    bb = s.get("sam2_bbox")
    target = None
    if bb not in (None, []):
        target = norm_box(ctx, "sam2_bbox", numbers(ctx, "sam2_bbox", bb, 4), SCALE, SCALE)
    return Step(step_id=int(s.get("step", 0) or 0), screenshot=screenshot, screen_size=screen_size, action=action, target_box=target)


def _action(ctx: Ctx, step: dict) -> Action:
    kind = req(ctx, step, "action", str)
    info = step.get("info")
    if kind in ("CLICK", "LONG_PRESS"):
        if isinstance(info, str):  # decode_action: a CLICK or LONG_PRESS on a key is that key press
            if info in _KEYS:
                return Action(ActionType.PRESS, key=_KEYS[info])  # type: ignore[arg-type]
            raise ctx.error("info", f"{kind} info {info!r} is not one of {sorted(_KEYS)}")
        if not isinstance(info, list) or len(info) != 1:
            raise ctx.error("info", f"{kind} expects [[x, y]] in 0-1000, got {info!r:.80}")
        at = ActionType.CLICK if kind == "CLICK" else ActionType.LONG_PRESS
        return Action(at, point=_point(ctx, "info", info[0]))
    if kind == "SCROLL":
        if not isinstance(info, list) or len(info) != 2:
            raise ctx.error("info", f"SCROLL expects [[x1, y1], [x2, y2]] in 0-1000, got {info!r:.80}")
        p1, p2 = _point(ctx, "info", info[0]), _point(ctx, "info", info[1])
        return Action(
            ActionType.SCROLL, point=p1, point2=p2, direction=odyssey_direction(p1, p2), convention="finger"  # type: ignore[arg-type]
        )
    if kind == "TEXT":
        return Action(ActionType.TYPE, text=req(ctx, step, "info", str))
    if kind == "COMPLETE":
        return Action(ActionType.TERMINATE, status="success")
    if kind == "INCOMPLETE":
        return Action(ActionType.TERMINATE, status="fail")
    raise ctx.error(
        "action", f"unknown action {kind!r}; expected CLICK, SCROLL, LONG_PRESS, TEXT, COMPLETE, INCOMPLETE"
    )


def _episode(ctx: Ctx, d: Any, split: str, screenshot_subdir: str) -> Episode:
    if not isinstance(d, dict):
        raise ctx.error("<file>", f"expected one episode object, got {type(d).__name__}")
    eid = str(req(ctx, d, "episode_id", (str, int)))
    ctx = Ctx(ctx.file, f"episode {eid}")
    dev = req(ctx, d, "device_info", dict)
    w, h = screen_size(ctx, "device_info", req(ctx, dev, "w", int), req(ctx, dev, "h", int))
    task = req(ctx, d, "task_info", dict)
    raw_steps = req(ctx, d, "steps", list)
    n = req(ctx, d, "step_length", int)
    if n != len(raw_steps):
        raise ctx.error("step_length", f"says {n} but 'steps' has {len(raw_steps)} entries")
    app = req(ctx, task, "app", (str, list))
    apps = tuple(app) if isinstance(app, list) else (app,)
    if not all(isinstance(a, str) for a in apps):
        raise ctx.error("app", f"expected a string or list of strings, got {app!r:.80}")
    steps = []
    for i, s in enumerate(raw_steps):
        sctx = ctx.sub(f"step {i}")
        if not isinstance(s, dict):
            raise sctx.error("steps", f"expected an object, got {type(s).__name__}")
        action = _action(sctx, s)
        bb = s.get("sam2_bbox")
        target = None
        if bb not in (None, []):
            target = norm_box(sctx, "sam2_bbox", numbers(sctx, "sam2_bbox", bb, 4), SCALE, SCALE)
        shot = check_path(sctx, "screenshot", req(sctx, s, "screenshot", str))
        extra = {"ps": s["ps"]} if s.get("ps") is not None else {}
        steps.append(
            Step(
                step_id=int(req(sctx, s, "step", int)),
                screenshot=f"{screenshot_subdir}/{shot}" if screenshot_subdir else shot,
                screen_size=(w, h),
                action=action,
                low_level_instruction=opt(sctx, s, "low_level_instruction", str, ""),
                target_box=target,
                screen_description=opt(sctx, s, "description", str, ""),
                intention=opt(sctx, s, "intention", str, ""),
                progress_summary=opt(sctx, s, "context", str, ""),
                extra=extra,
            )
        )
    last = steps[-1].action if steps else None
    success = None
    if last is not None and last.type is ActionType.TERMINATE:
        success = last.status == "success"
    return Episode(
        episode_id=eid,
        instruction=req(ctx, task, "instruction", str),
        steps=tuple(steps),
        source=NAME,
        split=split,
        app=apps[0] if apps else "",
        apps=apps,
        category=opt(ctx, task, "category", str, ""),
        success=success,
        extra={
            "meta_task": opt(ctx, task, "meta_task", str, ""),
            "task": opt(ctx, task, "task", str, ""),
            "device_name": opt(ctx, dev, "device_name", str, ""),
        },
    )


def _split_of(ctx: Ctx, f: Path, split: str | None, splits: dict[str, str], name: str) -> str:
    if split is not None:
        return split
    if f.name not in splits:
        raise ctx.error("<file>", f"{f.name} is in neither list of splits/{name}_split.json")
    return splits[f.name]


def load_guiodyssey(
    path: str | Path,
    *,
    skip_bad: bool = False,
    split: str | None = None,
    split_file: str = ODYSSEY_DEFAULT_SPLIT,
    screenshot_subdir: str = "screenshots",
) -> LoadResult:
    """Load GUI-Odyssey episode JSONs from ``path`` (a file, or ``*.json`` in a folder /
    its ``annotations/`` subfolder). Screenshots are stored as
    ``<screenshot_subdir>/<screenshot>`` relative to the dataset folder (not opened: the screen
    size comes from ``device_info``). Splits (module doc): ``<path>/splits/<split_file>_split.json``,
    or ``split=NAME`` for every episode; a missing split file raises
    :class:`~guirl.data.loaders._splits.SplitFileError` naming it."""
    p = Path(path)
    root = p / "annotations" if (p.is_dir() and (p / "annotations").is_dir()) else p
    base = p if p.is_dir() else p.parent
    if base.name == "annotations":
        base = base.parent
    splits = read_odyssey_split(base, split_file) if split is None else {}
    res = LoadResult()
    items = []
    for f in list_files(root, ("*.json",), "GUI-Odyssey episode JSON files"):
        ctx = Ctx(f, f"file {f.name}")
        items.append(
            (
                ctx,
                lambda f=f, ctx=ctx: _episode(
                    ctx, read_json_file(f, ctx.record), _split_of(ctx, f, split, splits, split_file), screenshot_subdir
                ),
            )
        )
    collect(items, res.episodes, res.skipped, skip_bad, res.adjusted)
    return report_skipped(NAME, res)
