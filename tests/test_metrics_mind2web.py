"""Mind2Web Ele.Acc / Op.F1 / Step SR (macro over tasks) and Co-EPG data purity/diversity."""

from __future__ import annotations

import math

import pytest

from guirl.actions.types import Action, ParseResult
from guirl.methods.coepg.data_quality import DataSample, action_entropy_bits, diversity, purity
from guirl.metrics.mind2web import (
    Mind2WebStep,
    mind2web_metrics,
    op_f1,
    operation_string,
    score_m2w_step,
    score_m2w_visual_step,
)


@pytest.mark.parametrize(
    "op, value, expected",
    [
        ("click", "ignored", "CLICK"),  # CLICK drops the value
        ("HOVER", None, "CLICK"),  # hover counts as click
        ("type", "New York", "TYPE New York"),
        ("Select", "Economy", "SELECT Economy"),
    ],
)
def test_operation_string(op, value, expected):
    assert operation_string(op, value) == expected


def test_operation_string_rejects_unknown():
    with pytest.raises(ValueError, match="unknown Mind2Web operation"):
        operation_string("DRAG")


@pytest.mark.parametrize(
    "pred, gt, f1",
    [
        (("CLICK", ""), ("CLICK", ""), 1.0),  # same op
        (("TYPE", "new york"), ("TYPE", "New York"), 1.0),  # case-insensitive
        (("TYPE", "york"), ("TYPE", "new york"), 0.8),  # P=1, R=2/3
        (("CLICK", ""), ("TYPE", "paris"), 0.0),  # different op, no shared token
    ],
)
def test_op_f1(pred, gt, f1):
    assert op_f1(pred[0], pred[1], gt[0], gt[1]) == pytest.approx(f1)


def test_step_success_needs_element_and_full_op():
    gt = frozenset({"e1"})
    assert score_m2w_step(Mind2WebStep("t", "e1", gt, "TYPE", "new york", "TYPE", "New York")).step_success
    # right element, partial value: F1 < 1 -> not a success
    s = score_m2w_step(Mind2WebStep("t", "e1", gt, "TYPE", "york", "TYPE", "new york"))
    assert s.element_correct and not s.step_success
    # wrong element, right op: op F1 still counted
    s = score_m2w_step(Mind2WebStep("t", "e2", gt, "CLICK", None, "CLICK"))
    assert not s.element_correct and s.op_f1 == 1.0 and not s.step_success
    # no prediction at all
    s = score_m2w_step(Mind2WebStep("t", None, gt, None, None, "CLICK"))
    assert (s.element_correct, s.op_f1) == (False, 0.0)


def test_macro_vs_micro():
    g = frozenset({"e"})
    steps = [Mind2WebStep("a", "e", g, "CLICK", None, "CLICK")] + [
        Mind2WebStep("b", "x", g, "CLICK", None, "CLICK") for _ in range(3)
    ]
    scores = [score_m2w_step(s) for s in steps]
    macro = mind2web_metrics(scores)
    micro = mind2web_metrics(scores, macro=False)
    assert macro["ele_acc"] == pytest.approx(0.5)  # task a 1.0, task b 0.0
    assert micro["ele_acc"] == pytest.approx(0.25)  # 1 of 4 steps
    assert macro["task_sr"] == pytest.approx(0.5)
    assert (macro["n_tasks"], macro["n_steps"]) == (2, 4)
    assert math.isnan(mind2web_metrics([])["step_sr"])


def test_visual_step():
    box = (0.4, 0.4, 0.6, 0.6)
    gt = Action("type", point=(0.5, 0.5), text="paris")
    ok = score_m2w_visual_step("t", Action("type", point=(0.45, 0.55), text="Paris"), gt, box)
    assert ok.step_success
    miss = score_m2w_visual_step("t", Action("type", point=(0.7, 0.5), text="paris"), gt, box)
    assert not miss.element_correct and miss.op_f1 == 1.0
    bad = score_m2w_visual_step("t", ParseResult.fail("garbage"), gt, box)
    assert (bad.element_correct, bad.op_f1, bad.step_success) == (False, 0.0, False)
    # a press has no web operation: op F1 0, no exception
    assert score_m2w_visual_step("t", Action("press", key="back"), gt, box).op_f1 == 0.0


# ---------------------------------------------------------------- Co-EPG data quality
def test_purity():
    assert purity([True, False, True, True]) == pytest.approx(0.75)
    assert purity([DataSample("t", "click", "e", True), DataSample("t", "type", "e", False)]) == pytest.approx(0.5)
    assert math.isnan(purity([]))


@pytest.mark.parametrize(
    "types, bits",
    [
        (["click"] * 4, 0.0),  # one type: no uncertainty
        (["click", "type"], 1.0),  # two equally likely types: 1 bit
        (["click", "type", "scroll", "press"], 2.0),  # four uniform: 2 bits
        ([], 0.0),  # empty set
    ],
)
def test_action_entropy(types, bits):
    assert action_entropy_bits(types) == pytest.approx(bits)


def test_diversity_counts_distinct_triples():
    s = [
        DataSample("open {app}", "click", "icon", True),
        DataSample("open {app}", "click", "icon", False),  # duplicate triple
        DataSample("open {app}", "type", "search", True),
    ]
    d = diversity(s)
    assert (d["n"], d["n_distinct"]) == (3, 2)
    assert d["distinct_ratio"] == pytest.approx(2 / 3)
    assert d["action_entropy_bits"] == pytest.approx(-(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3))
    assert math.isnan(diversity([])["distinct_ratio"])


# ----------------------------------------------------------------------------- protocol steps
def _golden_m2w_rows():
    import json
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "golden" / "mind2web.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_protocol_step_reproduces_seeclick_element_and_op_f1():
    # on every golden row SeeClick scored whole (not skipped, the answer read), the element and the
    # Op.F1 value equal the original's Ele_match and Op_F1
    from guirl.actions.formats import FormatContext
    from guirl.data.loaders import mind2web
    from guirl.metrics import PROTOCOLS
    from guirl.metrics.mind2web import score_m2w_protocol_step

    p = PROTOCOLS["mind2web"]
    n = 0
    for r in _golden_m2w_rows():
        if r["verdict"]["skipped"]:
            continue
        step = mind2web.step_from_seeclick(r["gt"]["step"], image_size=tuple(r["gt"]["image_size"]), off_screen="keep")
        pred = p.parse(r["raw_output"], FormatContext(*step.screen_size))
        if not pred.ok:
            continue
        s = score_m2w_protocol_step("t", pred, step.action, step.target_box)
        assert s.element_correct == r["verdict"]["element"], r["case"]
        assert s.op_f1 == pytest.approx(r["original"]["Op_F1"][0], abs=1e-12), r["case"]
        assert s.step_success == r["verdict"]["exact"], r["case"]
        n += 1
    assert n > 200


def test_protocol_step_needs_a_mind2web_protocol():
    from guirl.metrics.mind2web import score_m2w_protocol_step

    with pytest.raises(ValueError, match="operation codes"):
        score_m2w_protocol_step(
            "t", Action("click", point=(0.5, 0.5)), Action("click", point=(0.5, 0.5)), (0, 0, 1, 1), "ccpo"
        )
