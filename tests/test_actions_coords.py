"""guirl.actions.coords: conversions between normalised, [0,1000], pixel and resized spaces; the
resized space needs the model's pixel budget (no default: docs/fidelity/ccpo.md, CCPO-29)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.actions.coords import (
    CoordSpace,
    clamp_unit,
    in_unit_square,
    norm_to_pixels,
    norm_to_thousand,
    pixels_to_norm,
    resized_size,
    thousand_to_norm,
)
from guirl.actions.formats import FormatContext, get_format
from guirl.imaging import PixelBudgetError, smart_resize

unit = st.floats(0.0, 1.0, allow_nan=False)
#: The paper profiles' pixel budget (configs/profiles/base/paper.yaml: Qwen2.5-VL's 16384-token
#: processor default, the UI-S1 budget CCPO Sec. 4.2 trains with).
PAPER = dict(min_pixels=3136, max_pixels=12845056)
#: Co-EPG App. B: images resized to multiples of 28 with at most 1024 x 28 x 28 = 802,816 px.
COEPG = dict(min_pixels=3136, max_pixels=1024 * 28 * 28)
#: The processor constructor's own defaults (56*56, 1280 tokens), the former library default.
PROCESSOR = dict(min_pixels=56 * 56, max_pixels=28 * 28 * 1280)


@pytest.mark.parametrize(
    "p, w, h, px",
    [
        ((0.5, 0.5), 1080, 2400, (540, 1200)),  # centre
        ((0.0, 1.0), 1080, 2400, (0, 2400)),  # edges map to 0 and the full size
        ((0.3, 0.7), 1080, 2400, (324, 1680)),  # ordinary point
        ((0.00046, 0.0), 1080, 2400, (0, 0)),  # 0.497 px rounds down
    ],
)
def test_norm_to_pixels(p, w, h, px):
    assert norm_to_pixels(p, w, h) == px


@pytest.mark.parametrize(
    "p, k",
    [
        ((0.5, 0.25), (500, 250)),  # exact grid points
        ((0.0004, 0.9996), (0, 1000)),  # rounds to the nearest integer
        ((0.1235, 0.0), (124, 0)),  # 123.5 is not exactly representable; nearest wins
    ],
)
def test_norm_to_thousand(p, k):
    assert norm_to_thousand(p) == k
    assert thousand_to_norm(k) == (k[0] / 1000, k[1] / 1000)


def test_pixels_to_norm_no_clamp():
    # outside points are reported, not clamped, by the scalar helper
    assert pixels_to_norm((1200, -10), 1080, 2400) == (1200 / 1080, -10 / 2400)


@pytest.mark.parametrize("w, h", [(1080, 2400), (1440, 3120), (720, 1280), (504, 280)])
def test_resized_size_matches_smart_resize(w, h):
    # resized_size returns (width, height); smart_resize returns (height, width)
    hr, wr = smart_resize(h, w, **PAPER)
    assert resized_size(w, h, **PAPER) == (wr, hr)
    assert wr % 28 == 0 and hr % 28 == 0


@pytest.mark.parametrize(
    "budget, size",
    [
        # UI-S1's released max_pixels = 12800*28*28 leaves a 1080x2400 screenshot nearly unscaled
        (dict(min_pixels=3136, max_pixels=12800 * 28 * 28), (1092, 2408)),
        # the paper profiles' 12,845,056 px: the same size (the resolution AgentCPM-GUI App. B.1.1's
        # Qwen2.5-VL prompt states, "1092x2408")
        (PAPER, (1092, 2408)),
        # Co-EPG App. B's 802,816 px: 588 x 1316 (21 x 47 = 987 tokens)
        (COEPG, (588, 1316)),
        # the processor constructor's default (the former silent library default): 672 x 1484
        (PROCESSOR, (672, 1484)),
    ],
)
def test_resized_space_respects_max_pixels(budget, size):
    sp = CoordSpace.resized(1080, 2400, **budget)
    assert (sp.width, sp.height) == size
    assert sp.width * sp.height <= budget["max_pixels"]


def test_resized_space_needs_the_budget():
    # no default budget: leaving it out names the arguments
    with pytest.raises(TypeError, match="min_pixels"):
        CoordSpace.resized(1080, 2400)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="max_pixels"):
        resized_size(1080, 2400, min_pixels=3136)  # type: ignore[call-arg]
    # a FormatContext for a resized-pixel format without budget or image size: an error naming
    # max_pixels from parse (not a silent parse failure) and from format
    ctx = FormatContext(width=1080, height=2400)
    with pytest.raises(PixelBudgetError, match="min_pixels is required"):
        get_format("ccpo").parse('<action>{"action": "click", "coordinate": [546, 1204]}</action>', ctx)
    with pytest.raises(PixelBudgetError, match="min_pixels is required"):
        ctx.space("resized")
    # formats in [0, 1000] or original pixels need no budget
    assert ctx.space("thousand").width == 1000 and ctx.space("pixel").width == 1080


@pytest.mark.parametrize(
    "budget, centre, expected",
    [
        # CCPO-29 (docs/fidelity/ccpo.md): at the paper profiles' 12,845,056 px the model sees
        # 1092x2408, so the centre of a 1080x2400 screen is pixel (546, 1204) = (0.5, 0.5)
        (PAPER, (546, 1204), (0.5, 0.5)),
        # Co-EPG's 802,816 px: the model sees 588x1316 and writes the centre as (294, 658)
        (COEPG, (294, 658), (0.5, 0.5)),
        # the former silent default (1280 tokens, 672x1484) read the same (546, 1204) as (0.81, 0.81)
        (PROCESSOR, (546, 1204), (546 / 672, 1204 / 1484)),
    ],
)
def test_centre_click_at_the_models_budget(budget, centre, expected):
    ctx = FormatContext(width=1080, height=2400, **budget)
    text = f'<action>{{"action": "click", "coordinate": [{centre[0]}, {centre[1]}]}}</action>'
    res = get_format("ccpo").parse(text, ctx)
    assert res.ok, res.reason
    assert res.action.point == pytest.approx(expected)
    assert round(expected[0], 2) == (0.5 if budget is not PROCESSOR else 0.81)


@pytest.mark.parametrize(
    "space, xy, expected",
    [
        (CoordSpace.thousand(), (1000, 0), (1.0, 0.0)),  # inclusive edges
        (CoordSpace.thousand(), (1001, 5), None),  # outside -> None, not clamped
        (CoordSpace.thousand(), (-1, 5), None),  # negative -> None
        (CoordSpace.pixels(1080, 2400), (540, 2400), (0.5, 1.0)),  # pixel edge
        (CoordSpace.normalized(), (1.2, 0.5), None),  # normalised > 1
        (CoordSpace.normalized(), (math.nan, 0.5), None),  # NaN
        (CoordSpace("resized", 500, 1000), (250, 1000), (0.5, 1.0)),  # resized image pixels
    ],
)
def test_to_norm_range(space, xy, expected):
    assert space.to_norm(*xy) == expected


@pytest.mark.parametrize(
    "space",
    [
        CoordSpace.normalized(),
        CoordSpace.thousand(),
        CoordSpace.pixels(1080, 2400),
        CoordSpace.resized(1080, 2400, **PAPER),
    ],
)
@settings(max_examples=100, deadline=None)
@given(x=unit, y=unit)
def test_quantize_error_within_tolerance(space, x, y):
    q = space.quantize((x, y))
    assert in_unit_square(q)
    assert abs(q[0] - x) <= space.tolerance() + 1e-12
    assert abs(q[1] - y) <= space.tolerance() + 1e-12
    # integer spaces write integers
    if space.integer:
        assert all(isinstance(v, int) for v in space.from_norm((x, y)))


def test_bad_space_rejected():
    with pytest.raises(ValueError, match="unknown coordinate kind"):
        CoordSpace("inches")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        CoordSpace.pixels(0, 100)


def test_clamp_unit():
    assert clamp_unit((-0.2, 1.7)) == (0.0, 1.0)
    assert clamp_unit((0.3, 0.4)) == (0.3, 0.4)
