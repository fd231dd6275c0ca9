"""GUI-R1 parquet loader: one row = one step, loaded as a one-step Episode.

Columns: ``image`` (bytes), ``instruction``, ``history``, ``task_type`` (high / low),
``gt_action``, ``gt_bbox`` (2 numbers = a point, 4 = a box whose centre is the point),
``gt_input_text``, ``group``. ``gt_bbox`` units (``bbox_units``): the published test parquets
store **pixels** of the screenshot (GUI-R1's ``eval_omni.py`` subtracts the predicted pixels
from ``gt_bbox[0:2]``); some training files store ``[0, 1]``. ``"auto"`` (default) reads a row
whose values all lie in ``[0, 1]`` as normalised, any other as pixels (a pixel point at the very
top-left corner would be misread; pass the units when known); ``[-100, -100]`` is GUI-R1's
placeholder for "no point" (a select without a point is read as typing its option, counted:
guirl's select names its element). Type, open_app, select and scroll steps keep
``gt_input_text`` in ``Action.text`` (GUI-R1 scores them by it; a scroll's is its direction
word).

Action names handled: ``click``, ``long_press``, ``type`` (``gt_input_text``), ``select``,
``hover``, ``open_app`` (text = ``gt_input_text``), ``press_back`` / ``press_home`` /
``press_enter``, ``wait``, ``complete`` (-> terminate success), ``scroll`` (direction in
``gt_input_text``). Any other name raises. The convention of GUI-R1's scroll direction is not
documented, so a scroll row raises unless ``scroll_convention="finger"`` or ``"content"`` is
given explicitly.

``task_type == "low"`` marks ``instruction`` as the step instruction (also stored as the
step's ``low_level_instruction``). Episode id: ``<file stem>-<row>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guirl.actions import Action, ActionType
from guirl.data.loaders._splits import split_from_file_name
from guirl.data.loaders._common import (
    Ctx,
    LoadResult,
    as_str,
    collect,
    list_files,
    need_image_dir,
    numbers,
    report_skipped,
    save_png,
)
from guirl.data.schema import Episode, Step
from guirl.geometry import box_center

NAME = "guir1"
COLUMNS = ("image", "instruction", "history", "task_type", "gt_action", "gt_bbox", "gt_input_text", "group")
_POINT = {"click": ActionType.CLICK, "long_press": ActionType.LONG_PRESS, "hover": ActionType.HOVER}
_PRESS = {"press_back": "back", "press_home": "home", "press_enter": "enter"}


BBOX_UNITS = ("auto", "pixels", "normalised")
#: GUI-R1's placeholder gt_bbox of a step without a point.
NO_POINT = [-100.0, -100.0]


def _bbox(ctx: Ctx, v: Any, w: int, h: int, units: str) -> tuple[tuple[float, float] | None, tuple | None]:
    if v is None:
        return None, None
    vals = numbers(ctx, "gt_bbox", v.tolist() if hasattr(v, "tolist") else v)
    if len(vals) == 0 or vals == NO_POINT:
        return None, None
    if len(vals) not in (2, 4):
        raise ctx.error("gt_bbox", f"expected 2 numbers (point) or 4 (box), got {len(vals)}")
    pixels = units == "pixels" or (units == "auto" and not all(0.0 <= x <= 1.0 for x in vals))
    sx, sy = (float(w), float(h)) if pixels else (1.0, 1.0)
    norm = [vals[i] / (sx if i % 2 == 0 else sy) for i in range(len(vals))]
    if not all(0.0 <= x <= 1.0 for x in norm):
        raise ctx.error("gt_bbox", f"{vals} is outside the {w}x{h} screen ({'pixels' if pixels else 'normalised'})")
    if len(norm) == 2:
        return (norm[0], norm[1]), None
    if norm[2] < norm[0] or norm[3] < norm[1]:
        raise ctx.error("gt_bbox", f"box {vals} has x2 < x1 or y2 < y1")
    box = (norm[0], norm[1], norm[2], norm[3])
    return box_center(box), box


def step_from_row(
    row: dict,
    *,
    screen_size: tuple[int, int],
    bbox_units: str = "auto",
    scroll_convention: str | None = None,
    ctx: Ctx | None = None,
    screenshot: str = "",
) -> Step:
    """One GUI-R1 row (``gt_action``, ``gt_bbox``, ``gt_input_text``; ``instruction`` and
    ``task_type`` optional) as a :class:`Step` (no image access; ``screen_size`` in pixels)."""
    if bbox_units not in BBOX_UNITS:
        raise ValueError(f"bbox_units must be one of {BBOX_UNITS}, got {bbox_units!r}")
    ctx = ctx or Ctx("<record>", "row")
    w, h = screen_size
    kind = as_str(ctx, "gt_action", row["gt_action"])
    text = row.get("gt_input_text")
    text = "" if text is None else as_str(ctx, "gt_input_text", text)
    point, box = _bbox(ctx, row.get("gt_bbox"), w, h, bbox_units)

    def need_point() -> tuple[float, float]:
        if point is None:
            raise ctx.error("gt_bbox", f"{kind} needs a point or box, got {row.get('gt_bbox')!r}")
        return point

    if kind in _POINT:
        action = Action(_POINT[kind], point=need_point())
    elif kind == "type":
        action = Action(ActionType.TYPE, text=text, point=point)
    elif kind == "select" and point is None:
        # guirl's select names its element's point; GUI-R1 scores a select by its text alone
        ctx.adjust("gt_action", "select without a point read as typing its option text")
        action = Action(ActionType.TYPE, text=text, extra={"gui_r1_action": "select"})
    elif kind == "select":
        action = Action(ActionType.SELECT, point=need_point(), text=text)
    elif kind == "open_app":
        action = Action(ActionType.OPEN_APP, text=text)
    elif kind in _PRESS:
        action = Action(ActionType.PRESS, key=_PRESS[kind])  # type: ignore[arg-type]
    elif kind == "wait":
        action = Action(ActionType.WAIT)
    elif kind == "complete":
        action = Action(ActionType.TERMINATE, status="success")
    elif kind == "scroll":
        if scroll_convention is None:
            raise ctx.error(
                "gt_action",
                "scroll direction convention of GUI-R1 is not documented; pass "
                "scroll_convention='finger' or 'content' to load_guir1",
            )
        if text not in ("up", "down", "left", "right"):
            raise ctx.error("gt_input_text", f"scroll direction must be up/down/left/right, got {text!r}")
        action = Action(ActionType.SCROLL, direction=text, convention=scroll_convention, point=point, text=text)  # type: ignore[arg-type]
    else:
        raise ctx.error("gt_action", f"unknown action {kind!r}; expected one of {sorted([*_POINT, *_PRESS, 'type', 'select', 'open_app', 'wait', 'complete', 'scroll'])}")
    task_type = row.get("task_type")
    instr = row.get("instruction")
    return Step(
        step_id=0,
        screenshot=screenshot,
        screen_size=(w, h),
        action=action,
        low_level_instruction=instr if task_type == "low" and isinstance(instr, str) else "",
        target_box=box,  # type: ignore[arg-type]
    )


def _row(ctx: Ctx, row: dict, r: int, stem: str, out_dir: Path, split: str, conv: str | None, units: str) -> Episode:
    img = row["image"]
    if isinstance(img, dict):
        img = img.get("bytes")
    rel, (w, h) = save_png(ctx, "image", img, out_dir, f"{NAME}/{stem}/{r}.png")
    task_type = as_str(ctx, "task_type", row["task_type"])
    if task_type not in ("high", "low"):
        raise ctx.error("task_type", f"expected 'high' or 'low', got {task_type!r}")
    step = step_from_row(row, screen_size=(w, h), bbox_units=units, scroll_convention=conv, ctx=ctx, screenshot=rel)
    instr = as_str(ctx, "instruction", row["instruction"])
    hist = row["history"]
    hist = hist.tolist() if hasattr(hist, "tolist") else hist
    return Episode(
        episode_id=f"{stem}-{r}",
        instruction=instr,
        steps=(step,),
        source=NAME,
        split=split,
        extra={"history": hist if isinstance(hist, (str, list)) or hist is None else str(hist),
               "task_type": task_type, "group": "" if row["group"] is None else str(row["group"])},
    )


def load_guir1(
    path: str | Path,
    *,
    image_dir: str | Path | None = None,
    skip_bad: bool = False,
    split: str | None = None,
    scroll_convention: str | None = None,
    bbox_units: str = "auto",
) -> LoadResult:
    """Load GUI-R1 parquet file(s); screenshots written as PNG under ``image_dir``;
    ``bbox_units`` as in the module docstring. ``split``: the split of every episode; ``None``
    (default) takes each file's from its name (``androidcontrol_high_test.parquet`` -> test,
    :func:`guirl.data.loaders._splits.split_from_file_name`)."""
    import pandas as pd

    if bbox_units not in BBOX_UNITS:
        raise ValueError(f"bbox_units must be one of {BBOX_UNITS}, got {bbox_units!r}")
    if scroll_convention not in (None, "finger", "content"):
        raise ValueError(f"scroll_convention must be 'finger', 'content' or None, got {scroll_convention!r}")
    out_dir = need_image_dir(NAME, image_dir)
    res = LoadResult()
    files = list_files(path, ("*.parquet", "**/*.parquet"), "GUI-R1 parquet files")
    fsplits = {f: split or split_from_file_name(f) for f in files}
    for f in files:
        df = pd.read_parquet(f)
        missing = [c for c in COLUMNS if c not in df.columns]
        if missing:
            err = Ctx(f, "<all rows>").error(",".join(missing), f"columns missing (present: {list(df.columns)})")
            if not skip_bad:
                raise err
            res.skipped.append((err.file, err.record, err.problem))
            continue
        items = []
        for r in range(len(df)):
            ctx = Ctx(f, f"row {r}")
            items.append(
                (
                    ctx,
                    lambda r=r, ctx=ctx: _row(
                        ctx, df.iloc[r].to_dict(), r, f.stem, out_dir, fsplits[f], scroll_convention, bbox_units
                    ),
                )
            )
        collect(items, res.episodes, res.skipped, skip_bad, res.adjusted)
    return report_skipped(NAME, res)
