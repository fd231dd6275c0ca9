"""Boxes and points in normalised screen space, shared by metrics, rewards, CASC and MiniGUI.

A point is ``(x, y)``; a box is ``(x1, y1, x2, y2)`` with ``x1 <= x2`` and ``y1 <= y2``.
Unless a function says otherwise both are normalised to ``[0, 1]`` by the screen's width
and height, and distances are Euclidean in that per-axis normalised space (the convention of
every public evaluator, ``docs/metrics.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Point = tuple[float, float]
Box = tuple[float, float, float, float]


def point_in_box(p: Sequence[float], box: Sequence[float]) -> bool:
    """True when ``p`` lies inside ``box`` (edges included)."""
    x, y = p
    x1, y1, x2, y2 = box
    return x1 <= x <= x2 and y1 <= y <= y2


def distance(p: Sequence[float], q: Sequence[float]) -> float:
    """Euclidean distance between two points (same units as the inputs)."""
    return math.hypot(p[0] - q[0], p[1] - q[1])


def distance_to_box(p: Sequence[float], box: Sequence[float]) -> float:
    """Euclidean distance from ``p`` to the closest point of ``box`` (0 inside or on an edge)."""
    x1, y1, x2, y2 = box
    dx = max(x1 - p[0], 0.0, p[0] - x2)
    dy = max(y1 - p[1], 0.0, p[1] - y2)
    return math.hypot(dx, dy)


def box_center(box: Sequence[float]) -> Point:
    """Centre ``((x1 + x2) / 2, (y1 + y2) / 2)`` of a box."""
    x1, y1, x2, y2 = box
    return ((x1 + x2) / 2.0, (y1 + y2) / 2.0)


def box_area(box: Sequence[float]) -> float:
    """Area of a box; 0 for a degenerate box."""
    x1, y1, x2, y2 = box
    return max(0.0, x2 - x1) * max(0.0, y2 - y1)


def enlarge_box(box: Sequence[float], factor: float) -> Box:
    """Scale a box about its centre by ``factor`` (UI-S1 and CoAT use 1.2). Not clamped.

    ``factor == 1.0`` returns the box unchanged, bit for bit (centre +- half-size is not exact
    in floating point, so computing it would move the edges in the last bit). Other factors
    compute ``centre -+ size * factor / 2`` per axis, the order of operations of UI-S1's and
    CoAT's ``enlarge_bbox``.
    """
    if factor == 1.0:
        return (float(box[0]), float(box[1]), float(box[2]), float(box[3]))
    cx, cy = box_center(box)
    hw = (box[2] - box[0]) * factor / 2.0
    hh = (box[3] - box[1]) * factor / 2.0
    return (cx - hw, cy - hh, cx + hw, cy + hh)


def clamp_box(box: Sequence[float], width: float = 1.0, height: float = 1.0) -> Box:
    """Clamp a box to ``[0, width] x [0, height]``."""
    x1, y1, x2, y2 = box
    return (
        min(max(x1, 0.0), width),
        min(max(y1, 0.0), height),
        min(max(x2, 0.0), width),
        min(max(y2, 0.0), height),
    )


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two boxes, in ``[0, 1]``; 0 when both are degenerate."""
    ix1, iy1 = max(a[0], b[0]), max(a[1], b[1])
    ix2, iy2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, ix2 - ix1) * max(0.0, iy2 - iy1)
    union = box_area(a) + box_area(b) - inter
    return inter / union if union > 0 else 0.0


def xywh_to_xyxy(box: Sequence[float]) -> Box:
    """``(x, y, w, h)`` (Mind2Web ``bounding_box_rect``) to ``(x1, y1, x2, y2)``."""
    x, y, w, h = box
    return (x, y, x + w, y + h)
