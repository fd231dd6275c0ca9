"""guirl.studies.attention_visualization: steps and the images they show, shares, summaries, overlays."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image

from guirl.actions.types import Action
from guirl.data.schema import Episode, Step
from guirl.metrics.paired import check_resolved_claims
from guirl.models import build_tiny_model, load_model, load_processor
from guirl.prompts import PromptSpec
from guirl.studies import attention_visualization as S

W, H = 112, 168  # a 4 x 6 merged-cell screen (28 px cells)
SPEC3 = PromptSpec(output_format="ccpo", n_history=3, history_mode="nAO")


# ----------------------------------------------------------------------------- fixtures
def _episode(tmp_path: Path) -> Episode:
    """Five steps: click, type, click, long press, click; screenshots of distinct colours."""
    actions = [
        (Action("click", point=(0.25, 0.25)), (0.125, 0.125, 0.375, 0.375)),
        (Action("type", text="hello"), None),
        (Action("click", point=(0.75, 0.5)), (0.5, 0.375, 1.0, 0.625)),
        (Action("long_press", point=(0.5, 0.75)), (0.25, 0.5, 0.75, 1.0)),
        (Action("click", point=(0.5, 0.5)), (0.25, 0.25, 0.75, 0.75)),
    ]
    steps = []
    for i, (action, box) in enumerate(actions):
        name = f"s{i}.png"
        Image.new("RGB", (W, H), (40 * i, 20, 200 - 30 * i)).save(tmp_path / name)
        steps.append(Step(step_id=i, screenshot=name, screen_size=(W, H), action=action, target_box=box))
    return Episode(episode_id="e0", instruction="do it", steps=tuple(steps), source="test", split="test")


def _casc_like(records: list):
    """A stand-in CASC hook: a click's screenshot cropped to the left half (ROI (0, 0, 56, 168)
    px of the model view), any other step's screenshot dropped."""

    def build(rollout, t):
        out = []
        for k, entry in enumerate(rollout.history):
            if entry.action is not None and entry.action.type.value in ("click", "long_press"):
                with Image.open(entry.image) as im:
                    crop = im.convert("RGB").crop((0, 0, 56, 168))
                records.append(SimpleNamespace(step=k, roi_px=(0, 0, 56, 168), view_size=(W, H), kind="crop"))
                out.append((entry.text, crop))
            else:
                records.append(SimpleNamespace(step=k, roi_px=None, view_size=(W, H), kind="dropped"))
                out.append((entry.text, None))
        return out

    return build


def _steps(tmp_path: Path, crop: bool, spec: PromptSpec = SPEC3) -> list[S.AttentionStep]:
    records: list = []
    return S.attention_steps(
        [_episode(tmp_path)],
        spec,
        split="test",
        image_root=tmp_path,
        min_pixels=3136,
        max_pixels=W * H,
        roi_builder=_casc_like(records),
        roi_records=records,
        crop_history=crop,
    )


# ----------------------------------------------------------------------------- the steps
def test_full_history_shows_every_history_screenshot_with_its_roi(tmp_path: Path) -> None:
    steps = _steps(tmp_path, crop=False)
    assert [s.t for s in steps] == [0, 1, 2, 3, 4]
    s4 = steps[4]
    assert s4.history_steps == (1, 2, 3)  # 3AO: the last three
    assert [(im.role, im.step) for im in s4.images] == [("history", 1), ("history", 2), ("history", 3), ("current", 4)]
    assert [im.region for im in s4.images[:3]] == [None, (0.0, 0.0, 0.5, 1.0), (0.0, 0.0, 0.5, 1.0)]
    assert s4.images[-1].region == (0.25, 0.25, 0.75, 0.75) and not any(im.cropped for im in s4.images)
    assert len(s4.prompt[1]) == 4 and isinstance(s4.prompt[1][0], str)  # full screenshots, as paths
    assert steps[1].action_type == "type" and steps[0].images == (S.ShownImage("current", 0, steps[0].target_box),)


def test_cropped_history_drops_and_crops_as_the_hook_says(tmp_path: Path) -> None:
    s4 = _steps(tmp_path, crop=True)[4]
    assert s4.history_steps == (1, 2, 3)
    # step 1 (type) was dropped: two crops and the current screenshot
    assert [(im.role, im.step, im.cropped) for im in s4.images] == [
        ("history", 2, True),
        ("history", 3, True),
        ("current", 4, False),
    ]
    assert s4.images[0].region == S.WHOLE  # a crop is its own ROI
    assert [im.size for im in s4.prompt[1][:2]] == [(56, 168), (56, 168)]


def test_steps_reject_a_text_only_user_template(tmp_path: Path) -> None:
    spec = PromptSpec(output_format="agentcpm", n_history=0, history_mode="nA", user_template="agentcpm_user")
    with pytest.raises(ValueError, match="user_template"):
        _steps(tmp_path, crop=False, spec=spec)


