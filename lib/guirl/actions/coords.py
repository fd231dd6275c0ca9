"""Coordinate spaces of the papers' action formats and exact conversions to/from normalised [0, 1].

Canonical unit (see :mod:`guirl.actions.types`): ``(x, y)`` normalised by the *original* screen
width/height. Every format writes coordinates in one of four spaces:

``normalized``  floats in ``[0, 1]`` (Aguvis pyautogui code).
``thousand``    integers in ``[0, 1000]``: ``round(v * 1000)`` per axis (AgentCPM-GUI schema
                ``Location``, GUI-Odyssey, OS-Atlas, UI-TARS-1.0 relative coordinates).
``pixel``       integer pixels of the original screenshot ``[0, W] x [0, H]`` (AndroidLab ``element``).
``resized``     integer pixels of the image the Qwen2.5-VL model saw, ``[0, W_r] x [0, H_r]`` with
                ``(H_r, W_r) = smart_resize(H, W, min_pixels, max_pixels)`` (Qwen2.5-VL absolute
                coordinates; CCPO / UI-S1 ``mobile_use``, GUI-R1 style CES executor). The pixel
                budget is the model's (``cfg.model.min_pixels`` / ``max_pixels``) and has no
                default here (:mod:`guirl.imaging`): at the paper profiles' 12,845,056 px a
                1080x2400 screen is 1092x2408, so its centre is (546, 1204).

Rounding (``from_norm``): Python ``round`` (half to even) to the grid of the space; ``normalized``
rounds to 4 decimals. The quantisation error is therefore at most half a grid step per axis:
:meth:`CoordSpace.tolerance` returns it in normalised units.

Clamping (``to_norm``): none by default. A coordinate outside ``[0, size]`` is reported as
``None`` by :meth:`CoordSpace.to_norm` (parsers turn that into the failure reason
``"point outside the screen"``, because public evaluators count such a prediction wrong);
:func:`clamp_unit` is the explicit opt-in clamp to ``[0, 1]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from guirl.imaging import smart_resize

CoordKind = Literal["normalized", "thousand", "pixel", "resized"]
COORD_KINDS: tuple[str, ...] = ("normalized", "thousand", "pixel", "resized")

#: Decimals written for ``normalized`` coordinates (Aguvis writes e.g. ``x=0.5123``).
NORMALIZED_DECIMALS = 4
#: Grid of the ``thousand`` space (AgentCPM-GUI schema ``Location``: integers 0..1000).
THOUSAND = 1000


# ----------------------------------------------------------------------------- scalar helpers
def norm_to_pixels(p: tuple[float, float], width: int, height: int) -> tuple[int, int]:
    """Normalised point -> integer pixels ``(round(x*W), round(y*H))``."""
    return (round(p[0] * width), round(p[1] * height))


def pixels_to_norm(p: tuple[float, float], width: int, height: int) -> tuple[float, float]:
    """Pixels -> normalised ``(x/W, y/H)``; no clamping."""
    return (p[0] / width, p[1] / height)


def norm_to_thousand(p: tuple[float, float]) -> tuple[int, int]:
    """Normalised point -> integers in ``[0, 1000]`` (``round(v*1000)``)."""
    return (round(p[0] * THOUSAND), round(p[1] * THOUSAND))


def thousand_to_norm(p: tuple[float, float]) -> tuple[float, float]:
    """``[0, 1000]`` -> normalised ``(x/1000, y/1000)``; no clamping."""
    return (p[0] / THOUSAND, p[1] / THOUSAND)


def resized_size(width: int, height: int, *, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """``(W_r, H_r)``: the size Qwen2.5-VL resizes a ``width x height`` screenshot to under the
    model's pixel budget (required keywords; no default, :mod:`guirl.imaging`).

    Note the order: this returns width first, while :func:`guirl.imaging.smart_resize`
    returns ``(height, width)``.
    """
    h_r, w_r = smart_resize(height, width, min_pixels=min_pixels, max_pixels=max_pixels)
    return (w_r, h_r)


def in_unit_square(p: tuple[float, float]) -> bool:
    """True when both coordinates are finite and inside ``[0, 1]`` (edges included)."""
    return all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in p)


def clamp_unit(p: tuple[float, float]) -> tuple[float, float]:
    """Clamp a finite point to ``[0, 1]^2`` (explicit opt-in; parsers do not clamp)."""
    return (min(max(float(p[0]), 0.0), 1.0), min(max(float(p[1]), 0.0), 1.0))


# ----------------------------------------------------------------------------- CoordSpace
@dataclass(frozen=True)
class CoordSpace:
    """A coordinate space: ``kind`` plus the extent ``(width, height)`` of one axis unit.

    ``width``/``height`` are the numbers a coordinate is divided by to become normalised:
    1 for ``normalized``, 1000 for ``thousand``, the screen size for ``pixel``, the resized
    model-image size for ``resized``. Build with the class methods.
    """

    kind: CoordKind
    width: int = 1
    height: int = 1

    def __post_init__(self) -> None:
        if self.kind not in COORD_KINDS:
            raise ValueError(f"unknown coordinate kind {self.kind!r}; expected one of {COORD_KINDS}")
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"{self.kind} space needs positive width/height, got {self.width}x{self.height}")

    # constructors ------------------------------------------------------------
    @classmethod
    def normalized(cls) -> CoordSpace:
        return cls("normalized", 1, 1)

    @classmethod
    def thousand(cls) -> CoordSpace:
        return cls("thousand", THOUSAND, THOUSAND)

    @classmethod
    def pixels(cls, width: int, height: int) -> CoordSpace:
        """Pixels of the original ``width x height`` screenshot."""
        return cls("pixel", int(width), int(height))

    @classmethod
    def resized(cls, width: int, height: int, *, min_pixels: int, max_pixels: int) -> CoordSpace:
        """Pixels of the Qwen2.5-VL-resized image of a ``width x height`` screenshot under the
        model's pixel budget (required keywords)."""
        w_r, h_r = resized_size(width, height, min_pixels=min_pixels, max_pixels=max_pixels)
        return cls("resized", w_r, h_r)

    # conversions -------------------------------------------------------------
    @property
    def integer(self) -> bool:
        """True when the format writes integers in this space (all but ``normalized``)."""
        return self.kind != "normalized"

    def from_norm(self, p: tuple[float, float]) -> tuple[float, float] | tuple[int, int]:
        """Normalised point -> this space, rounded to the space's grid (see module doc)."""
        if self.kind == "normalized":
            return (round(float(p[0]), NORMALIZED_DECIMALS), round(float(p[1]), NORMALIZED_DECIMALS))
        return (round(p[0] * self.width), round(p[1] * self.height))

    def to_norm(self, x: float, y: float) -> tuple[float, float] | None:
        """This space -> normalised point, or ``None`` when outside ``[0, size]`` or not finite."""
        x, y = float(x), float(y)
        if not (math.isfinite(x) and math.isfinite(y)):
            return None
        if not (0.0 <= x <= self.width and 0.0 <= y <= self.height):
            return None
        if self.kind == "normalized":
            return (x, y)
        return (x / self.width, y / self.height)

    def quantize(self, p: tuple[float, float]) -> tuple[float, float]:
        """``to_norm(from_norm(p))``: the normalised point a format round-trip yields."""
        q = self.from_norm(p)
        out = self.to_norm(*q)
        assert out is not None  # from_norm of a point in [0,1] stays in range
        return out

    def tolerance(self) -> float:
        """Largest per-axis quantisation error, in normalised units (half a grid step)."""
        if self.kind == "normalized":
            return 0.5 * 10.0**-NORMALIZED_DECIMALS
        return 0.5 / min(self.width, self.height)
