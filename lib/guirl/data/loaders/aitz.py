"""AITZ (Android in the Zoo) loader: one JSON file per episode holding a list of steps.

Actions follow the AITW ``result_action_type`` enum: 0 long point (AgentCPM-GUI's test records),
1 no action (-> wait), 3 type, 4 dual point, 5 back, 6 home, 7 enter, 10 complete (-> terminate
success), 11 impossible (-> terminate fail).

Units: ``result_touch_yx`` / ``result_lift_yx`` are strings of *normalised* ``[y, x]`` (note
the order) and become ``(x, y)`` points. A dual point is a tap when the touch-lift distance is
at most :data:`TAP_DISTANCE_THRESHOLD` (0.04 normalised, AITW's ``_SWIPE_DISTANCE_THRESHOLD``
in google-research ``android_in_the_wild/action_matching.py``), else a swipe stored as a scroll
with ``convention="finger"`` (direction of the dominant axis of touch -> lift).
``ui_positions`` is a string of ``[y, x, h, w]`` *pixel* boxes; the screen size comes from the
screenshot file, since the JSON does not carry it. (AgentCPM-GUI's AITZ-style test records carry
``image_width`` / ``image_height`` and *normalised* ``ui_positions``: :func:`step_from_record`
with ``positions="normalised"``.) Element boxes reaching past the screen are clipped and counted
(``off_screen="clip"``, :func:`guirl.data.loaders._common.screen_box`).

Layouts (``image_path`` is ``<subset>/<episode>/<file>`` relative to a split folder): the
release layout ``<root>/<split>/<subset>/<episode>/<episode>.json`` (``path`` = the split folder,
or ``<root>`` with ``split=``), and the repository's example layout
``data-example/<episode>/<episode>.json`` where the screenshots sit beside the JSON: a screenshot
not found under the split folder is looked up beside its episode JSON (counted as an
adjustment).

A swipe's direction is the finger direction of touch -> lift, unless ``coat_action_desc`` says
``scroll <direction>``: that word (the finger direction in AITZ's annotations) is what CoAT's
evaluator compares, and it wins; a disagreement is counted as an adjustment.

Chain-of-action (CoAT) annotations: ``coat_screen_desc`` -> ``screen_description``,
``coat_action_think`` -> ``intention``, ``coat_action_desc`` -> ``low_level_instruction``,
``coat_action_result`` -> ``step.extra["action_result"]``.

Candidate boxes: every ``ui_positions`` element is kept in ``Step.elements``; ``candidate_boxes``
holds only the elements containing a tap's point (smallest first), so that an evaluator or a
reward accepting a click "in any candidate box" cannot accept another element of the screen
(:func:`step_from_record`, ``candidates=``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from guirl.actions import Action, ActionType
from guirl.data.loaders._splits import AITZ_SPLITS, SplitFileError
from guirl.data.loaders._common import (
    check_path,
    Ctx,
    LoadResult,
    collect,
    finger_direction,
    image_size,
    json_value,
    list_files,
    numbers,
    opt,
    read_json_file,
    report_skipped,
    req,
    screen_box,
    smallest_containing,
)
from guirl.data.schema import Episode, Step, UIElement

NAME = "aitz"
POSITIONS = ("pixels", "normalised")
#: Values of ``candidates=`` (:func:`step_from_record`).
CANDIDATES = ("containing", "all")
#: AITW: touch-lift distance (normalised, Euclidean in y/x) at or below which a dual point is a tap.
TAP_DISTANCE_THRESHOLD = 0.04
_SIMPLE = {
    1: Action(ActionType.WAIT),
    5: Action(ActionType.PRESS, key="back"),
    6: Action(ActionType.PRESS, key="home"),
    7: Action(ActionType.PRESS, key="enter"),
    10: Action(ActionType.TERMINATE, status="success"),
    11: Action(ActionType.TERMINATE, status="fail"),
}


def _yx(ctx: Ctx, key: str, v: Any) -> tuple[float, float]:
    y, x = numbers(ctx, key, json_value(ctx, key, v), 2)
    if not (0 <= x <= 1 and 0 <= y <= 1):
        raise ctx.error(key, f"expected normalised [y, x] in [0, 1], got {v!r}")
    return (x, y)


def action_from_record(ctx: Ctx, s: dict) -> Action:
    """The canonical action of one AITZ step record (``result_action_type`` and its fields)."""
    t = req(ctx, s, "result_action_type", (int, str))
    try:
        t = int(t)
    except ValueError:
        raise ctx.error("result_action_type", f"expected an AITW enum int, got {t!r}") from None
    if t in _SIMPLE:
        return _SIMPLE[t]
    if t == 3:
        return Action(ActionType.TYPE, text=req(ctx, s, "result_action_text", str))
    if t == 0:
        touch = _yx(ctx, "result_touch_yx", req(ctx, s, "result_touch_yx", (str, list)))
        dur = s.get("duration")
        return Action(ActionType.LONG_PRESS, point=touch, duration_ms=None if dur is None else int(dur))
    if t == 4:
        touch = _yx(ctx, "result_touch_yx", req(ctx, s, "result_touch_yx", (str, list)))
        lift = _yx(ctx, "result_lift_yx", req(ctx, s, "result_lift_yx", (str, list)))
        if math.dist(touch, lift) <= TAP_DISTANCE_THRESHOLD:
            return Action(ActionType.CLICK, point=touch)
        return Action(
            ActionType.SCROLL,
            point=touch,
            point2=lift,
            direction=finger_direction(touch, lift),  # type: ignore[arg-type]
            convention="finger",
        )
    raise ctx.error(
        "result_action_type", f"unknown AITW action type {t}; expected 0, 1, 3, 4, 5, 6, 7, 10 or 11"
    )


def _str_list(ctx: Ctx, s: dict, key: str) -> list:
    v = json_value(ctx, key, req(ctx, s, key, (str, list)))
    if not isinstance(v, list):
        raise ctx.error(key, f"expected a list (or a string of one), got {v!r:.80}")
    return v


def elements_from_record(
    ctx: Ctx, s: dict, w: int, h: int, *, positions: str = "pixels", off_screen: str = "clip"
) -> list[UIElement]:
    """The screen's elements of one step record: ``ui_positions`` ``[y, x, h, w]`` (pixels, or
    normalised with ``positions="normalised"``) with ``ui_text`` / ``ui_types`` when present."""
    if positions not in POSITIONS:
        raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
    pos = _str_list(ctx, s, "ui_positions")
    texts = _str_list(ctx, s, "ui_text") if "ui_text" in s else [""] * len(pos)
    types = _str_list(ctx, s, "ui_types") if "ui_types" in s else [""] * len(pos)
    if not (len(pos) == len(texts) == len(types)):
        raise ctx.error("ui_positions", f"{len(pos)} positions but {len(texts)} ui_text, {len(types)} ui_types")
    sx, sy = (w, h) if positions == "pixels" else (1.0, 1.0)
    elements = []
    for j, (yxhw, text, kind) in enumerate(zip(pos, texts, types)):
        y, x, bh, bw = numbers(ctx, "ui_positions", yxhw, 4)
        box = screen_box(ctx, f"ui_positions[{j}]", (x, y, x + bw, y + bh), sx, sy, off_screen)
        if box is not None:
            elements.append(UIElement(element_id=str(j), box=box, label=str(text), role=str(kind), text=str(text)))
    return elements


def containing_boxes(point: tuple[float, float] | None, boxes: Any) -> tuple[Any, ...]:
    """The boxes of ``boxes`` that contain ``point`` (edges included), smallest area first (a tie
    keeps the listed order); ``()`` without a point. These are a step's candidate boxes: the acted
    element and the elements around it, never the rest of the screen."""
    if point is None:
        return ()
    x, y = point
    inside = [b for b in boxes if b[0] <= x <= b[2] and b[1] <= y <= b[3]]
    return tuple(sorted(inside, key=lambda b: (b[2] - b[0]) * (b[3] - b[1])))


def step_from_record(
    s: dict,
    *,
    screen_size: tuple[int, int] | None = None,
    positions: str = "pixels",
    off_screen: str = "clip",
    ctx: Ctx | None = None,
    screenshot: str | None = None,
    candidates: str = "containing",
) -> Step:
    """One AITZ-style step record as a :class:`Step` (no file access).

    ``screen_size``: ``(width, height)``; by default the record's ``image_width`` /
    ``image_height`` (AgentCPM-GUI's records carry them). ``positions``: the units of
    ``ui_positions`` (``"pixels"`` in AITZ, ``"normalised"`` in AgentCPM-GUI's test records).
    The CoAT annotations (``coat_*``) are mapped when present. Every element is kept in
    ``Step.elements``; ``candidates`` says which become ``Step.candidate_boxes``:
    ``"containing"`` (default) the elements containing a click's or long press's point, smallest
    first (:func:`containing_boxes`; none for other actions), so that a rule accepting "any
    candidate box" accepts the acted element and its containers only; ``"all"`` every element
    (the screen's boxes, as AgentCPM-GUI's and CoAT's evaluators read ``ui_positions``).
    """
    if candidates not in CANDIDATES:
        raise ValueError(f"candidates={candidates!r}: use one of {CANDIDATES}")
    ctx = ctx or Ctx("<record>", f"step {s.get('step_id', '?')}")
    if screen_size is None:
        screen_size = (req(ctx, s, "image_width", int), req(ctx, s, "image_height", int))
    w, h = screen_size
    elements = elements_from_record(ctx, s, w, h, positions=positions, off_screen=off_screen)
    action = action_from_record(ctx, s)
    desc = s.get("coat_action_desc")
    words = desc.split(" ") if isinstance(desc, str) else []
    if action.type is ActionType.SCROLL and len(words) > 1 and words[0].lower() == "scroll":
        # CoAT's evaluator reads the direction from the description's second word
        d = words[1].strip()
        if d in ("up", "down", "left", "right") and d != action.direction:
            ctx.adjust(
                "coat_action_desc",
                f"{desc!r} states {d!r}, touch -> lift moves {action.direction!r}: kept the description's {d!r}",
            )
            action = Action(ActionType.SCROLL, point=action.point, point2=action.point2, direction=d, convention="finger")  # type: ignore[arg-type]
    target = None
    boxes = [e.box for e in elements]
    point = action.point if action.type in (ActionType.CLICK, ActionType.LONG_PRESS) else None
    if point is not None:
        target = smallest_containing(point, boxes)  # type: ignore[arg-type]
    cands = tuple(boxes) if candidates == "all" else containing_boxes(point, boxes)
    extra = {"action_result": s["coat_action_result"]} if isinstance(s.get("coat_action_result"), str) else {}
    return Step(
        step_id=int(s.get("step_id", 0)),
        screenshot=screenshot if screenshot is not None else str(s.get("image_path", "")),
        screen_size=(w, h),
        action=action,
        low_level_instruction=opt(ctx, s, "coat_action_desc", str, ""),
        target_box=target,
        candidate_boxes=cands,
        elements=tuple(elements),
        screen_description=opt(ctx, s, "coat_screen_desc", str, ""),
        intention=opt(ctx, s, "coat_action_think", str, ""),
        extra=extra,
    )


def _screenshot(ctx: Ctx, img: str, root: Path, episode_dir: Path) -> tuple[str, Path]:
    """``(stored path, file)`` of a step's screenshot: under the split folder (release layout),
    else beside the episode JSON (example layout, counted)."""
    if (root / img).is_file():
        return img, root / img
    beside = episode_dir / Path(img).name
    if beside.is_file():
        rel = beside.relative_to(root) if beside.is_relative_to(root) else beside
        ctx.adjust("image_path", f"{img!r} not under {root}; found beside the episode JSON ({str(rel)!r})")
        return str(rel), beside
    return img, root / img


def _step(ctx: Ctx, s: dict, root: Path, episode_dir: Path, off_screen: str) -> tuple[Step, dict]:
    img, file = _screenshot(ctx, check_path(ctx, "image_path", req(ctx, s, "image_path", str)), root, episode_dir)
    w, h = image_size(ctx, "image_path", file)
    for key in ("coat_action_desc", "coat_screen_desc", "coat_action_think", "coat_action_result"):
        req(ctx, s, key, str)
    req(ctx, s, "step_id", int)
    step = step_from_record(s, screen_size=(w, h), positions="pixels", off_screen=off_screen, ctx=ctx, screenshot=img)
    return step, s


def _episode(ctx: Ctx, d: Any, root: Path, split: str, episode_dir: Path, off_screen: str) -> Episode:
    if not isinstance(d, list) or not d:
        raise ctx.error("<file>", f"expected a non-empty list of steps, got {type(d).__name__}")
    first = d[0]
    if not isinstance(first, dict):
        raise ctx.error("<file>", f"step 0 is {type(first).__name__}, not an object")
    eid = str(req(ctx, first, "episode_id", (str, int)))
    ctx = Ctx(ctx.file, f"episode {eid}", ctx.adjustments)
    steps = []
    for i, s in enumerate(d):
        sctx = ctx.sub(f"step {i}")
        if not isinstance(s, dict):
            raise sctx.error("<step>", f"expected an object, got {type(s).__name__}")
        if str(req(sctx, s, "episode_id", (str, int))) != eid:
            raise sctx.error("episode_id", f"{s['episode_id']!r} differs from step 0's {eid!r}")
        n = req(sctx, s, "episode_length", int)
        if n != len(d):
            raise sctx.error("episode_length", f"says {n} but the file has {len(d)} steps")
        steps.append(_step(sctx, s, root, episode_dir, off_screen)[0])
    ids = [s.step_id for s in steps]
    if sorted(ids) != list(range(len(steps))):
        raise ctx.error("step_id", f"expected step ids 0..{len(steps) - 1}, got {ids}")
    steps.sort(key=lambda s: s.step_id)
    last = steps[-1].action
    return Episode(
        episode_id=eid,
        instruction=req(ctx, first, "instruction", str),
        steps=tuple(steps),
        source=NAME,
        split=split,
        success=(last.status == "success") if last.type is ActionType.TERMINATE else None,
    )


def _split_folders(root: Path) -> list[Path]:
    """The release's split folders under ``root`` (``train`` first), or ``[]``."""
    return [root / name for name in AITZ_SPLITS if (root / name).is_dir()]


def load_aitz(
    path: str | Path, *, skip_bad: bool = False, split: str | None = None, off_screen: str = "clip"
) -> LoadResult:
    """Load AITZ episode JSONs (``**/*.json`` under ``path``).

    Splits (:mod:`guirl.data.loaders._splits`): ``path`` holding the release's ``train/`` and
    ``test/`` folders loads both, each episode stamped with its folder's name and its screenshot
    paths stored relative to ``path`` (``<split>/<image_path>``); ``path`` that is itself a split
    folder (named ``train`` or ``test``) loads that split; ``split=NAME`` stamps every episode
    ``NAME`` (required for any other folder, e.g. the repository's example layout).

    ``image_path`` is relative to the split folder; a screenshot not found there is looked up
    beside its episode JSON (the example layout, counted). ``off_screen``: what to do with
    element boxes reaching past the screen (:func:`guirl.data.loaders._common.screen_box`).
    """
    root = Path(path)
    root_dir = root if root.is_dir() else root.parent
    folders = _split_folders(root_dir) if root.is_dir() else []
    if folders:
        parts = [(f, f.name if split is None else split, f.name + "/") for f in folders]
    elif split is not None or root_dir.name in AITZ_SPLITS:
        parts = [(root, split or root_dir.name, "")]
    else:
        raise SplitFileError(
            f"{root}: no train/ or test/ folder (the AITZ release layout) and the folder is not named train or "
            "test; point data.path at the release's root, or pass split=NAME"
        )
    res = LoadResult()
    items = []
    for folder, name, prefix in parts:
        split_dir = folder if folder.is_dir() else folder.parent
        for f in list_files(folder, ("**/*.json",), "AITZ episode JSON files"):
            ctx = Ctx(f, f"file {f.name}")
            items.append(
                (
                    ctx,
                    lambda f=f, ctx=ctx, split_dir=split_dir, name=name, prefix=prefix: _prefixed(
                        _episode(ctx, read_json_file(f, ctx.record), split_dir, name, f.parent, off_screen), prefix
                    ),
                )
            )
    collect(items, res.episodes, res.skipped, skip_bad, res.adjusted)
    return report_skipped(NAME, res)


def _prefixed(ep: Episode, prefix: str) -> Episode:
    """``ep`` with every screenshot path under ``prefix`` (the split folder, for a release root)."""
    if not prefix:
        return ep
    return replace(ep, steps=tuple(replace(s, screenshot=prefix + s.screenshot) for s in ep.steps))
