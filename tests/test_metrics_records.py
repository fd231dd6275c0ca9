"""Tests for guirl.metrics.records: prediction records (parse + score one output) and their JSONL file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from guirl.actions import Action
from guirl.data.schema import Episode, Step
from guirl.metrics.records import PREDICTION_FIELDS, prediction_record, write_predictions
from guirl.prompts import SYSTEM_PROMPTS, PromptSpec, action_text, format_context

MIN_PX, MAX_PX = 3136, 141120  # the tiny profile's pixel budget (configs/profiles/tiny.yaml)
W, H = 280, 504  # MiniGUI screen (tiny profile)


def hand_episode() -> Episode:
    box = (0.1, 0.4, 0.9, 0.6)
    steps = (
        Step(0, "s0.png", (W, H), Action("click", point=(0.5, 0.5)), target_box=box, candidate_boxes=(box,)),
        Step(1, "s1.png", (W, H), Action("type", text="hello world")),
        # a swipe with its finger path (up = content "down"), as MiniGUI's expert and every std file
        # record it: CCPO's AndroidControl evaluator compares the directions of the two paths
        Step(
            2,
            "s2.png",
            (W, H),
            Action("scroll", direction="down", convention="content", point=(0.5, 0.7), point2=(0.5, 0.3)),
        ),
        Step(3, "s3.png", (W, H), Action("press", key="back")),
        Step(4, "s4.png", (W, H), Action("long_press", point=(0.2, 0.8))),
        Step(5, "s5.png", (1080, 2400), Action("terminate", status="success")),
    )
    return Episode("ep-eval", "do things", steps, source="test", split="test_in_domain")


def record(ep: Episode, t: int, output: str, fmt: str = "ccpo", protocol: str = "ccpo") -> dict:
    return prediction_record(
        model="m",
        split="test_in_domain",
        history="1AO",
        episode=ep,
        t=t,
        output=output,
        output_format=fmt,
        protocol=protocol,
        min_pixels=MIN_PX,
        max_pixels=MAX_PX,
    )


def text_of(action: Action, fmt: str = "ccpo", size: tuple[int, int] = (W, H)) -> str:
    return action_text(action, PromptSpec(output_format=fmt), format_context(size, MIN_PX, MAX_PX))


# ----------------------------------------------------------------------------- prediction_record
@pytest.mark.parametrize("fmt", sorted(SYSTEM_PROMPTS))
@pytest.mark.parametrize("t", range(6))  # click, type, scroll (content convention), press, long press, terminate
def test_prediction_record_exact_ground_truth(fmt: str, t: int) -> None:
    ep = hand_episode()
    step = ep.steps[t]
    out = text_of(step.action, fmt, step.screen_size)
    r = record(ep, t, out, fmt=fmt)
    assert set(r) == set(PREDICTION_FIELDS)
    assert r["parse_ok"] and r["type_match"] and r["exact"], r["score_reason"]
    assert r["grounding"] is (
        True if step.action.type.value in ("click", "long_press") else None
    )  # GR: coordinate steps
    assert (r["episode_id"], r["step_id"], r["history"], r["split"], r["model"]) == (
        "ep-eval",
        t,
        "1AO",
        "test_in_domain",
        "m",
    )
    assert (r["image_width"], r["image_height"]) == step.screen_size
    assert r["gt_action"] == step.action.to_dict() and r["gt_type"] == step.action.type.value
    assert r["output"] == out and r["pred_type"] == step.action.type.value
    assert json.loads(json.dumps(r)) == r  # plain JSON values only


@pytest.mark.parametrize(
    "output",
    [
        "",  # empty generation
        ">Weekly>Weekly>Weekly",  # what the random tiny model writes
        "<action>{not json}</action>",  # broken JSON inside the tags
        '<action>{"action": "click", "coordinate": [9999, 9999]}</action>',  # outside the screen
        '<action>{"action": "fly"}</action>',  # unknown action name
    ],
)
@pytest.mark.parametrize("t", [0, 1])  # a coordinate step and a text step
def test_prediction_record_garbage_is_complete_and_wrong(output: str, t: int) -> None:
    ep = hand_episode()
    r = record(ep, t, output)
    assert set(r) == set(PREDICTION_FIELDS)
    assert r["parse_ok"] is False and r["parse_reason"]
    assert r["type_match"] is False and r["exact"] is False
    assert r["grounding"] is (False if t == 0 else None)  # unparsable: wrong on coordinate steps
    assert r["pred_action"] is r["pred_type"] is r["pred_point"] is r["pred_text"] is None
    assert r["gt_point"] == ([0.5, 0.5] if t == 0 else None) and r["gt_box"] == (
        [0.1, 0.4, 0.9, 0.6] if t == 0 else None
    )
    assert r["output"] == output
    json.dumps(r)


@pytest.mark.parametrize(
    "point, protocol, grounding",
    [
        ((0.9, 0.95), "ccpo", False),  # far from the target: 253 px on the 280 x 504 screen
        # inside the target box, 0.30 away: CCPO's AndroidControl script takes 140 *pixels*, 88 px here
        ((0.8, 0.55), "ccpo", True),
        ((0.8, 0.55), "ccpo_androidcontrol_fixed", False),  # the script's stated 14% of the screen
        ((0.8, 0.55), "guiodyssey", True),  # GUI-Odyssey accepts any point inside the gt box
        ((0.8, 0.55), "agentcpm", True),  # AgentCPM-GUI: inside a candidate box containing the gt point
        ((0.55, 0.45), "ccpo", True),  # 0.07 away, 30 px
    ],
)
def test_prediction_record_click_grounding(point, protocol: str, grounding: bool) -> None:
    ep = hand_episode()
    r = record(ep, 0, text_of(Action("click", point=point)), protocol=protocol)
    assert r["parse_ok"] and r["type_match"] is True
    assert r["grounding"] is grounding and r["exact"] is grounding
    assert r["pred_type"] == "click" and np.allclose(r["pred_point"], point, atol=0.005)
    assert r["gt_box"] == [0.1, 0.4, 0.9, 0.6]


def test_prediction_record_wrong_type() -> None:
    r = record(hand_episode(), 0, text_of(Action("press", key="home")))
    assert r["parse_ok"] and (r["type_match"], r["grounding"], r["exact"]) == (False, False, False)
    assert r["pred_type"] == "press" and r["pred_point"] is None


# ----------------------------------------------------------------------------- write_predictions
def test_write_predictions_sorted_and_roundtrips(tmp_path: Path) -> None:
    ep = hand_episode()
    recs = [record(ep, t, text_of(ep.steps[t].action, size=ep.steps[t].screen_size)) for t in range(6)]
    recs.append(record(ep, 1, "garbage ünïcode"))  # non-ASCII output kept as is
    path = write_predictions(recs, tmp_path / "deep" / "pred.jsonl")  # parents created
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(recs)
    assert [json.loads(line) for line in lines] == recs
    assert all(list(json.loads(line)) == sorted(json.loads(line)) for line in lines)
    assert "ünïcode" in lines[-1]
    # the same predictions with keys in another order give the same bytes
    again = write_predictions([dict(reversed(list(r.items()))) for r in recs], tmp_path / "again.jsonl")
    assert again.read_bytes() == path.read_bytes()


# ----------------------------------------------------------------------------- scoring boxes
def _screen_episode() -> Episode:
    """A list row (clickable) holding a text label and a "more" button (clickable); the gt click is
    on the label. The step's candidate boxes are the clickable elements containing the gt point
    (the row only), its elements the whole screen."""
    from guirl.data.schema import UIElement

    row, label, more = (0.0, 0.3, 1.0, 0.5), (0.1, 0.35, 0.5, 0.45), (0.7, 0.35, 0.9, 0.45)
    elements = tuple(
        UIElement(str(i), b, clickable=c) for i, (b, c) in enumerate([(row, True), (label, False), (more, True)])
    )
    step = Step(
        0,
        "s0.png",
        (W, H),
        Action("click", point=(0.3, 0.4)),
        target_box=row,
        candidate_boxes=(row,),
        elements=elements,
    )
    return Episode("ep-screen", "open the first item", (step,), source="test", split="test")


def test_smallest_element_rule_reads_every_element_of_the_screen():
    # Co-EPG App. A: a point is mapped to the smallest visible element containing it; a click on the
    # row's "more" button is another element than the label the gt clicked, though both lie in the row
    from guirl.metrics.records import scoring_boxes

    ep = _screen_episode()
    assert scoring_boxes(ep.steps[0], "coepg") == tuple(e.box for e in ep.steps[0].elements)
    assert scoring_boxes(ep.steps[0], "ces_paper") == ep.steps[0].candidate_boxes  # other rules: the target's boxes
    on_more = record(ep, 0, text_of(Action("click", point=(0.8, 0.4))), protocol="coepg")
    on_label = record(ep, 0, text_of(Action("click", point=(0.2, 0.42))), protocol="coepg")
    assert (on_more["grounding"], on_label["grounding"]) == (False, True)
    # the check can fail: with the candidate boxes alone both clicks map to the row
    from guirl.metrics import score_step

    s = score_step(
        Action("click", point=(0.8, 0.4)), ep.steps[0].action, "coepg", candidate_boxes=ep.steps[0].candidate_boxes
    )
    assert s.grounding is True
