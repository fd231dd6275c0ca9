"""CES training / evaluation rows: the Executor's ground-truth action string and ``extra_info``.

A CES row (verl RL data, ``verl/utils/reward_score/gui.py``) scores the Executor's answer against
``ground_truth``, an action in the Executor's call syntax (``click(point='(531, 684)')``,
``type(content='...')``, ``scroll()``, ...), with ``extra_info`` holding ``width`` / ``height``
of the screenshot and ``bbox``: ``[[x1, y1], [x2, y2]]`` (the target element), a list of such
boxes (any of them), or a flat ``[x1, y1, x2, y2]``, which CES's ``click_matching`` does not
read (its depth is 1) and which is therefore dropped here too.

:func:`step_from_row` reads one row with CES's own parser (``acc_reward`` reads the ground truth
exactly as it reads a prediction: the ``ces_executor`` format, strict pipeline ``"ces"``).
"""

from __future__ import annotations

from typing import Any

from guirl.actions.formats import FormatContext, get_format
from guirl.data.loaders._common import Ctx, numbers, req, screen_box
from guirl.data.schema import Step

__all__ = ["step_from_row"]


def _depth(x: Any) -> int:
    if not isinstance(x, list):
        return 0
    return 1 + max((_depth(i) for i in x), default=0)


def step_from_row(
    ground_truth: str, extra_info: dict, *, off_screen: str = "clip", ctx: Ctx | None = None
) -> Step:
    """The Executor's ground truth of one CES row as a :class:`Step` (module docstring)."""
    ctx = ctx or Ctx("<record>", "row")
    w, h = int(req(ctx, extra_info, "width", int)), int(req(ctx, extra_info, "height", int))
    res = get_format("ces_executor").parse(
        f"<answer>{ground_truth}</answer>", FormatContext(width=w, height=h, strict=True, pipeline="ces")
    )
    if not res.ok:
        raise ctx.error("ground_truth", f"{ground_truth!r} is not a CES executor action: {res.reason}")
    bbox = extra_info.get("bbox") or []
    gt_box, cands = None, []
    if _depth(bbox) == 2:
        (x1, y1), (x2, y2) = numbers(ctx, "bbox", bbox[0], 2), numbers(ctx, "bbox", bbox[1], 2)
        gt_box = screen_box(ctx, "bbox", (x1, y1, x2, y2), w, h, off_screen)
    elif _depth(bbox) == 3:
        for j, c in enumerate(bbox):
            (x1, y1), (x2, y2) = numbers(ctx, "bbox", c[0], 2), numbers(ctx, "bbox", c[1], 2)
            b = screen_box(ctx, f"bbox[{j}]", (x1, y1, x2, y2), w, h, off_screen)
            if b is not None:
                cands.append(b)
    return Step(step_id=0, screenshot="", screen_size=(w, h), action=res.action, target_box=gt_box, candidate_boxes=tuple(cands))  # type: ignore[arg-type]
