"""Android in the Wild steps as SeeClick and CCPO store them (``aitw_data_test.json`` steps).

A step: ``action_type_id`` (AITW's enum: 4 dual point, 3 type, 5 back, 6 home, 7 enter, 10
complete, 11 impossible), ``action_type_text`` (``click``, ``scroll down`` / ``up`` / ``left`` /
``right``, ``type``, ``press back``, ...), ``touch`` / ``lift`` as **[x, y]** normalised (SeeClick's
``action_matching.action_2_format`` swaps them to ``[y, x]``), ``type_text`` and
``annot_position``: the screen's element boxes as a flat list of ``y, x, h, w`` quadruples,
normalised.

Scrolls: ``scroll down`` is AITW's content direction (the finger moves up; ``action_2_format``
gives it the touch ``(0.5, 0.8)`` and lift ``(0.5, 0.2)``).

:func:`step_from_record` reads one step (no file access).
"""

from __future__ import annotations

import math

from guirl.actions import Action, ActionType
from guirl.data.loaders._common import Ctx, number, numbers, opt, req, screen_box, smallest_containing
from guirl.data.schema import Step

__all__ = ["step_from_record", "TAP_DISTANCE_THRESHOLD"]

#: AITW's _SWIPE_DISTANCE_THRESHOLD: touch and lift at most this far apart make a tap.
TAP_DISTANCE_THRESHOLD = 0.04
_KEYS = {5: "back", 6: "home", 7: "enter"}


def step_from_record(
    s: dict, *, screen_size: tuple[int, int] = (1, 1), off_screen: str = "clip", ctx: Ctx | None = None
) -> Step:
    """One AITW step record (module docstring) as a :class:`Step`; ``screen_size`` only labels
    the step (every coordinate is normalised)."""
    ctx = ctx or Ctx("<record>", "step")
    t = int(number(ctx, "action_type_id", req(ctx, s, "action_type_id", (int, float, str))))
    text = opt(ctx, s, "action_type_text", str, "")
    ann = numbers(ctx, "annot_position", s.get("annot_position") or [])
    if len(ann) % 4:
        raise ctx.error("annot_position", f"{len(ann)} numbers are not y, x, h, w quadruples")
    boxes = []
    for j in range(0, len(ann), 4):
        y, x, bh, bw = ann[j : j + 4]
        b = screen_box(ctx, f"annot_position[{j // 4}]", (x, y, x + bw, y + bh), 1.0, 1.0, off_screen)
        if b is not None:
            boxes.append(b)
    target = None
    if t == 4 and text == "click":
        x, y = numbers(ctx, "touch", req(ctx, s, "touch", list), 2)
        lx, ly = numbers(ctx, "lift", s.get("lift") or [x, y], 2)
        if math.dist((x, y), (lx, ly)) > TAP_DISTANCE_THRESHOLD:
            raise ctx.error("lift", f"a click whose touch {x, y} and lift {lx, ly} are more than a tap apart")
        action = Action(ActionType.CLICK, point=(x, y))
        target = smallest_containing((x, y), boxes)
    elif t == 4 and text.startswith("scroll "):
        d = text.split()[1]
        if d not in ("up", "down", "left", "right"):
            raise ctx.error("action_type_text", f"unknown scroll {text!r}")
        action = Action(ActionType.SCROLL, direction=d, convention="content")  # type: ignore[arg-type]
    elif t == 3:
        action = Action(ActionType.TYPE, text=req(ctx, s, "type_text", str))
    elif t in _KEYS:
        action = Action(ActionType.PRESS, key=_KEYS[t])  # type: ignore[arg-type]
    elif t in (10, 11):
        action = Action(ActionType.TERMINATE, status="success" if t == 10 else "fail")
    else:
        raise ctx.error("action_type_id", f"unknown AITW action {t} ({text!r})")
    return Step(
        step_id=int(s.get("step", 0)) if isinstance(s.get("step"), int) else 0,
        screenshot=str(s.get("img_filename", "")),
        screen_size=screen_size,
        action=action,
        target_box=target,
        candidate_boxes=tuple(boxes),
    )