# ----------------------------------------------------------------------------- shares
def _step(images: list[S.ShownImage], action_type: str = "click") -> S.AttentionStep:
    return S.AttentionStep("s", "e", len(images) - 1, action_type, images[-1].region, ([], []), (), tuple(images))


HALF = (0.0, 0.0, 0.5, 1.0)
BOX = (0.0, 0.0, 0.5, 0.5)


@pytest.mark.parametrize(
    "images, maps, action_type, want",
    [
        # current only; all of its 0.4 in the top-left quarter (the box): box 1, no history
        (
            [S.ShownImage("current", 0, BOX)],
            [np.array([[0.4, 0.0], [0.0, 0.0]])],
            "click",
            {"image_share": 0.4, "current_share": 1.0, "box_share": 1.0, "box_area": 0.25, "roi_share": math.nan},
        ),
        # a history screenshot with 0.3 left / 0.1 right of its ROI (the left half) and a current
        # screenshot with 0.1 in the box and 0.3 outside
        (
            [S.ShownImage("history", 0, HALF), S.ShownImage("current", 1, BOX)],
            [np.array([[0.3, 0.1]]), np.array([[0.1, 0.0], [0.3, 0.0]])],
            "long_press",
            {"image_share": 0.8, "current_share": 0.5, "box_share": 0.25, "box_area": 0.25, "roi_share": 0.75},
        ),
        # a type step: the box share is undefined even with a box; a history screenshot without
        # an ROI counts outside (0.2 inside of 0.4 history mass)
        (
            [S.ShownImage("history", 0, None), S.ShownImage("history", 1, HALF), S.ShownImage("current", 2, BOX)],
            [np.array([[0.1, 0.1]]), np.array([[0.2, 0.0]]), np.array([[0.2]])],
            "type",
            {"image_share": 0.6, "current_share": 1 / 3, "box_share": math.nan, "box_area": math.nan, "roi_share": 0.5},
        ),
        # a cropped history (its ROI is the whole image) scores 1 by construction
        (
            [S.ShownImage("history", 0, S.WHOLE, True), S.ShownImage("current", 1, BOX)],
            [np.array([[0.05, 0.05]]), np.array([[0.0, 0.2], [0.0, 0.0]])],
            "click",
            {"image_share": 0.3, "current_share": 2 / 3, "box_share": 0.0, "box_area": 0.25, "roi_share": 1.0},
        ),
    ],
)
def test_attention_shares(images, maps, action_type, want) -> None:
    got = S.attention_shares(maps, _step(images, action_type))
    assert set(got) == set(want)
    for k, v in want.items():
        assert (math.isnan(got[k]) and math.isnan(v)) or got[k] == pytest.approx(v), k


def test_attention_shares_needs_one_map_per_image() -> None:
    with pytest.raises(ValueError, match="1 maps for the 2 images"):
        S.attention_shares(
            [np.ones((2, 2))], _step([S.ShownImage("history", 0, None), S.ShownImage("current", 1, BOX)])
        )


@given(
    hist=arrays(np.float64, (3, 2), elements=st.floats(0, 1)),
    cur=arrays(np.float64, (4, 3), elements=st.floats(0, 1)),
    box=st.tuples(st.floats(0, 0.45), st.floats(0, 0.45), st.floats(0.55, 1), st.floats(0.55, 1)),
)
def test_shares_lie_in_the_unit_interval(hist, cur, box) -> None:
    total = hist.sum() + cur.sum()
    if total == 0:
        return
    maps = [hist / total, cur / total]  # attention shares: at most 1 over all images
    got = S.attention_shares(maps, _step([S.ShownImage("history", 0, box), S.ShownImage("current", 1, box)]))
    for k, v in got.items():
        assert math.isnan(v) or -1e-12 <= v <= 1 + 1e-12, (k, v)


# ----------------------------------------------------------------------------- summaries
def _rows(values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model": m, "split": "s", "episode_id": "e", "step": i, **{k: v for k in S.SUMMARY}}
            for m, vs in values.items()
            for i, v in enumerate(vs)
        ]
    )


def test_share_summary_means_lie_in_their_intervals() -> None:
    rows = _rows({"A": [0.1, 0.2, 0.3, 0.4], "B": [0.5, 0.5, math.nan, 0.7]})
    df = S.share_summary(rows, n_boot=200)
    assert len(df) == 2 * len(S.SUMMARY)
    a = df[(df["model"] == "A") & (df["share"] == "box_share")].iloc[0]
    b = df[(df["model"] == "B") & (df["share"] == "box_share")].iloc[0]
    assert a["mean"] == pytest.approx(0.25) and a["n"] == 4
    assert b["mean"] == pytest.approx(1.7 / 3) and b["n"] == 3  # the nan step is left out
    assert (df["lo"] <= df["mean"]).all() and (df["mean"] <= df["hi"]).all()


