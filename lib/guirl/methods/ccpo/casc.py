"""CCPO's Coordinate-Aware Spatial Compression (CASC), CCPO section 3.3.

CASC shrinks the *visual history* of a multi-turn GUI agent. For every past step it gathers
the screen coordinates that matter at that step -- the ground-truth annotation (point, box,
candidate boxes) and the points that the policy's N sampled rollouts acted on -- aggregates
them into ONE region of interest (ROI), and crops that step's screenshot to the ROI. The
history then costs a few dozen visual tokens per step instead of a full screen.

Coordinate steps (A_wc, CCPO Sec. 3.3): click, long press, select, hover and scroll ("we treat
scroll as a coordinate action"). A scroll step whose sources carry no point (AndroidControl
scrolls have a direction only) has no ROI and keeps its image full. ``scroll_is_coordinate=False``
is the released code's rule (a scroll counts only with a point).

Two policies for steps whose ground-truth action has no coordinate (type, wait, open_app,
press, terminate, answer):

* ``"max"`` -- MAX-COMPRESS, the paper's CASC: the screenshot of such a step is removed
  (CCPO sec. 3.3: "type, wait, open, complete ... remove their corresponding images"; the
  official ``universal_multiround.py`` drops an image whose box is ``None``).
* ``"min"`` -- MIN-COMPRESS: such a step keeps its image, full size by default (the official
  ``universal_multiround-MIN`` keeps an image unchanged when its box is ``None``);
  ``min_scale < 1`` keeps a downscaled copy instead (our option, not in the paper).
* ``"none"`` -- no compression (the Semi-online RL baseline): every history image full.

Units. Points and boxes given to this module by the rest of ``guirl`` are **normalised**
``[0, 1]`` (see :mod:`guirl.actions.types`); ROIs are **pixel** boxes ``(x1, y1, x2, y2)``
of the image that is cropped, right/bottom edges exclusive (PIL ``crop`` convention), so a
box's width is ``x2 - x1`` px. Functions say ``_px`` or ``_norm`` in argument names.

Grid alignment. Crop the image the model sees (``to_model_view``: the screenshot resized
by Qwen2.5-VL's ``smart_resize`` with the model's pixel budget ``min_pixels`` / ``max_pixels``,
which every caller passes: there is no default budget) and align the ROI outward to the 28 px
grid: the crop then keeps its size through the processor and costs exactly ``(w/28) * (h/28)``
visual tokens (:func:`obs_tokens`; ``tests/test_casc.py`` checks it against the processor). The official code crops that same resized image (its
coordinates are the model's absolute coordinates on the resized screenshot).

Assumptions and deviations (the paper's exact ROI rule is not stated; the official code was read):

1. Margin: the official ``coords_to_bbox`` pads the points' bounding box by 28 px on each
   side; ``DEFAULT_MARGIN_PX = 28``.
2. Minimum size and grid alignment are not in the official code (it crops at arbitrary
   pixel edges and lets the processor re-round); we enlarge to ``min_size_px`` (default
   56 px, the smallest side Qwen2.5-VL's default ``min_pixels = 56*56`` allows) and align
   outward to 28 px, which makes the token count of a crop exact.
3. Which steps are "coordinate steps": decided by the ground-truth action (as the paper says,
   ``coordinate_steps="gt"``). The official code instead keeps a crop whenever *any* source has
   a coordinate (e.g. a rollout clicked on a step whose ground truth is ``type``):
   ``coordinate_steps="any"``.
4. Tracked points: the action point(s) (``point``, ``point2`` for drags/scrolls), the two
   corners of the ground-truth box and of every candidate box (as the official
   ``add_coordinates``), and the point(s) of every rollout action that has any. Points are
   clamped to the screen before the box is built (a policy may predict off-screen).
5. The current observation is always kept full (official: empty box for the last image).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from PIL import Image

from guirl.actions.types import Action, ActionType
from guirl.imaging import FACTOR, smart_resize, visual_tokens

Policy = Literal["max", "min", "none"]
POLICIES: tuple[str, ...] = ("max", "min", "none")
CoordinateSteps = Literal["gt", "any"]

#: Padding around the tracked points' bounding box, px (official CCPO ``coords_to_bbox``: +-28).
DEFAULT_MARGIN_PX = 28
#: Smallest ROI side, px (our choice: 2 x 28 px, Qwen2.5-VL's default ``min_pixels = 56*56``).
DEFAULT_MIN_SIZE_PX = 56
#: Patch grid of the image the model sees: patch 14 px x merge 2 = 28 px per visual token.
DEFAULT_GRID_PX = FACTOR

PointNorm = tuple[float, float]
PointPx = tuple[float, float]
BoxPx = tuple[int, int, int, int]
BoxNorm = tuple[float, float, float, float]


# --------------------------------------------------------------------------- coordinates
def action_points(action: Action | None) -> tuple[PointNorm, ...]:
    """Normalised points an action acts on: ``point`` and ``point2`` when present.

    click / long_press / select / hover carry ``point``; a scroll/drag may carry a start
    ``point`` and an end ``point2``; every other type carries none. ``None`` (an unparseable
    rollout) gives no points.
    """
    if action is None:
        return ()
    return tuple(p for p in (action.point, action.point2) if p is not None)


def is_coordinate_action(action: Action, scroll_is_coordinate: bool = True) -> bool:
    """True for the coordinate-related actions A_wc of CCPO Sec. 3.3: click, long_press, select,
    hover and scroll ("we treat scroll as a coordinate action"), whether or not the scroll carries
    a point. ``scroll_is_coordinate=False`` is the released code's rule: a scroll counts only when
    it carries a point (AndroidControl scrolls carry a direction only).
    """
    if action.type is ActionType.SCROLL:
        return scroll_is_coordinate or action.point is not None
    return len(action_points(action)) > 0


def box_corners(box: Sequence[float]) -> tuple[PointNorm, PointNorm]:
    """Top-left and bottom-right corners of an ``(x1, y1, x2, y2)`` box."""
    x1, y1, x2, y2 = box
    return ((float(x1), float(y1)), (float(x2), float(y2)))


def points_norm_to_px(points: Iterable[Sequence[float]], size: tuple[int, int]) -> list[PointPx]:
    """Scale normalised points to pixels of an image of ``size = (width, height)`` px."""
    w, h = size
    return [(float(p[0]) * w, float(p[1]) * h) for p in points]


# --------------------------------------------------------------------------- records
@dataclass(frozen=True)
class StepRecord:
    """One past step of an episode as CASC sees it.

    ``image``: the screenshot observed before the action (ideally the model view, see
    :func:`to_model_view`). ``action``: the ground-truth action (normalised coordinates).
    ``target_box`` / ``candidate_boxes``: normalised ground-truth boxes. ``rollout_actions``:
    the actions the policy's sampled rollouts took at this step (``None`` = unparseable).
    """

    image: Image.Image
    action: Action
    target_box: BoxNorm | None = None
    candidate_boxes: tuple[BoxNorm, ...] = ()
    rollout_actions: tuple[Action | None, ...] = field(default_factory=tuple)


def tracked_points(
    record: StepRecord, include_rollouts: bool = True, include_candidates: bool = True
) -> list[PointNorm]:
    """Normalised points CASC aggregates for one step (assumption 4 in the module docstring).

    Order: ground-truth action points, ground-truth box corners, candidate box corners, then
    rollout points. Exact duplicates are removed (the official code de-duplicates too).
    """
    pts: list[PointNorm] = list(action_points(record.action))
    if record.target_box is not None:
        pts.extend(box_corners(record.target_box))
    if include_candidates:
        for b in record.candidate_boxes:
            pts.extend(box_corners(b))
    if include_rollouts:
        for a in record.rollout_actions:
            pts.extend(action_points(a))
    seen: set[PointNorm] = set()
    out: list[PointNorm] = []
    for p in pts:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


# --------------------------------------------------------------------------- ROI
def _enlarge_interval(lo: float, hi: float, min_len: float, limit: float) -> tuple[float, float]:
    """Grow ``[lo, hi]`` about its centre to ``min_len`` and slide it inside ``[0, limit]``."""
    if hi - lo < min_len:
        c = (lo + hi) / 2.0
        lo, hi = c - min_len / 2.0, c + min_len / 2.0
    if lo < 0.0:  # slide right, keep the length
        hi, lo = hi - lo, 0.0
    if hi > limit:  # slide left
        lo, hi = lo - (hi - limit), float(limit)
    return max(lo, 0.0), min(hi, float(limit))


def roi_from_points(
    points_px: Sequence[Sequence[float]],
    screen_size: tuple[int, int],
    margin: float = DEFAULT_MARGIN_PX,
    min_size: float | tuple[float, float] = DEFAULT_MIN_SIZE_PX,
    grid: int = DEFAULT_GRID_PX,
) -> BoxPx | None:
    """One pixel ROI ``(x1, y1, x2, y2)`` covering ``points_px`` (CCPO sec. 3.3, CASC).

    Steps: clamp the points to the screen; bounding box; pad by ``margin`` px per side;
    grow about the centre to at least ``min_size`` px (``(w, h)`` or one number) and slide it
    inside the screen; align outward to multiples of ``grid`` px; clamp to the screen.

    ``screen_size`` is ``(width, height)`` px of the image that will be cropped. The result
    contains every (clamped) point, lies in ``[0, W] x [0, H]``, has sides of at least
    ``min(min_size, screen side)``, and its edges are multiples of ``grid`` except where
    they sit on a screen edge that is not (model-view images have sides that are multiples
    of 28, so there every edge is on the grid). Returns ``None`` for no points.
    """
    w_scr, h_scr = int(screen_size[0]), int(screen_size[1])
    if w_scr <= 0 or h_scr <= 0:
        raise ValueError(f"screen_size must be positive (width, height) px, got {screen_size!r}")
    if grid <= 0:
        raise ValueError(f"grid must be a positive number of pixels, got {grid}")
    if margin < 0:
        raise ValueError(f"margin must be >= 0 px, got {margin}")
    min_w, min_h = (min_size, min_size) if isinstance(min_size, (int, float)) else min_size
    if not points_px:
        return None
    xs, ys = [], []
    for p in points_px:
        x, y = float(p[0]), float(p[1])
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError(f"points must be finite pixel coordinates, got {p!r}")
        xs.append(min(max(x, 0.0), float(w_scr)))
        ys.append(min(max(y, 0.0), float(h_scr)))
    x1, x2 = _enlarge_interval(min(xs) - margin, max(xs) + margin, float(min_w), w_scr)
    y1, y2 = _enlarge_interval(min(ys) - margin, max(ys) + margin, float(min_h), h_scr)
    # outward alignment; floor/ceil keep containment, clamping keeps it on the screen
    ax1 = max(0, int(math.floor(x1 / grid)) * grid)
    ay1 = max(0, int(math.floor(y1 / grid)) * grid)
    ax2 = min(w_scr, int(math.ceil(x2 / grid)) * grid)
    ay2 = min(h_scr, int(math.ceil(y2 / grid)) * grid)
    return (ax1, ay1, ax2, ay2)


def crop_history(images: Sequence[Image.Image], rois: Sequence[BoxPx | None]) -> list[Image.Image]:
    """Crop ``images[i]`` to pixel box ``rois[i]``; ``None`` keeps the image unchanged.

    Each ROI must lie inside its image (``roi_from_points`` guarantees it for the same
    ``screen_size``); a crop has size ``(x2 - x1, y2 - y1)``.
    """
    if len(images) != len(rois):
        raise ValueError(f"crop_history needs one ROI per image: {len(images)} images, {len(rois)} rois")
    out: list[Image.Image] = []
    for i, (img, roi) in enumerate(zip(images, rois)):
        if roi is None:
            out.append(img)
            continue
        x1, y1, x2, y2 = (int(v) for v in roi)
        w, h = img.size
        if not (0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h):
            raise ValueError(
                f"roi {i} = {roi!r} is not a non-empty box inside image {i} of size {img.size} px; "
                "build it with roi_from_points(..., screen_size=image.size)"
            )
        out.append(img.crop((x1, y1, x2, y2)))
    return out


def to_model_view(image: Image.Image, *, min_pixels: int, max_pixels: int) -> Image.Image:
    """Resize a screenshot to the size Qwen2.5-VL feeds its vision tower (``smart_resize`` with the
    model's pixel budget, ``cfg.model.min_pixels`` / ``max_pixels``; no default on purpose).

    Bicubic, as the released processor. Normalised coordinates are unchanged by the resize.
    """
    h, w = smart_resize(image.height, image.width, min_pixels=min_pixels, max_pixels=max_pixels)
    if (w, h) == image.size:
        return image
    return image.resize((w, h), Image.Resampling.BICUBIC)


# --------------------------------------------------------------------------- policies
ObsKind = Literal["crop", "full", "downscaled", "dropped"]


@dataclass(frozen=True)
class CompressedObs:
    """What remains of one history screenshot: ``image`` is ``None`` when dropped.

    ``roi_px`` is the crop box in pixels of the input image (``None`` unless ``kind == "crop"``).
    """

    step_index: int
    kind: ObsKind
    image: Image.Image | None
    roi_px: BoxPx | None = None


def step_roi(
    record: StepRecord,
    margin: float = DEFAULT_MARGIN_PX,
    min_size: float | tuple[float, float] = DEFAULT_MIN_SIZE_PX,
    grid: int = DEFAULT_GRID_PX,
    include_rollouts: bool = True,
    include_candidates: bool = True,
) -> BoxPx | None:
    """ROI (px of ``record.image``) of one step, or ``None`` when it tracks no point."""
    pts = tracked_points(record, include_rollouts=include_rollouts, include_candidates=include_candidates)
    return roi_from_points(points_norm_to_px(pts, record.image.size), record.image.size, margin, min_size, grid)


def compress_history(
    steps: Sequence[StepRecord],
    policy: Policy = "max",
    margin: float = DEFAULT_MARGIN_PX,
    min_size: float | tuple[float, float] = DEFAULT_MIN_SIZE_PX,
    grid: int = DEFAULT_GRID_PX,
    min_scale: float = 1.0,
    include_rollouts: bool = True,
    scroll_is_coordinate: bool = True,
    coordinate_steps: CoordinateSteps = "gt",
    include_candidates: bool = True,
) -> list[CompressedObs]:
    """Compress the screenshots of past ``steps`` (CCPO sec. 3.3; MAX/MIN-COMPRESS, App. A.4).

    Coordinate steps (``coordinate_steps="gt"``: the ground-truth action is in A_wc,
    :func:`is_coordinate_action`; ``"any"``: the ground truth or any rollout action carries a
    point, the released code) are cropped to :func:`step_roi` under ``"max"`` and ``"min"``; a
    coordinate step without any tracked point (a direction-only scroll) keeps its image full.
    Non-coordinate steps are dropped under ``"max"`` and kept under ``"min"`` (full when
    ``min_scale == 1``, else resized by ``min_scale`` per side and snapped to the 28 px grid).
    ``"none"`` keeps every image full. Returns one :class:`CompressedObs` per step, in order.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown CASC policy {policy!r}; expected one of {POLICIES}")
    if coordinate_steps not in ("gt", "any"):
        raise ValueError(f"coordinate_steps must be 'gt' or 'any', got {coordinate_steps!r}")
    if not (0.0 < min_scale <= 1.0):
        raise ValueError(f"min_scale must be in (0, 1], got {min_scale}")
    out: list[CompressedObs] = []
    for i, rec in enumerate(steps):
        if policy == "none":
            out.append(CompressedObs(i, "full", rec.image))
            continue
        coord = is_coordinate_action(rec.action, scroll_is_coordinate)
        if coordinate_steps == "any" and not coord:
            coord = any(action_points(a) for a in rec.rollout_actions) if include_rollouts else False
        if coord:
            roi = step_roi(rec, margin, min_size, grid, include_rollouts, include_candidates)
            if roi is None:  # a coordinate step with no point (direction-only scroll): kept full
                out.append(CompressedObs(i, "full", rec.image))
            else:
                out.append(CompressedObs(i, "crop", crop_history([rec.image], [roi])[0], roi))
        elif policy == "max":
            out.append(CompressedObs(i, "dropped", None))
        elif min_scale == 1.0:
            out.append(CompressedObs(i, "full", rec.image))
        else:
            out.append(CompressedObs(i, "downscaled", _downscale(rec.image, min_scale, grid)))
    return out


def obs_tokens(obs: CompressedObs, *, min_pixels: int, max_pixels: int) -> int:
    """Visual tokens (``<|image_pad|>``) the processor gives one compressed observation under the
    model's pixel budget (0 when dropped): :func:`guirl.imaging.visual_tokens` of its size, which
    for a grid-aligned crop of the model view is ``(w/28) * (h/28)``."""
    if obs.image is None:
        return 0
    w, h = obs.image.size
    return visual_tokens(h, w, min_pixels=min_pixels, max_pixels=max_pixels)


def _downscale(image: Image.Image, scale: float, grid: int) -> Image.Image:
    w = max(grid, int(round(image.width * scale / grid)) * grid)
    h = max(grid, int(round(image.height * scale / grid)) * grid)
    return image.resize((w, h), Image.Resampling.BICUBIC)


# --------------------------------------------------------------------------- nAO
@dataclass(frozen=True)
class NAOHistory:
    """Input of step ``t`` with an n-action-observation history.

    ``actions[k]`` is the action of past step ``step_indices[k]`` and ``observations[k]`` its
    (possibly cropped, possibly dropped = ``None``) screenshot; ``current`` is the full
    screenshot of step ``t``. ``images`` lists the images in prompt order (kept history, then
    current).
    """

    t: int
    step_indices: tuple[int, ...]
    actions: tuple[Action, ...]
    observations: tuple[CompressedObs, ...]
    current: Image.Image

    @property
    def images(self) -> list[Image.Image]:
        return [o.image for o in self.observations if o.image is not None] + [self.current]


def build_nao_history(
    steps: Sequence[StepRecord],
    t: int,
    n: int,
    policy: Policy = "max",
    **casc_kwargs: object,
) -> NAOHistory:
    """The last ``n`` actions with their observations before step ``t`` (CCPO's "nAO").

    Steps ``max(0, t - n) .. t - 1`` are compressed with :func:`compress_history` (``policy``
    and ``casc_kwargs`` passed on); ``steps[t].image`` is the current screenshot, kept full.
    CCPO evaluates n = 1..5 (1AO..5AO); any ``n >= 0`` is accepted (0 = no history).
    """
    if not (0 <= t < len(steps)):
        raise ValueError(f"t={t} is outside the episode's steps 0..{len(steps) - 1}")
    if n < 0:
        raise ValueError(f"n (history length) must be >= 0, got {n}")
    lo = max(0, t - n)
    past = list(steps[lo:t])
    obs = compress_history(past, policy, **casc_kwargs)  # type: ignore[arg-type]
    obs = [CompressedObs(o.step_index + lo, o.kind, o.image, o.roi_px) for o in obs]
    return NAOHistory(
        t=t,
        step_indices=tuple(range(lo, t)),
        actions=tuple(r.action for r in past),
        observations=tuple(obs),
        current=steps[t].image,
    )
