"""UI-S1 / CCPO "std" JSONL loaders: one episode per line.

Line: ``{goal, is_successful, steps: [{action_content: {action, ...}, screenshot,
step_instruction, check_options: {..., candidate_bbox}}]}``. Three vocabularies share the layout
(``vocabulary=``), each written by its own converter:

* ``"mobile_use"`` (UI-S1's ``android_control_evaluation_std.jsonl``, CCPO's
  ``android_control_test.jsonl``): Qwen2.5-VL ``mobile_use`` actions in screen pixels --
  ``click`` / ``long_press`` (``coordinate``; ``time`` s -> ``duration_ms``), ``swipe``
  (``coordinate`` -> ``coordinate2``), ``type`` (``text``), ``system_button`` (``button``
  Back / Home / Enter / Menu -> recent), ``open`` (``text``), ``wait`` (``time`` s),
  ``terminate`` (``status``), ``answer`` (``text``), ``key`` (``text`` an Android key code
  whose key guirl knows: KEYCODE_BACK / HOME / ENTER / APP_SWITCH);
* ``"guiodyssey"`` (CCPO's ``guio_test.jsonl``): GUI-Odyssey words on its ``[0, 1000]`` grid --
  ``CLICK`` / ``LONG_PRESS`` (``coordinate``), ``SCROLL`` (``coordinate`` -> ``coordinate2``,
  ``direction``), ``TYPE`` (``text``), ``PRESS_HOME`` / ``PRESS_BACK`` / ``PRESS_RECENT``,
  ``COMPLETE``, ``IMPOSSIBLE``;
* ``"mind2web"`` (CCPO's ``mind2web_test.jsonl``): ``click``, ``hover``, ``type`` (``value``),
  ``select`` (``value``), ``enter`` in page pixels; each step has ``img_size`` as
  ``[height, width]``.

Swipes: the ``direction`` the files carry (``check_options.direction`` of AndroidControl,
``action_content.direction`` of CCPO's GUI-Odyssey file) is the AndroidControl **content**
direction and becomes the action's direction. What the stored motion ``coordinate ->
coordinate2`` is differs by converter (``swipe=``): UI-S1's converter writes the **finger** motion
(the content direction flipped: "scroll down" is a finger moving up, as UI-S1's own reward flips
``check_options.direction`` to compare it with a predicted swipe); CCPO's AndroidControl
converter draws the motion in the **content** direction (the same step is stored 600 -> 1800 where
UI-S1 stores 1800 -> 600); CCPO's GUI-Odyssey file keeps GUI-Odyssey's finger motion. The points
are kept as stored (evaluators such as CCPO's compare them), the direction comes from the
``direction`` field, else from the motion read in the declared convention; a motion that
contradicts the stated direction is counted as an adjustment.

Units: points and boxes normalised by the screen size: ``img_size`` when the record has it, else
the screenshot file's size (``screen_size=`` overrides both). The screenshot must exist whichever
gives the size. ``candidate_bbox`` is one
``[x1, y1, x2, y2]`` box or a list of them; boxes reaching past the screen are clipped and
counted (``off_screen``); ``target_box`` = the smallest candidate containing the click point.

Screenshots: published files carry absolute paths of the authors' machines; ``image_root``
remaps them (:func:`guirl.data.loaders._common.remap_image`, counted). Episode id: the line's
``episode_id`` when present, else ``<file stem>-<line number>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guirl.actions import Action, ActionType
from guirl.actions.types import OPPOSITE
from guirl.data.loaders._splits import split_from_file_name
from guirl.data.loaders._common import (
    check_path,
    is_file,
    Ctx,
    LoadResult,
    collect,
    finger_direction,
    image_size,
    iter_lines,
    json_value,
    list_files,
    norm_point,
    number,
    numbers,
    opt,
    remap_image,
    report_skipped,
    req,
    screen_box,
    screen_size as checked_size,
    smallest_containing,
)
from guirl.data.schema import Episode, Step

NAME = "uis1"
VOCABULARIES = ("mobile_use", "guiodyssey", "mind2web")
SWIPES = ("finger", "content")
_BUTTONS = {"back": "back", "home": "home", "enter": "enter", "menu": "recent"}
_KEYCODES = {"KEYCODE_BACK": "back", "KEYCODE_HOME": "home", "KEYCODE_ENTER": "enter", "KEYCODE_APP_SWITCH": "recent"}
_STATUS = {"success": "success", "failure": "fail", "fail": "fail"}
_ODYSSEY_KEYS = {"PRESS_HOME": "home", "PRESS_BACK": "back", "PRESS_RECENT": "recent"}


def _pt(ctx: Ctx, a: dict, key: str, sx: float, sy: float) -> tuple[float, float]:
    x, y = numbers(ctx, key, req(ctx, a, key, list), 2)
    return norm_point(ctx, key, x, y, sx, sy)


def _ms(ctx: Ctx, a: dict) -> int | None:
    t = a.get("time")
    return None if t is None else int(round(number(ctx, "time", t) * 1000))


def _swipe(
    ctx: Ctx, a: dict, direction: Any, sx: float, sy: float, swipe: str
) -> Action:
    p1, p2 = _pt(ctx, a, "coordinate", sx, sy), _pt(ctx, a, "coordinate2", sx, sy)
    stated = None
    if direction is not None:
        if not isinstance(direction, str) or direction.lower() not in OPPOSITE:
            raise ctx.error("direction", f"expected up/down/left/right, got {direction!r}")
        stated = direction.lower()
    motion = finger_direction(p1, p2) if p1 != p2 else None
    # the direction the motion shows, in the content convention
    shown = None if motion is None else (OPPOSITE[motion] if swipe == "finger" else motion)
    if stated is None:
        if shown is None:
            raise ctx.error("coordinate2", "swipe with coordinate == coordinate2 and no direction")
        stated = shown
    elif shown is not None and shown != stated:
        ctx.adjust(
            "coordinate2",
            f"the motion {list(a['coordinate'])} -> {list(a['coordinate2'])} read as a {swipe} motion shows "
            f"content direction {shown!r}, the record states {stated!r}: kept {stated!r}",
        )
    return Action(ActionType.SCROLL, point=p1, point2=p2, direction=stated, convention="content")  # type: ignore[arg-type]


def parse_std_action(
    ctx: Ctx,
    a: Any,
    w: int,
    h: int,
    *,
    vocabulary: str = "mobile_use",
    direction: Any = None,
    swipe: str = "finger",
) -> Action:
    """One ``action_content`` dict -> canonical :class:`Action` (module docstring).

    ``w`` / ``h``: the screen size in pixels (used by the pixel vocabularies); ``direction``: the
    record's stated (content) direction of a swipe, if any; ``swipe``: what the stored motion is.
    """
    if vocabulary not in VOCABULARIES:
        raise ValueError(f"vocabulary must be one of {VOCABULARIES}, got {vocabulary!r}")
    if swipe not in SWIPES:
        raise ValueError(f"swipe must be one of {SWIPES}, got {swipe!r}")
    if not isinstance(a, dict):
        raise ctx.error("action_content", f"expected an object, got {type(a).__name__}")
    kind = req(ctx, a, "action", str)
    if vocabulary == "guiodyssey":
        return _odyssey_action(ctx, a, kind, swipe)
    if vocabulary == "mind2web":
        return _m2w_action(ctx, a, kind, w, h)
    if kind == "click":
        return Action(ActionType.CLICK, point=_pt(ctx, a, "coordinate", w, h))
    if kind == "long_press":
        return Action(ActionType.LONG_PRESS, point=_pt(ctx, a, "coordinate", w, h), duration_ms=_ms(ctx, a))
    if kind == "swipe":
        return _swipe(ctx, a, direction if direction is not None else a.get("direction"), w, h, swipe)
    if kind in ("type", "open", "answer"):
        t = {"type": ActionType.TYPE, "open": ActionType.OPEN_APP, "answer": ActionType.ANSWER}[kind]
        return Action(t, text=req(ctx, a, "text", str))
    if kind == "wait":
        return Action(ActionType.WAIT, duration_ms=_ms(ctx, a))
    if kind == "system_button":
        b = req(ctx, a, "button", str)
        if b.lower() not in _BUTTONS:
            raise ctx.error("button", f"system button {b!r} has no canonical key; expected Back, Home, Enter or Menu")
        return Action(ActionType.PRESS, key=_BUTTONS[b.lower()])  # type: ignore[arg-type]
    if kind == "key":
        code = req(ctx, a, "text", str)
        if code not in _KEYCODES:
            raise ctx.error("text", f"key code {code!r} has no canonical key; known: {sorted(_KEYCODES)}")
        return Action(ActionType.PRESS, key=_KEYCODES[code])  # type: ignore[arg-type]
    if kind == "terminate":
        s = req(ctx, a, "status", str)
        if s not in _STATUS:
            raise ctx.error("status", f"expected success or failure, got {s!r}")
        return Action(ActionType.TERMINATE, status=_STATUS[s])  # type: ignore[arg-type]
    raise ctx.error(
        "action",
        f"unknown action {kind!r}; expected click, long_press, swipe, type, system_button, key, open, wait, "
        "terminate, answer",
    )


def _odyssey_action(ctx: Ctx, a: dict, kind: str, swipe: str) -> Action:
    if kind in ("CLICK", "LONG_PRESS"):
        t = ActionType.CLICK if kind == "CLICK" else ActionType.LONG_PRESS
        return Action(t, point=_pt(ctx, a, "coordinate", 1000.0, 1000.0))
    if kind == "SCROLL":
        return _swipe(ctx, a, a.get("direction"), 1000.0, 1000.0, swipe)
    if kind == "TYPE":
        return Action(ActionType.TYPE, text=req(ctx, a, "text", str))
    if kind in _ODYSSEY_KEYS:
        return Action(ActionType.PRESS, key=_ODYSSEY_KEYS[kind])  # type: ignore[arg-type]
    if kind in ("COMPLETE", "IMPOSSIBLE"):
        return Action(ActionType.TERMINATE, status="success" if kind == "COMPLETE" else "fail")
    raise ctx.error(
        "action",
        f"unknown GUI-Odyssey action {kind!r}; expected CLICK, LONG_PRESS, SCROLL, TYPE, PRESS_HOME, PRESS_BACK, "
        "PRESS_RECENT, COMPLETE, IMPOSSIBLE",
    )


def _m2w_action(ctx: Ctx, a: dict, kind: str, w: int, h: int) -> Action:
    pt = _pt(ctx, a, "coordinate", w, h)
    if kind == "click":
        return Action(ActionType.CLICK, point=pt)
    if kind == "hover":
        return Action(ActionType.HOVER, point=pt)
    if kind == "enter":
        return Action(ActionType.PRESS, key="enter", point=pt)
    if kind == "type":  # CCPO's converter writes the typed text as ``value``, as for select
        return Action(ActionType.TYPE, point=pt, text=req(ctx, a, "value", str))
    if kind == "select":
        return Action(ActionType.SELECT, point=pt, text=req(ctx, a, "value", str))
    raise ctx.error("action", f"unknown Mind2Web action {kind!r}; expected click, hover, type, select, enter")


def _boxes(ctx: Ctx, v: Any, sx: float, sy: float, off_screen: str) -> tuple:
    if v is None or v == []:
        return ()
    if isinstance(v, list) and len(v) == 4 and all(isinstance(x, (int, float)) for x in v):
        v = [v]
    if not isinstance(v, list):
        raise ctx.error("candidate_bbox", f"expected a box or a list of [x1, y1, x2, y2] boxes, got {v!r:.80}")
    out = []
    for j, b in enumerate(v):
        box = screen_box(ctx, f"candidate_bbox[{j}]", numbers(ctx, "candidate_bbox", b, 4), sx, sy, off_screen)
        if box is not None:
            out.append(box)
    return tuple(out)


def step_from_std(
    s: dict,
    *,
    screen_size: tuple[int, int],
    vocabulary: str = "mobile_use",
    swipe: str = "finger",
    off_screen: str = "clip",
    ctx: Ctx | None = None,
    step_id: int = 0,
    screenshot: str | None = None,
) -> Step:
    """One std step (``action_content``, ``check_options``) as a :class:`Step` (no file access).

    ``screen_size`` is ``(width, height)`` in pixels; the other options as in :func:`load_std`.
    """
    ctx = ctx or Ctx("<record>", f"step {step_id}")
    w, h = screen_size
    check = opt(ctx, s, "check_options", dict, {})
    action = parse_std_action(
        ctx,
        req(ctx, s, "action_content", dict),
        w,
        h,
        vocabulary=vocabulary,
        direction=check.get("direction"),
        swipe=swipe,
    )
    scale = (1000.0, 1000.0) if vocabulary == "guiodyssey" else (float(w), float(h))
    cands = _boxes(ctx, check.get("candidate_bbox"), scale[0], scale[1], off_screen)
    target = None
    if action.point is not None and action.type is not ActionType.SCROLL:
        target = smallest_containing(action.point, cands)
    return Step(
        step_id=step_id,
        screenshot=screenshot if screenshot is not None else str(s.get("screenshot", "")),
        screen_size=(w, h),
        action=action,
        low_level_instruction=opt(ctx, s, "step_instruction", str, ""),
        target_box=target,
        candidate_boxes=cands,
    )


def _screen(ctx: Ctx, s: dict, shot: str, root: Path, screen_size: tuple[int, int] | None) -> tuple[int, int]:
    """The step's screen size: ``screen_size``, the record's ``img_size`` or the screenshot's;
    the screenshot must exist in every case."""
    if screen_size is None and s.get("img_size") is None:
        return image_size(ctx, "screenshot", root / shot)
    if not is_file(ctx, "screenshot", root / shot):
        raise ctx.error("screenshot", f"screenshot file {root / shot} does not exist")
    if screen_size is not None:
        return screen_size
    hh, ww = numbers(ctx, "img_size", s["img_size"], 2)  # CCPO's Mind2Web file: [height, width]
    return checked_size(ctx, "img_size", ww, hh)


def _episode(
    ctx: Ctx,
    line: str,
    root: Path,
    split: str,
    source: str,
    vocabulary: str,
    swipe: str,
    off_screen: str,
    image_root: Path | None,
    screen_size: tuple[int, int] | None,
) -> Episode:
    d = json_value(ctx, "<line>", line)
    if not isinstance(d, dict):
        raise ctx.error("<line>", f"expected an episode object, got {type(d).__name__}")
    steps = []
    base = image_root if image_root is not None else root
    for i, s in enumerate(req(ctx, d, "steps", list)):
        sctx = ctx.sub(f"step {i}")
        if not isinstance(s, dict):
            raise sctx.error("steps", f"expected an object, got {type(s).__name__}")
        shot = remap_image(sctx, "screenshot", check_path(sctx, "screenshot", req(sctx, s, "screenshot", str)), image_root)
        size = _screen(sctx, s, shot, base, screen_size)
        steps.append(
            step_from_std(
                s,
                screen_size=size,
                vocabulary=vocabulary,
                swipe=swipe,
                off_screen=off_screen,
                ctx=sctx,
                step_id=i,
                screenshot=shot,
            )
        )
    eid = d.get("episode_id")
    return Episode(
        episode_id=str(eid) if eid is not None else ctx.record.replace("line ", f"{Path(ctx.file).stem}-"),
        instruction=req(ctx, d, "goal", str),
        steps=tuple(steps),
        source=source,
        split=split,
        category=opt(ctx, d, "category", str, ""),
        success=req(ctx, d, "is_successful", bool),
    )


def load_std(
    path: str | Path,
    *,
    skip_bad: bool = False,
    split: str | None = None,
    source: str = NAME,
    vocabulary: str = "mobile_use",
    swipe: str = "finger",
    off_screen: str = "clip",
    image_root: str | Path | None = None,
    screen_size: tuple[int, int] | None = None,
) -> LoadResult:
    """Load std JSONL file(s) (``*.jsonl`` under ``path``).

    ``vocabulary`` / ``swipe``: the converter's action words and swipe motion (module
    docstring). ``image_root``: the folder holding the screenshots (absolute paths of the
    authors' machines are remapped under it, counted); without it, screenshot paths are read
    relative to the file's folder. ``off_screen``: element boxes past the screen are clipped and
    counted (``"clip"``), kept (``"keep"``) or rejected (``"reject"``). ``screen_size``:
    ``(width, height)`` for every step instead of reading it. ``split``: the split of every
    episode; ``None`` (default) takes each file's from its name
    (:func:`guirl.data.loaders._splits.split_from_file_name`).
    """
    if vocabulary not in VOCABULARIES:
        raise ValueError(f"vocabulary must be one of {VOCABULARIES}, got {vocabulary!r}")
    if swipe not in SWIPES:
        raise ValueError(f"swipe must be one of {SWIPES}, got {swipe!r}")
    root_img = None if image_root is None else Path(image_root)
    res = LoadResult()
    files = list_files(path, ("*.jsonl",), "std JSONL files")
    fsplits = {f: split or split_from_file_name(f) for f in files}
    for f in files:
        items = []
        for lineno, line in iter_lines(f):
            ctx = Ctx(f, f"line {lineno}")
            items.append(
                (
                    ctx,
                    lambda line=line, ctx=ctx, f=f: _episode(
                        ctx, line, f.parent, fsplits[f], source, vocabulary, swipe, off_screen, root_img, screen_size
                    ),
                )
            )
        collect(items, res.episodes, res.skipped, skip_bad, res.adjusted)
    return report_skipped(source, res)


def load_uis1(path: str | Path, **kw: Any) -> LoadResult:
    """UI-S1's AndroidControl std file: ``mobile_use`` words, finger motions (:func:`load_std`)."""
    return load_std(path, source=NAME, vocabulary="mobile_use", swipe="finger", **kw)


def load_ccpo_androidcontrol(path: str | Path, **kw: Any) -> LoadResult:
    """CCPO's ``android_control_test.jsonl``: ``mobile_use`` words, motions drawn in the content
    direction (:func:`load_std`)."""
    return load_std(path, source="ccpo_androidcontrol", vocabulary="mobile_use", swipe="content", **kw)


def load_ccpo_guiodyssey(path: str | Path, **kw: Any) -> LoadResult:
    """CCPO's ``guio_test.jsonl``: GUI-Odyssey words on ``[0, 1000]``, finger motions, content
    ``direction`` (:func:`load_std`)."""
    return load_std(path, source="ccpo_guiodyssey", vocabulary="guiodyssey", swipe="finger", **kw)


def load_ccpo_mind2web(path: str | Path, **kw: Any) -> LoadResult:
    """CCPO's ``mind2web_test.jsonl``: Mind2Web words in page pixels, ``img_size`` = [h, w]
    (:func:`load_std`)."""
    return load_std(path, source="ccpo_mind2web", vocabulary="mind2web", **kw)
