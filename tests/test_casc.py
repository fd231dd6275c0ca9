"""guirl.methods.ccpo.casc: CCPO's Coordinate-Aware Spatial Compression (sec. 3.3, App. A.4), with
token counts checked against the real (tiny Qwen2.5-VL) processor."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from guirl.actions.types import Action, ActionType
from guirl.analysis.accounting import history_tokens
from guirl.methods.ccpo.casc import (
    CompressedObs,
    StepRecord,
    build_nao_history,
    compress_history,
    crop_history,
    is_coordinate_action,
    obs_tokens,
    roi_from_points,
    to_model_view,
    tracked_points,
)

CLICK = ActionType.CLICK


def _img(w: int = 280, h: int = 504, color=(10, 20, 30)) -> Image.Image:
    return Image.new("RGB", (w, h), color)


def _click(x: float, y: float) -> Action:
    return Action(CLICK, point=(x, y))


TYPE = Action(ActionType.TYPE, text="hello")
WAIT = Action(ActionType.WAIT)
SCROLL_NO_POINT = Action(ActionType.SCROLL, direction="down", convention="content")
SCROLL_WITH_POINTS = Action(ActionType.SCROLL, direction="up", convention="finger", point=(0.5, 0.8), point2=(0.5, 0.2))


# ----------------------------------------------------------------------------- ROI cases
@pytest.mark.parametrize(
    "points, screen, margin, min_size, expected",
    [
        # one point in the middle of a 280x504 model view: +-28 px margin gives 56x56 at
        # (112,224)-(168,280), already on the 28 px grid
        ([(140, 252)], (280, 504), 28, 56, (112, 224, 168, 280)),
        # off-grid point: margin box (72,72)-(128,128) aligns outward to (56,56)-(140,140)
        ([(100, 100)], (280, 504), 28, 56, (56, 56, 140, 140)),
        # two points: bounding box (50,60)-(200,300), +28 margin, aligned outward
        ([(50, 60), (200, 300)], (280, 504), 28, 56, (0, 28, 252, 336)),
        # point in the top-left corner: the box slides inside the screen, keeps 56x56
        ([(0, 0)], (280, 504), 28, 56, (0, 0, 56, 56)),
        # point in the bottom-right corner of the screen
        ([(280, 504)], (280, 504), 28, 56, (224, 448, 280, 504)),
        # min_size larger than the margin box: grown about the centre to 168 px, then aligned
        ([(140, 252)], (280, 504), 0, 168, (56, 168, 224, 336)),
        # min_size larger than the screen width: the ROI spans the whole width
        ([(140, 252)], (280, 504), 0, (400, 56), (0, 224, 280, 280)),
        # off-screen prediction (x < 0) is clamped to the screen first
        ([(-50, 252)], (280, 504), 28, 56, (0, 224, 56, 280)),
        # screen side not a multiple of 28 (original screenshot): the margin box slides left
        # to (244, 0)-(300, 56); x1 aligns down to 224, the right edge stays on the screen edge
        ([(295, 10)], (300, 100), 28, 56, (224, 0, 300, 56)),
        # no points -> no ROI
        ([], (280, 504), 28, 56, None),
    ],
)
def test_roi_cases(points, screen, margin, min_size, expected):
    assert roi_from_points(points, screen, margin, min_size) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(screen_size=(0, 100)),  # empty screen
        dict(screen_size=(100, 100), margin=-1),  # negative margin
        dict(screen_size=(100, 100), grid=0),  # no grid
    ],
)
def test_roi_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        roi_from_points([(1, 1)], **kwargs)


def test_roi_rejects_non_finite_points():
    with pytest.raises(ValueError):
        roi_from_points([(float("nan"), 3.0)], (100, 100))


_screen = st.tuples(st.integers(20, 1200), st.integers(20, 1200))


@settings(max_examples=200, deadline=None)
@given(
    screen=_screen,
    fracs=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=8),
    margin=st.integers(0, 80),
    min_size=st.integers(1, 400),
    grid_screen=st.booleans(),
)
def test_roi_properties(screen, fracs, margin, min_size, grid_screen):
    w, h = screen
    if grid_screen:  # a model-view image: both sides multiples of 28
        w, h = max(28, w // 28 * 28), max(28, h // 28 * 28)
    pts = [(fx * w, fy * h) for fx, fy in fracs]
    x1, y1, x2, y2 = roi_from_points(pts, (w, h), margin, min_size)
    # inside the screen and non-empty
    assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
    # contains every tracked point
    for px, py in pts:
        assert x1 <= px <= x2 and y1 <= py <= y2
    # at least min_size per side unless the screen is smaller
    assert x2 - x1 >= min(min_size, w) and y2 - y1 >= min(min_size, h)
    # edges on the 28 px grid, except a clamped edge sitting on an off-grid screen edge
    for v, edge in ((x1, 0), (y1, 0), (x2, w), (y2, h)):
        assert v % 28 == 0 or v == edge
    if grid_screen:
        assert all(v % 28 == 0 for v in (x1, y1, x2, y2))
    # crops have the ROI size
    crop = crop_history([Image.new("L", (w, h))], [(x1, y1, x2, y2)])[0]
    assert crop.size == (x2 - x1, y2 - y1)


def test_crop_history_keeps_none_and_checks_bounds():
    a, b = _img(), _img(color=(1, 2, 3))
    out = crop_history([a, b], [None, (28, 28, 84, 112)])
    assert out[0] is a
    assert out[1].size == (56, 84)
    with pytest.raises(ValueError, match="roi 0"):
        crop_history([a], [(0, 0, 281, 10)])  # wider than the image
    with pytest.raises(ValueError, match="one ROI per image"):
        crop_history([a, b], [None])


def test_crop_content_is_the_region():
    # a white square at (56..84, 112..140) on black; the crop around it contains it exactly
    img = Image.new("L", (280, 504), 0)
    img.paste(255, (56, 112, 84, 140))
    roi = roi_from_points([(70, 126)], img.size, margin=0, min_size=28)
    assert roi == (56, 112, 84, 140)
    crop = crop_history([img], [roi])[0]
    assert crop.getextrema() == (255, 255)


# ----------------------------------------------------------------------------- tracking
@pytest.mark.parametrize(
    "action, expected",
    [
        (_click(0.1, 0.2), True),  # click
        (Action(ActionType.LONG_PRESS, point=(0.3, 0.3)), True),  # long press
        (Action(ActionType.SELECT, point=(0.3, 0.3), text="Large"), True),  # web select
        (SCROLL_WITH_POINTS, True),  # drag with start/end points
        (SCROLL_NO_POINT, True),  # AndroidControl scroll (direction only): "we treat scroll as a coordinate action"
        (TYPE, False),
        (WAIT, False),
        (Action(ActionType.OPEN_APP, text="Maps"), False),
        (Action(ActionType.TERMINATE, status="success"), False),
        (Action(ActionType.PRESS, key="back"), False),
    ],
)
def test_is_coordinate_action(action, expected):
    assert is_coordinate_action(action) is expected


def test_released_code_scroll_rule():
    # scroll_is_coordinate=False: a scroll counts only with a point (the released code)
    assert is_coordinate_action(SCROLL_NO_POINT, scroll_is_coordinate=False) is False
    assert is_coordinate_action(SCROLL_WITH_POINTS, scroll_is_coordinate=False) is True


def test_tracked_points_gather_gt_boxes_and_rollouts():
    rec = StepRecord(
        image=_img(),
        action=_click(0.5, 0.5),
        target_box=(0.4, 0.4, 0.6, 0.6),
        candidate_boxes=((0.4, 0.4, 0.6, 0.6), (0.1, 0.1, 0.2, 0.2)),
        rollout_actions=(_click(0.5, 0.5), None, TYPE, _click(0.9, 0.1)),
    )
    pts = tracked_points(rec)
    # gt point, gt box corners, new candidate corners, new rollout point; duplicates removed;
    # the unparseable (None) and the type rollouts add nothing
    assert pts == [(0.5, 0.5), (0.4, 0.4), (0.6, 0.6), (0.1, 0.1), (0.2, 0.2), (0.9, 0.1)]
    assert tracked_points(rec, include_rollouts=False, include_candidates=False) == pts[:3]


def test_rollouts_widen_the_roi():
    base = StepRecord(image=_img(), action=_click(0.5, 0.5))
    wide = StepRecord(image=_img(), action=_click(0.5, 0.5), rollout_actions=(_click(0.1, 0.1),))
    (b,) = compress_history([base], "max")
    (w,) = compress_history([wide], "max")
    assert b.roi_px == (112, 224, 168, 280)
    assert w.roi_px == (0, 0, 168, 280)  # now also covers (28, 50.4) px


# ----------------------------------------------------------------------------- policies
def _episode() -> list[StepRecord]:
    acts = [_click(0.5, 0.5), TYPE, SCROLL_NO_POINT, _click(0.2, 0.9), WAIT, SCROLL_WITH_POINTS]
    return [StepRecord(image=_img(color=(i, i, i)), action=a) for i, a in enumerate(acts)]


def test_max_compress_drops_exactly_the_non_coordinate_steps():
    steps = _episode()
    out = compress_history(steps, "max")
    kinds = [o.kind for o in out]
    # the direction-only scroll (step 2) is a coordinate step without a point: kept full
    assert kinds == ["crop", "dropped", "full", "crop", "dropped", "crop"]
    code = compress_history(steps, "max", scroll_is_coordinate=False)
    assert [o.kind for o in code] == ["crop", "dropped", "dropped", "crop", "dropped", "crop"]
    for o, rec in zip(code, steps):
        assert (o.image is None) == (not is_coordinate_action(rec.action, scroll_is_coordinate=False))
        if o.kind == "crop":
            x1, y1, x2, y2 = o.roi_px
            assert o.image.size == (x2 - x1, y2 - y1)


def test_coordinate_steps_any_is_the_released_code_rule():
    # a rollout clicked on a "type" step: "gt" (paper) drops the image, "any" (code) crops it
    rec = StepRecord(image=_img(), action=TYPE, rollout_actions=(_click(0.5, 0.5),))
    assert compress_history([rec], "max")[0].kind == "dropped"
    (o,) = compress_history([rec], "max", coordinate_steps="any")
    assert o.kind == "crop" and o.roi_px == (112, 224, 168, 280)
    with pytest.raises(ValueError, match="coordinate_steps"):
        compress_history([rec], "max", coordinate_steps="some")


def test_min_compress_keeps_non_coordinate_steps_full():
    steps = _episode()
    out = compress_history(steps, "min")
    assert [o.kind for o in out] == ["crop", "full", "full", "crop", "full", "crop"]
    assert out[1].image is steps[1].image


def test_min_compress_downscaled_option():
    out = compress_history(_episode(), "min", min_scale=0.5)
    assert out[1].kind == "downscaled" and out[1].image.size == (140, 252)


def test_none_policy_keeps_everything():
    steps = _episode()
    assert all(o.kind == "full" and o.image is s.image for o, s in zip(compress_history(steps, "none"), steps))


@pytest.mark.parametrize("bad", [dict(policy="medium"), dict(policy="min", min_scale=0.0)])
def test_compress_history_rejects_bad_arguments(bad):
    with pytest.raises(ValueError):
        compress_history(_episode(), **bad)


def test_token_order_none_ge_min_ge_max():
    # 280x504 history images: full = 10x18 = 180 tokens each (+2 start/end per image).
    # click (0.5, 0.5) -> 56x56 crop = 4 tokens; click (0.2, 0.9) = (56, 453.6) px ->
    # (28, 420)-(84, 504) = 2x3 = 6 tokens; drag from y=403.2 to y=100.8 px at x=140 ->
    # (112, 56)-(168, 448) = 2x14 = 28 tokens.
    steps = _episode()
    toks = {}
    for pol in ("none", "min", "max"):
        imgs = [o.image.size for o in compress_history(steps, pol) if o.image is not None]
        toks[pol] = history_tokens(imgs, min_pixels=3136, max_pixels=141120)  # the tiny profile's budget
    # the direction-only scroll keeps its full image under MAX and MIN (a coordinate step)
    assert toks == {
        "none": 6 * (180 + 2),
        "min": 3 * (180 + 2) + (4 + 2) + (6 + 2) + (28 + 2),
        "max": (180 + 2) + (4 + 2) + (6 + 2) + (28 + 2),
    }


# ----------------------------------------------------------------------------- nAO
@pytest.mark.parametrize(
    "t, n, expected_indices",
    [
        (0, 3, ()),  # first step: no history
        (3, 1, (2,)),  # 1AO
        (3, 3, (0, 1, 2)),  # 3AO
        (5, 5, (0, 1, 2, 3, 4)),  # 5AO
        (2, 5, (0, 1)),  # fewer past steps than n
        (4, 0, ()),  # n = 0: no history
    ],
)
def test_nao_window(t, n, expected_indices):
    steps = _episode()
    h = build_nao_history(steps, t, n, policy="max")
    assert h.step_indices == expected_indices
    assert [o.step_index for o in h.observations] == list(expected_indices)
    assert h.actions == tuple(steps[i].action for i in expected_indices)
    assert h.current is steps[t].image  # the current screenshot stays full
    kept = [o for o in h.observations if o.image is not None]
    assert h.images == [o.image for o in kept] + [steps[t].image]
    assert all(isinstance(o, CompressedObs) for o in h.observations)


def test_nao_policies_and_errors():
    steps = _episode()
    h_max = build_nao_history(steps, 5, 5, policy="max")
    h_min = build_nao_history(steps, 5, 5, policy="min", margin=0)
    assert len(h_max.images) == 1 + 3  # three coordinate steps among 0..4 (scroll too), plus current
    assert len(h_min.images) == 1 + 5
    with pytest.raises(ValueError, match="outside"):
        build_nao_history(steps, 6, 1)
    with pytest.raises(ValueError, match="n"):
        build_nao_history(steps, 2, -1)


@pytest.mark.parametrize(
    "size, min_pixels, max_pixels, expected",
    [
        ((1080, 2400), 3136, 1003520, (672, 1484)),  # the library default budget (1280 tokens)
        ((1080, 2400), 3136, 12845056, (1092, 2408)),  # the paper profiles' budget: 3,354 tokens
        ((280, 504), 3136, 141120, (280, 504)),  # the tiny profile: a MiniGUI screen is a model view
        ((1080, 2400), 3136, 141120, (252, 560)),  # a real screen under the tiny budget: 180 tokens
    ],
)
def test_to_model_view_uses_the_given_budget(size, min_pixels, max_pixels, expected):
    view = to_model_view(_img(*size), min_pixels=min_pixels, max_pixels=max_pixels)
    assert view.size == expected


def test_to_model_view_has_no_default_budget():
    small = _img(280, 504)
    assert to_model_view(small, min_pixels=3136, max_pixels=141120) is small  # already a model view
    with pytest.raises(TypeError):
        to_model_view(small)  # type: ignore[call-arg]  # the pixel budget is always the caller's


# ----------------------------------------------------------------------------- tokens vs the processor
@pytest.fixture(scope="module")
def processors():
    from guirl.models import build_tiny_model, load_processor

    path = build_tiny_model()
    return {
        budget: load_processor(path, min_pixels=budget[0], max_pixels=budget[1])
        for budget in ((3136, 141120), (3136, 1003520))
    }


def _processor_tokens(processor, image) -> int:
    grid = processor.image_processor(images=[image], return_tensors="pt")["image_grid_thw"][0]
    return int(grid.prod()) // 4  # 2x2 patches merge into one token


@pytest.mark.parametrize("budget", [(3136, 141120), (3136, 1003520)])
@pytest.mark.parametrize("screen", [(280, 504), (1080, 2400), (720, 1280)])
def test_casc_token_counts_equal_the_processor(processors, budget, screen):
    proc = processors[budget]
    view = to_model_view(_img(*screen), min_pixels=budget[0], max_pixels=budget[1])
    acts = [
        _click(0.5, 0.5),  # one point: the smallest ROI
        _click(0.02, 0.98),  # a corner
        TYPE,  # dropped under MAX
        SCROLL_WITH_POINTS,  # a tall ROI
        SCROLL_NO_POINT,  # kept full
    ]
    steps = [
        StepRecord(image=view, action=a, rollout_actions=(_click(0.3, 0.4), None, _click(0.33, 0.45))) for a in acts
    ]
    for policy in ("max", "min", "none"):
        for o in compress_history(steps, policy):
            ours = obs_tokens(o, min_pixels=budget[0], max_pixels=budget[1])
            if o.image is None:
                assert ours == 0
                continue
            assert ours == _processor_tokens(proc, o.image), (policy, o.kind, o.image.size)
            if o.kind == "crop":  # a grid-aligned crop of the model view: (w/28) x (h/28) tokens
                assert ours == (o.image.width // 28) * (o.image.height // 28)
