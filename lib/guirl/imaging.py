"""Qwen2.5-VL image geometry: ``smart_resize`` and the visual-token count of an image.

Qwen2.5-VL resizes every image so that both sides are multiples of
``factor = patch_size * merge_size = 14 * 2 = 28`` pixels and the area lies in
``[min_pixels, max_pixels]``, keeping the aspect ratio as closely as rounding allows. Each
28x28 block then becomes one visual token after the 2x2 patch merger.

The pixel budget is the model's, so every function here takes ``min_pixels`` and ``max_pixels``
as required keyword arguments: there is no library default. The budget differs between runs
(the paper profiles use 12,845,056 px, CCPO Sec. 4.2 with UI-S1's budget; Co-EPG App. B 1024 x
28 x 28 = 802,816 px; the tiny profile 141,120 px), and a silent default reads a 1080x2400
screenshot as 672x1484 instead of 1092x2408 (docs/fidelity/ccpo.md, CCPO-29). Pass
``cfg.model.min_pixels`` / ``cfg.model.max_pixels``. :data:`PROCESSOR_MIN_PIXELS` /
:data:`PROCESSOR_MAX_PIXELS` are the defaults of the released image processor's own
``Qwen2VLImageProcessor`` (for comparing against it), never applied implicitly.
"""

from __future__ import annotations

import math
import numbers

PATCH_SIZE = 14
MERGE_SIZE = 2
FACTOR = PATCH_SIZE * MERGE_SIZE  # 28 px per visual token side
#: Defaults of the released ``Qwen2VLImageProcessor`` constructor (56*56 and 28*28*1280 px);
#: documentation of that processor, not a default of any function in this library.
PROCESSOR_MIN_PIXELS = 56 * 56
PROCESSOR_MAX_PIXELS = 28 * 28 * 1280
#: Former names of the two constants above (still imported by callers outside this module).
DEFAULT_MIN_PIXELS = PROCESSOR_MIN_PIXELS
DEFAULT_MAX_PIXELS = PROCESSOR_MAX_PIXELS
MAX_ASPECT_RATIO = 200


class PixelBudgetError(ValueError):
    """The model's pixel budget is missing or inconsistent (a caller's error, never a parse
    failure: output parsers re-raise it instead of reporting an unparsable output)."""


def check_budget(min_pixels: int | None, max_pixels: int | None, what: str = "smart_resize") -> tuple[int, int]:
    """``(min_pixels, max_pixels)`` as ints; :class:`PixelBudgetError` naming the missing or bad
    argument.

    The model's pixel budget has no default (module doc): ``None`` for either is an error that
    says where the value comes from (``cfg.model.min_pixels`` / ``cfg.model.max_pixels``).
    """
    for name, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)):
        if v is None:
            raise PixelBudgetError(
                f"{what}: {name} is required (the model's pixel budget has no default); "
                f"pass cfg.model.{name}, or the resized image size"
            )
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0:
            raise PixelBudgetError(f"{what}: {name} must be a positive integer number of pixels, got {v!r}")
    lo, hi = int(min_pixels), int(max_pixels)  # type: ignore[arg-type]
    if lo > hi:
        raise PixelBudgetError(f"{what}: min_pixels {lo} exceeds max_pixels {hi}")
    return lo, hi


def smart_resize(
    height: int,
    width: int,
    factor: int = FACTOR,
    *,
    min_pixels: int,
    max_pixels: int,
) -> tuple[int, int]:
    """Return ``(resized_height, resized_width)`` in pixels as Qwen2-VL/Qwen2.5-VL do.

    ``min_pixels`` / ``max_pixels``: the model's pixel budget (required; :func:`check_budget`).

    1. round each side to the nearest multiple of ``factor``;
    2. if the area exceeds ``max_pixels``, scale both sides by ``sqrt(h*w/max_pixels)``
       and round *down* to multiples of ``factor``;
    3. if it is below ``min_pixels``, scale up by ``sqrt(min_pixels/(h*w))`` and round *up*.

    Raises ``ValueError`` for non-positive sides or an aspect ratio above 200 (as the
    reference implementation does), and for a missing or inconsistent budget.
    """
    min_pixels, max_pixels = check_budget(min_pixels, max_pixels)
    if height <= 0 or width <= 0:
        raise ValueError(f"image sides must be positive, got height={height}, width={width}")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {MAX_ASPECT_RATIO}, "
            f"got {max(height, width) / min(height, width)}"
        )
    # Python's round() (banker's rounding) as in the reference; a side may round to 0 and
    # is then lifted by the min_pixels branch.
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def visual_tokens(height: int, width: int, *, min_pixels: int, max_pixels: int) -> int:
    """Number of ``<|image_pad|>`` tokens one image of ``height x width`` px becomes under the
    model's pixel budget (required keywords)."""
    h, w = smart_resize(height, width, min_pixels=min_pixels, max_pixels=max_pixels)
    return (h // FACTOR) * (w // FACTOR)
