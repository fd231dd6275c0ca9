"""guirl.imaging: smart_resize / visual_tokens against the real Qwen2.5-VL image processor, and the
required pixel budget (no library default: docs/fidelity/ccpo.md, CCPO-29)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from guirl.imaging import (
    FACTOR,
    PROCESSOR_MAX_PIXELS,
    PROCESSOR_MIN_PIXELS,
    PixelBudgetError,
    check_budget,
    smart_resize,
    visual_tokens,
)

# The released processor's own constructor defaults: the budget the random-size tests compare at.
BUDGET = dict(min_pixels=PROCESSOR_MIN_PIXELS, max_pixels=PROCESSOR_MAX_PIXELS)
# The paper profiles' budget (configs/profiles/base/paper.yaml; CCPO Sec. 4.2 uses UI-S1's).
PAPER_MAX_PIXELS = 12845056


def _processor(min_pixels: int = PROCESSOR_MIN_PIXELS, max_pixels: int = PROCESSOR_MAX_PIXELS):
    # Built locally, no download. Without torchvision, Qwen2VLImageProcessor resolves to the
    # PIL backend; import it directly so the test does not depend on that fallback warning.
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(size={"shortest_edge": min_pixels, "longest_edge": max_pixels})


@pytest.fixture(scope="module")
def processor():
    return _processor()


def _processor_tokens(proc, width: int, height: int) -> tuple[int, tuple[int, int, int]]:
    img = Image.new("RGB", (width, height), (200, 30, 30))
    grid = proc(images=[img], return_tensors="np")["image_grid_thw"][0]
    return int(np.prod(grid)) // 4, tuple(int(g) for g in grid)


def test_processor_class_is_the_pil_backend():
    # The CPU environment has no torchvision; the public name must resolve to the PIL class
    # (if torchvision sneaks in, the PIL processor import breaks; see docs/stack.md).
    from transformers import Qwen2VLImageProcessor

    assert _processor().__class__.__name__ == "Qwen2VLImageProcessorPil"
    assert "Pil" in Qwen2VLImageProcessor().__class__.__name__


def test_visual_tokens_match_processor_on_random_sizes(processor):
    # 60 seeded random sizes, mostly small (fast), covering the min_pixels lift (tiny images),
    # odd aspect ratios and sides that are not multiples of 28.
    rng = random.Random(1234)
    sizes = [(rng.randint(20, 700), rng.randint(20, 700)) for _ in range(50)]
    sizes += [(rng.randint(5, 60), rng.randint(5, 60)) for _ in range(6)]  # below min_pixels
    sizes += [(rng.randint(20, 40), rng.randint(600, 900)) for _ in range(4)]  # tall strips
    for w, h in sizes:
        tokens, grid = _processor_tokens(processor, w, h)
        assert visual_tokens(h, w, **BUDGET) == tokens, (w, h, grid)
        rh, rw = smart_resize(h, w, **BUDGET)
        assert (grid[1] * 14, grid[2] * 14) == (rh, rw), (w, h)


@pytest.mark.parametrize(
    "max_pixels, expected_tokens",
    [
        (PROCESSOR_MAX_PIXELS, 1272),  # 1080x2400 phone screen, the processor's 1280 tokens -> 1484x672 px
        (1024 * 28 * 28, 987),  # same screen, Co-EPG App. B's 1024 x 28 x 28 -> 1316x588 px
        (PAPER_MAX_PIXELS, 3354),  # same screen, the paper profiles' budget -> 2408x1092 px (39 x 86)
    ],
)
def test_phone_screen_1080x2400(max_pixels, expected_tokens):
    proc = _processor(max_pixels=max_pixels)
    tokens, _ = _processor_tokens(proc, 1080, 2400)
    assert tokens == expected_tokens
    assert visual_tokens(2400, 1080, min_pixels=PROCESSOR_MIN_PIXELS, max_pixels=max_pixels) == expected_tokens


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4000), st.integers(1, 4000))
def test_smart_resize_properties(h, w):
    if max(h, w) / min(h, w) > 200:
        with pytest.raises(ValueError):
            smart_resize(h, w, **BUDGET)
        return
    rh, rw = smart_resize(h, w, **BUDGET)
    assert rh % FACTOR == 0 and rw % FACTOR == 0
    assert rh >= FACTOR and rw >= FACTOR
    assert PROCESSOR_MIN_PIXELS <= rh * rw <= PROCESSOR_MAX_PIXELS
    assert visual_tokens(h, w, **BUDGET) == (rh // FACTOR) * (rw // FACTOR)


@pytest.mark.parametrize(
    "h, w, expected",
    [
        (504, 280, (504, 280)),  # already on the grid and within budget: unchanged
        (500, 300, (504, 308)),  # each side rounds to the nearest multiple of 28
        (10, 10, (56, 56)),  # lifted to min_pixels = 56*56
    ],
)
def test_smart_resize_cases(h, w, expected):
    assert smart_resize(h, w, **BUDGET) == expected


@pytest.mark.parametrize("h, w", [(0, 10), (10, -1), (1, 201)])
def test_smart_resize_rejects_bad_sizes(h, w):
    # non-positive sides; aspect ratio above 200
    with pytest.raises(ValueError):
        smart_resize(h, w, **BUDGET)


def test_the_budget_has_no_default():
    # the model's budget must be passed: leaving it out is an error naming the argument
    with pytest.raises(TypeError, match="min_pixels"):
        smart_resize(2400, 1080)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="max_pixels"):
        visual_tokens(2400, 1080, min_pixels=3136)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "lo, hi, needle",
    [
        (None, 12845056, "min_pixels is required"),  # a None read from an unset config value
        (3136, None, "max_pixels is required"),
        (3136, 0, "max_pixels must be a positive integer"),
        (3136, 1.5e6, "max_pixels must be a positive integer"),  # a float is not a pixel count
        (12845056, 3136, "min_pixels 12845056 exceeds max_pixels 3136"),
    ],
)
def test_check_budget_names_the_argument(lo, hi, needle):
    with pytest.raises(PixelBudgetError, match=needle):
        check_budget(lo, hi)
    with pytest.raises(PixelBudgetError, match=needle):
        smart_resize(2400, 1080, min_pixels=lo, max_pixels=hi)  # type: ignore[arg-type]