@pytest.mark.parametrize(
    "a, b, resolved",
    [
        ([0.1, 0.2, 0.1, 0.2, 0.1, 0.2], [0.6, 0.7, 0.6, 0.7, 0.6, 0.7], True),  # B always 0.5 higher
        ([0.1, 0.6, 0.2, 0.5, 0.3, 0.4], [0.6, 0.1, 0.5, 0.2, 0.4, 0.3], False),  # mirrored: no difference
    ],
)
def test_paired_shares_marks_only_intervals_that_exclude_zero(a, b, resolved) -> None:
    df = S.paired_shares(_rows({"A": a, "B": b}), [("A", "B")], n_boot=500)
    assert len(df) == len(S.SHARES)
    check_resolved_claims(df)
    assert (df["resolved"] == resolved).all()
    assert (df["lo"] <= df["diff"]).all() and (df["diff"] <= df["hi"]).all()
    assert df["diff"].iloc[0] == pytest.approx(100 * (np.mean(b) - np.mean(a)))


def test_paired_shares_pairs_on_common_defined_steps_and_names_a_missing_model() -> None:
    df = S.paired_shares(_rows({"A": [0.1, math.nan, 0.3], "B": [0.2, 0.9, 0.4]}), [("A", "B")], n_boot=50)
    assert (df["n_steps"] == 2).all() and df["diff"].iloc[0] == pytest.approx(10.0)
    with pytest.raises(KeyError, match="'C'"):
        S.paired_shares(_rows({"A": [0.1]}), [("A", "C")])


def test_example_step_prefers_the_click_with_most_history_rois(tmp_path: Path) -> None:
    steps = _steps(tmp_path, crop=False)
    # steps 3 and 4 both show two history ROIs (0, 2 and 2, 3), step 2 one: the earlier tie wins
    assert S.example_step(steps).t == 3
    assert S.example_step([s for s in steps if s.action_type == "type"]).t == 1  # no click: any step
    with pytest.raises(ValueError, match="no steps"):
        S.example_step([])


# ----------------------------------------------------------------------------- overlays
def test_overlay_is_aligned_with_the_grid() -> None:
    img = Image.new("RGB", (90, 130), (0, 0, 0))  # any size: resized to the grid
    m = np.zeros((3, 2))
    m[2, 1] = 1.0  # bottom-right cell
    pixels, heat = S.overlay_grid(img, m, cell_px=28)
    assert pixels.shape == (84, 56, 3) and heat.shape == (84, 56)
    assert heat[56:, 28:].min() == 1.0 and heat[:56, :].max() == 0.0 and heat[:, :28].max() == 0.0
    with pytest.raises(ValueError, match="2-D"):
        S.overlay_grid(img, np.zeros(3))


def _fake(step: S.AttentionStep, value: float) -> S.StepAttention:
    maps = []
    for img in step.prompt[1]:
        size = img.size if isinstance(img, Image.Image) else Image.open(img).size
        maps.append(np.full((size[1] // 28, size[0] // 28), value))
    return S.StepAttention(step, maps, "out", S.attention_shares(maps, step))


def test_overlay_figure_has_a_row_per_model_and_empty_panels_for_dropped_screenshots(tmp_path: Path) -> None:
    full, crop = _steps(tmp_path, crop=False)[4], _steps(tmp_path, crop=True)[4]
    fig, data = S.plot_attention_overlays({"SFT": _fake(full, 0.01), "CCPO": _fake(crop, 0.02)})
    assert len(fig.axes) == 2 * 4 and data["columns"] == [1, 2, 3, 4]
    assert [p is None for p in data["models"]["CCPO"]["panels"]] == [True, False, False, False]
    sft = data["models"]["SFT"]["panels"]
    assert [np.asarray(p["map"]).shape for p in sft] == [(6, 4)] * 4  # the screens' merged grids
    assert np.asarray(data["models"]["CCPO"]["panels"][1]["map"]).shape == (6, 2)  # the half-width crop
    with pytest.raises(ValueError, match="same step"):
        S.plot_attention_overlays({"a": _fake(full, 0.01), "b": _fake(_steps(tmp_path, crop=False)[3], 0.01)})


# ----------------------------------------------------------------------------- the tiny model
@pytest.fixture(scope="module")
def tiny(session_cache: Path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    path = build_tiny_model(session_cache / "models", seed=0)
    yield load_processor(path, min_pixels=3136, max_pixels=W * H), load_model(path)
    torch.set_num_threads(threads)


def test_step_attention_on_the_tiny_model(tiny, tmp_path: Path) -> None:
    processor, model = tiny
    steps = _steps(tmp_path, crop=True)
    got = S.attention_over_steps(model, processor, [steps[0], steps[4]], max_new_tokens=4, progress=False)
    assert [[m.shape for m in a.maps] for a in got] == [[(6, 4)], [(6, 2), (6, 2), (6, 4)]]
    for a in got:
        assert 0.0 < sum(float(m.sum()) for m in a.maps) <= 1.0 + 1e-6
        assert all(math.isnan(v) or 0.0 <= v <= 1.0 + 1e-9 for v in a.shares.values())
    row = S.share_row("CCPO", got[1])
    assert row["n_images"] == 3 and row["n_cropped"] == 2 and row["roi_share"] == 1.0  # clipped, not 1 + 2e-16
