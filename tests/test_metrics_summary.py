"""Tests for guirl.metrics.summary: step metrics with bootstrap intervals, online runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from guirl.config import ConfigError, load_config
from guirl.metrics.summary import summarize_online, summarize_steps


# ----------------------------------------------------------------------------- summarize_steps
def rec(tm: bool, gr: bool | None, sr: bool, ok: bool = True, counted: bool = True) -> dict:
    return {"type_match": tm, "grounding": gr, "exact": sr, "parse_ok": ok, "counted": counted}


HAND = [
    rec(True, True, True),  # correct click
    rec(True, None, False),  # right type, wrong text (no coordinate)
    rec(False, False, False, ok=False),  # unparsable on a click step
    rec(True, False, False),  # click in the wrong place
    rec(False, None, False, ok=False),  # unparsable on a text step
]


@pytest.mark.parametrize(
    "records, expected",
    [
        (HAND, {"n": 5, "n_unparsable": 2, "TM": 60.0, "GR": 100 / 3, "SR": 20.0}),  # mixed
        (HAND[:1], {"n": 1, "n_unparsable": 0, "TM": 100.0, "GR": 100.0, "SR": 100.0}),  # one perfect step
        (
            [rec(True, None, True)] * 3,
            {"n": 3, "n_unparsable": 0, "TM": 100.0, "GR": math.nan, "SR": 100.0},
        ),  # no coords
        ([], {"n": 0, "n_unparsable": 0, "TM": math.nan, "GR": math.nan, "SR": math.nan}),  # nothing scored
    ],
)
def test_summarize_steps_rates(records, expected: dict) -> None:
    s = summarize_steps(records, n_boot=200, seed=0)
    assert s["n"] == expected["n"] and s["n_unparsable"] == expected["n_unparsable"]
    for k in ("TM", "GR", "SR"):
        if math.isnan(expected[k]):
            assert math.isnan(s[k]) and math.isnan(s[f"{k}_lo"]) and math.isnan(s[f"{k}_hi"])
        else:
            assert s[k] == pytest.approx(expected[k])
            assert 0.0 <= s[f"{k}_lo"] <= s[k] <= s[f"{k}_hi"] <= 100.0


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_summarize_steps_interval_is_a_real_interval(seed: int) -> None:
    recs = [rec(bool(i % 3), bool(i % 5) if i % 4 else None, bool(i % 2)) for i in range(30)]
    s = summarize_steps(recs, n_boot=500, seed=seed)
    assert s["TM"] == pytest.approx(100 * 20 / 30) and s["TM_lo"] < s["TM"] < s["TM_hi"]  # non-degenerate
    assert s["SR"] == pytest.approx(50.0) and s["SR_lo"] < 50.0 < s["SR_hi"]
    gr = [bool(i % 5) for i in range(30) if i % 4]  # GR over the 22 coordinate steps only
    assert s["GR"] == pytest.approx(100 * sum(gr) / len(gr)) and s["GR_lo"] <= s["GR"] <= s["GR_hi"]
    assert summarize_steps(recs, n_boot=500, seed=seed) == s  # deterministic in the seed


@pytest.mark.parametrize(
    "records, n_counted, sr",
    [
        # a right step and an uncounted wrong one (GUI-R1 leaves press out): SR over 1 step
        ([rec(True, True, True), rec(True, None, False, counted=False)], 1, 100.0),
        # an uncounted step is never exact (StepMatch); it still counts in TM
        ([rec(True, None, False, counted=False), rec(False, False, False)], 1, 0.0),
        # nothing counted: SR undefined, TM still defined
        ([rec(True, None, False, counted=False)], 0, math.nan),
        # records written before the field existed are counted
        ([{k: v for k, v in rec(True, True, True).items() if k != "counted"}, rec(False, False, False)], 2, 50.0),
    ],
)
def test_summarize_steps_sr_over_counted_steps(records, n_counted: int, sr: float) -> None:
    s = summarize_steps(records, n_boot=100, seed=0)
    assert s["n"] == len(records) and s["n_counted"] == n_counted
    assert math.isnan(s["SR"]) if math.isnan(sr) else s["SR"] == pytest.approx(sr)
    assert s["TM"] == pytest.approx(100 * np.mean([r["type_match"] for r in records]))


def test_summarize_steps_agrees_with_aggregate_steps_on_guir1() -> None:
    """The records' SR equals guirl.metrics.aggregate_steps over the same scores under a
    protocol with uncounted steps (GUI-R1: press is out of the denominator)."""
    from guirl.actions import Action
    from guirl.data.schema import Episode, Step
    from guirl.metrics.records import prediction_record

    box = (0.45, 0.45, 0.55, 0.55)  # GUI-R1 measures to the box's top-left corner (0.07 away)
    steps = (
        Step(0, "a.png", (280, 504), Action("click", point=(0.5, 0.5)), target_box=box, candidate_boxes=(box,)),
        Step(1, "b.png", (280, 504), Action("press", key="back")),
        Step(2, "c.png", (280, 504), Action("click", point=(0.2, 0.2)), target_box=(0.1, 0.1, 0.3, 0.3)),
    )
    ep = Episode("e", "goal", steps, source="test", split="test_in_domain")
    outputs = [
        '<action>{"action": "click", "coordinate": [140, 252]}</action>',  # right click
        '<action>{"action": "system_button", "button": "Back"}</action>',  # right press, uncounted
        '<action>{"action": "click", "coordinate": [270, 500]}</action>',  # wrong click
    ]
    recs = [
        prediction_record(
            model="m",
            split="s",
            history="1AO",
            episode=ep,
            t=t,
            output=o,
            output_format="ccpo",
            protocol="guir1",
            min_pixels=3136,
            max_pixels=141120,
        )
        for t, o in enumerate(outputs)
    ]
    assert [r["counted"] for r in recs] == [True, False, True], [r["score_reason"] for r in recs]
    assert [r["exact"] for r in recs] == [True, False, False], [r["score_reason"] for r in recs]
    s = summarize_steps(recs, n_boot=100, seed=0)
    assert s["n_counted"] == 2 and s["SR"] == pytest.approx(50.0)  # 1 of the 2 counted steps


def test_summarize_steps_accepts_every_config_valid_bootstrap_count() -> None:
    """``eval.bootstrap_samples`` is passed as ``n_boot`` (notebook 01_sft); any value the config
    accepts must work (or the config must reject it)."""
    try:
        cfg = load_config("tiny", overrides=["eval.bootstrap_samples=0"])
    except ConfigError:
        return  # the config rejects it: nothing can reach summarize_steps
    s = summarize_steps(HAND, n_boot=cfg.eval.bootstrap_samples, seed=0)
    assert s["TM"] == pytest.approx(60.0) and s["SR"] == pytest.approx(20.0)


# ----------------------------------------------------------------------------- summarize_online
def run(*pairs: tuple[bool, float]) -> list[dict]:
    return [{"success": s, "subgoal_rate": g} for s, g in pairs]


@pytest.mark.parametrize(
    "runs, expected",
    [
        # two seeds: task SR 50 and 0, subgoal SR 75 and 25 (std over seeds, numpy's population std)
        ([run((True, 1.0), (False, 0.5)), run((False, 0.0), (False, 0.5))], (25.0, 25.0, 50.0, 25.0, 2)),
        ([run((True, 1.0), (True, 1.0))], (100.0, 0.0, 100.0, 0.0, 1)),  # one perfect seed
        (
            [run((False, 0.25)), run((False, 0.25)), run((True, 1.0))],
            (100 / 3, float(np.std([0, 0, 100])), 50.0, float(np.std([25, 25, 100])), 3),
        ),
        ([run((True, 1.0)), []], (100.0, 0.0, 100.0, 0.0, 1)),  # an empty run is not a seed
    ],
)
def test_summarize_online(runs, expected) -> None:
    s = summarize_online(runs)
    got = (s["task_sr"], s["task_sr_std"], s["subgoal_sr"], s["subgoal_sr_std"], s["n_runs"])
    assert got == pytest.approx(expected)


@pytest.mark.parametrize("runs", [[], [[]], [[], []]])  # no runs, or only empty ones
def test_summarize_online_empty_is_nan(runs) -> None:
    s = summarize_online(runs)
    assert all(math.isnan(s[k]) for k in ("task_sr", "task_sr_std", "subgoal_sr", "subgoal_sr_std"))
    assert s["n_runs"] == 0
