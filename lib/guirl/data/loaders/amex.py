"""AMEX loader: ``instruction_anno/*.json`` episodes + ``element_anno/<image>.json`` elements.

Units: ``touch_coord`` / ``lift_coord`` are ``[x, y]`` pixels and element ``bbox`` is
``[x1, y1, x2, y2]`` pixels, normalised by the screenshot size read from the image file
(``<screenshot_subdir>/<image_path>`` under the dataset folder; the JSON does not carry it).
SWIPE is a finger motion touch -> lift: ``convention="finger"``, dominant-axis direction.
TASK_COMPLETE / TASK_IMPOSSIBLE -> terminate success / fail.

Elements: ``clickable_elements`` and ``scrollable_elements`` of ``element_anno/<stem>.json``
where ``<stem>`` is the screenshot file name without extension; label = ``functionality``
(``xml_desc`` when empty). A screenshot without an element file gets no elements and
``step.extra["element_anno"] = "missing"`` (stated, not silent). Target box of a TAP = the
smallest clickable element containing the touch point; its candidate boxes are the clickable
elements containing the touch point, smallest first (never the rest of the screen, so that a rule
accepting a click "in any candidate box" accepts only the acted element and its containers); every
element stays in ``Step.elements``.

Split: AMEX ships none. Every episode is ``test`` by default (CES evaluates on AMEX and trains on
GUI-Odyssey only, CES Sec. 5.1 and App. B.1); ``split="train"`` makes it a training corpus
(:mod:`guirl.data.loaders._splits`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guirl.actions import Action, ActionType
from guirl.data.loaders._splits import AMEX_DEFAULT_SPLIT
from guirl.data.loaders.aitz import containing_boxes
from guirl.data.loaders._common import (
    check_path,
    Ctx,
    LoadResult,
    collect,
    finger_direction,
    image_size,
    list_files,
    norm_box,
    norm_point,
    numbers,
    opt,
    read_json_file,
    report_skipped,
    req,
    smallest_containing,
)
from guirl.data.schema import Episode, Step, UIElement

NAME = "amex"
_SIMPLE = {
    "PRESS_BACK": Action(ActionType.PRESS, key="back"),
    "PRESS_HOME": Action(ActionType.PRESS, key="home"),
    "PRESS_ENTER": Action(ActionType.PRESS, key="enter"),
    "TASK_COMPLETE": Action(ActionType.TERMINATE, status="success"),
    "TASK_IMPOSSIBLE": Action(ActionType.TERMINATE, status="fail"),
}


def _elements(ctx: Ctx, f: Path, w: int, h: int) -> tuple[UIElement, ...]:
    d = read_json_file(f, ctx.record)
    ectx = Ctx(f, ctx.record)
    out = []
    for key, clickable, scrollable in (("clickable_elements", True, False), ("scrollable_elements", False, True)):
        for j, e in enumerate(opt(ectx, d, key, list, [])):
            box = norm_box(ectx, f"{key}[{j}].bbox", numbers(ectx, f"{key}[{j}].bbox", req(ectx, e, "bbox", list), 4), w, h, clamp=True)
            if box is None:
                continue
            func = opt(ectx, e, "functionality", str, "")
            desc = opt(ectx, e, "xml_desc", (str, list), "")
            desc = " ".join(map(str, desc)) if isinstance(desc, list) else desc
            out.append(
                UIElement(
                    element_id=f"{key[0]}{j}",
                    box=box,
                    label=func or desc,
                    role="scrollable" if scrollable else "clickable",
                    clickable=clickable,
                    scrollable=scrollable,
                    text=desc,
                )
            )
    return tuple(out)


def _action(ctx: Ctx, s: dict, w: int, h: int) -> Action:
    kind = req(ctx, s, "action", str)
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind == "TYPE":
        return Action(ActionType.TYPE, text=req(ctx, s, "type_text", str))
    if kind in ("TAP", "SWIPE"):
        tx, ty = numbers(ctx, "touch_coord", req(ctx, s, "touch_coord", list), 2)
        touch = norm_point(ctx, "touch_coord", tx, ty, w, h)
        if kind == "TAP":
            return Action(ActionType.CLICK, point=touch)
        lx, ly = numbers(ctx, "lift_coord", req(ctx, s, "lift_coord", list), 2)
        lift = norm_point(ctx, "lift_coord", lx, ly, w, h)
        if lift == touch:
            raise ctx.error("lift_coord", "SWIPE with touch_coord == lift_coord has no direction")
        return Action(
            ActionType.SCROLL, point=touch, point2=lift, direction=finger_direction(touch, lift), convention="finger"  # type: ignore[arg-type]
        )
    raise ctx.error("action", f"unknown action {kind!r}; expected TAP, SWIPE, TYPE, {', '.join(_SIMPLE)}")


def _episode(ctx: Ctx, d: Any, root: Path, split: str, subdir: str) -> Episode:
    if not isinstance(d, dict):
        raise ctx.error("<file>", f"expected an episode object, got {type(d).__name__}")
    eid = str(req(ctx, d, "episode_id", (str, int)))
    ctx = Ctx(ctx.file, f"episode {eid}")
    steps = []
    for i, s in enumerate(req(ctx, d, "steps", list)):
        sctx = ctx.sub(f"step {i}")
        img = check_path(sctx, "image_path", req(sctx, s, "image_path", str))
        rel = f"{subdir}/{img}" if subdir else img
        w, h = image_size(sctx, "image_path", root / rel)
        action = _action(sctx, s, w, h)
        ef = root / "element_anno" / f"{Path(img).stem}.json"
        elements = _elements(sctx, ef, w, h) if ef.is_file() else ()
        target = None
        clickable = [e.box for e in elements if e.clickable]
        point = action.point if action.type is ActionType.CLICK else None
        if point is not None:
            target = smallest_containing(point, clickable)  # type: ignore[arg-type]
        steps.append(
            Step(
                step_id=i,
                screenshot=rel,
                screen_size=(w, h),
                action=action,
                target_box=target,
                candidate_boxes=containing_boxes(point, clickable),
                elements=elements,
                extra={} if ef.is_file() else {"element_anno": "missing"},
            )
        )
    last = steps[-1].action if steps else None
    return Episode(
        episode_id=eid,
        instruction=req(ctx, d, "instruction", str),
        steps=tuple(steps),
        source=NAME,
        split=split,
        success=(last.status == "success") if last is not None and last.type is ActionType.TERMINATE else None,
    )


def load_amex(
    path: str | Path, *, skip_bad: bool = False, split: str = AMEX_DEFAULT_SPLIT, screenshot_subdir: str = "screenshot"
) -> LoadResult:
    """Load AMEX from its folder (``instruction_anno/``, ``element_anno/``, screenshots under
    ``screenshot_subdir``). Screenshot paths are stored relative to ``path``."""
    root = Path(path)
    res = LoadResult()
    items = []
    for f in list_files(root / "instruction_anno", ("*.json",), "AMEX instruction_anno/*.json files"):
        ctx = Ctx(f, f"file {f.name}")
        items.append((ctx, lambda f=f, ctx=ctx: _episode(ctx, read_json_file(f, ctx.record), root, split, screenshot_subdir)))
    collect(items, res.episodes, res.skipped, skip_bad, res.adjusted)
    return report_skipped(NAME, res)
