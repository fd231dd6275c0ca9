"""Table-driven tests of guirl.metrics.step.score_step under every named protocol.

The rules themselves are tested in tests/test_matching.py; that every protocol scores exactly as
before the matching engine, in tests/test_matching_equivalence.py."""

from __future__ import annotations

import math

import pytest

from guirl.actions.types import Action, ParseResult
from guirl.matching import RULES, ClickRule, RuleSet, click_match
from guirl.metrics import PROTOCOLS, Protocol, aggregate_steps, breakdown_by_type, get_protocol, score_step
from guirl.metrics.step import StepScore


def click(x, y):
    return Action("click", point=(x, y))


def lp(x, y):
    return Action("long_press", point=(x, y))


def scroll(d, conv):
    return Action("scroll", direction=d, convention=conv)


def typ(t):
    return Action("type", text=t)


def term(s):
    return Action("terminate", status=s)


GT_C = click(0.5, 0.5)
BOX = (0.45, 0.45, 0.55, 0.55)  # 0.1 x 0.1 box around the gt point
FAR_BOX = (0.80, 0.80, 0.90, 0.90)  # a box far from the gt point

AITW_BOX = (0.4, 0.45, 0.6, 0.55)  # 0.2 x 0.1 around the gt point
PHONE = {"screen_size": (1080, 2400)}  # the pixel rules (CCPO, CoAT) need the screen


def boxed(x1, y1, x2, y2):
    """A click that predicts an element box (CoAT's bbox), at the box's centre."""
    return Action("click", point=((x1 + x2) / 2, (y1 + y2) / 2), extra={"box": (x1, y1, x2, y2)})


def swipe(p, q, d, conv="finger"):
    return Action("scroll", point=p, point2=q, direction=d, convention=conv)


# (id, protocol, pred, gt, kwargs, (type_match, grounding, exact)); the golden files
# (tests/test_golden.py) check every protocol against its original code; these cases show each
# rule on one step.
CASES = [
    # --- distance thresholds, just inside / just outside -------------------------------
    ("agentcpm_dist_in", "agentcpm", click(0.639, 0.5), GT_C, {}, (True, True, True)),  # 0.139 <= 0.14
    ("agentcpm_dist_out", "agentcpm", click(0.641, 0.5), GT_C, {}, (True, False, False)),  # 0.141 > 0.14
    ("guir1_dist_in", "guir1", click(0.5, 0.639), GT_C, {}, (True, True, True)),  # strict < 0.14
    ("guir1_dist_out", "guir1", click(0.5, 0.641), GT_C, {}, (True, False, False)),
    # GUI-R1 measures to gt_bbox[0:2]: for a 4-number box, its top-left corner (0.07 away here)
    ("guir1_box_corner", "guir1", click(0.85, 0.85), GT_C, {"gt_box": FAR_BOX}, (True, True, True)),
    # CCPO AndroidControl: 140 *pixels* of the original screen (679 -> 139 px, 681 -> 141 px)
    ("ccpo_dist_in", "ccpo", click(0.629, 0.5), GT_C, PHONE, (True, True, True)),
    ("ccpo_dist_out", "ccpo", click(0.631, 0.5), GT_C, PHONE, (True, False, False)),
    # ... the script's comment says 14% of the screen: the corrected variant (0.13 -> in)
    ("ccpo_fixed_dist", "ccpo_androidcontrol_fixed", click(0.63, 0.5), GT_C, PHONE, (True, True, True)),
    # CCPO GUI-Odyssey: 140 on the [0, 1000] grid (0.14 of the screen)
    ("ccpo_guio_dist_in", "ccpo_guiodyssey", click(0.64, 0.5), GT_C, {}, (True, True, True)),
    ("ccpo_guio_dist_out", "ccpo_guiodyssey", click(0.641, 0.5), GT_C, {}, (True, False, False)),
    ("uis1_dist_in", "uis1", click(0.539, 0.5), GT_C, {}, (True, True, True)),  # 0.039 <= 0.04
    ("uis1_dist_out", "uis1", click(0.541, 0.5), GT_C, {}, (True, False, False)),  # 0.041 > 0.04
    # --- box rules ----------------------------------------------------------------------
    # UI-S1 as published: fix_line drops the candidate boxes, so a click inside one far from the
    # gt point is wrong ...
    ("uis1_boxes_dropped", "uis1", click(0.559, 0.5), GT_C, {"candidate_boxes": [BOX]}, (True, False, False)),
    # ... and right with the file's boxes (1.2x enlarged: the 0.1-wide box reaches 0.56)
    ("uis1_enlarged_in", "uis1_candidates", click(0.559, 0.5), GT_C, {"candidate_boxes": [BOX]}, (True, True, True)),
    ("uis1_enlarged_out", "uis1_candidates", click(0.561, 0.5), GT_C, {"candidate_boxes": [BOX]}, (True, False, False)),
    # GUI-Odyssey: inside the (unenlarged) gt box though 0.3 away from gt point
    ("odyssey_in_far_box", "guiodyssey", click(0.85, 0.85), click(0.81, 0.81), {"gt_box": FAR_BOX}, (True, True, True)),
    ("odyssey_no_box_far", "guiodyssey", click(0.2, 0.2), GT_C, {"gt_box": BOX}, (True, False, False)),
    # GUI-Odyssey unpacks the sam2 box: a click step without one is "invalid", even at the point
    ("odyssey_needs_a_box", "guiodyssey", click(0.5, 0.5), GT_C, {}, (True, False, False)),
    ("ces_in_box", "ces", click(0.89, 0.89), click(0.81, 0.81), {"gt_box": FAR_BOX}, (True, True, True)),
    # CES as released falls back to 0.14; the paper's GR is the box only
    ("ces_dist_fallback", "ces", click(0.6, 0.5), GT_C, {"gt_box": BOX}, (True, True, True)),
    ("ces_paper_box_only", "ces_paper", click(0.6, 0.5), GT_C, {"gt_box": BOX}, (True, False, False)),
    # ... and the acted element's box only: another candidate box on the screen does not count
    (
        "ces_paper_other_candidate",
        "ces_paper",
        click(0.85, 0.85),
        GT_C,
        {"gt_box": BOX, "candidate_boxes": [BOX, FAR_BOX]},
        (True, False, False),
    ),
    (
        "ces_paper_gt_among_candidates",
        "ces_paper",
        click(0.52, 0.5),
        GT_C,
        {"gt_box": BOX, "candidate_boxes": [BOX, FAR_BOX]},
        (True, True, True),
    ),
    # the released CES code accepts a click in any listed box
    (
        "ces_any_candidate",
        "ces",
        click(0.85, 0.85),
        GT_C,
        {"gt_box": BOX, "candidate_boxes": [FAR_BOX]},
        (True, True, True),
    ),
    # AgentCPM: a candidate box that does not contain the gt point does not help
    (
        "agentcpm_box_not_containing_gt",
        "agentcpm",
        click(0.85, 0.85),
        GT_C,
        {"candidate_boxes": [FAR_BOX]},
        (True, False, False),
    ),
    # AgentCPM: a big box containing gt point accepts a far click inside it
    (
        "agentcpm_box_containing_gt",
        "agentcpm",
        click(0.9, 0.5),
        GT_C,
        {"candidate_boxes": [(0.1, 0.4, 0.9, 0.6)]},
        (True, True, True),
    ),
    # AgentCPM enlarges a box at the top edge by shifting it, not clipping: (0, 0, 0.2, 0.1) grows to
    # y in [0, 0.12] (a centred 1.2x box would stop at 0.11)
    (
        "agentcpm_shifted_box",
        "agentcpm",
        click(0.1, 0.115),
        click(0.1, 0.05),
        {"candidate_boxes": [(0.0, 0.0, 0.2, 0.1)]},
        (True, True, True),
    ),
    # AgentCPM AndroidControl: FAR_BOX is among the 5 nearest boxes (only 1 candidate) -> hit
    (
        "agentcpm_ac_nearest_k_hit",
        "agentcpm_androidcontrol",
        click(0.85, 0.85),
        GT_C,
        {"candidate_boxes": [FAR_BOX]},
        (True, True, True),
    ),
    # ... but not when 5 nearer boxes push it out of the top 5
    (
        "agentcpm_ac_nearest_k_pushed_out",
        "agentcpm_androidcontrol",
        click(0.85, 0.85),
        GT_C,
        {"candidate_boxes": [FAR_BOX] + [(0.5 + i * 0.01, 0.5, 0.51 + i * 0.01, 0.51) for i in range(5)]},
        (True, False, False),
    ),
    # AgentCPM AndroidControl falls back to 0.04, not 0.14
    ("agentcpm_ac_dist_out", "agentcpm_androidcontrol", click(0.6, 0.5), GT_C, {}, (True, False, False)),
    # AITZ (CoAT as released): a click is scored against the point (0, 0), so a predicted box on
    # the target is wrong and a box at the top-left corner right; the fix uses the annotated point
    ("aitz_box_on_target", "aitz", boxed(0.45, 0.45, 0.55, 0.55), GT_C, PHONE, (True, False, False)),
    ("aitz_box_at_origin", "aitz", boxed(0.0, 0.0, 0.1, 0.1), GT_C, PHONE, (True, True, True)),
    ("aitz_fixed_box_on_target", "aitz_fixed", boxed(0.45, 0.45, 0.55, 0.55), GT_C, PHONE, (True, True, True)),
    ("aitz_needs_a_box", "aitz_fixed", click(0.5, 0.5), GT_C, PHONE, (True, False, False)),  # a bare point
    # CCPO AITW: both taps in one annotation box grown by 1.4 x its size (2.4x: x in [0.26, 0.74]) ...
    ("ccpo_aitw_same_box", "ccpo_aitw", click(0.7, 0.5), GT_C, {"candidate_boxes": [AITW_BOX]}, (True, True, True)),
    # ... 1.4x in the corrected variant (x in [0.36, 0.64]; 0.7 is 0.2 from the gt point)
    (
        "ccpo_aitw_fixed_box",
        "ccpo_aitw_fixed",
        click(0.7, 0.5),
        GT_C,
        {"candidate_boxes": [AITW_BOX]},
        (True, False, False),
    ),
    # ... and the AITW evaluator fails a step whose screen has no annotation boxes
    ("ccpo_aitw_no_boxes", "ccpo_aitw", click(0.5, 0.5), GT_C, {}, (False, False, False)),
    # Mind2Web: only the element box counts, no distance fallback
    ("m2w_in_box", "mind2web", click(0.54, 0.54), GT_C, {"gt_box": BOX}, (True, True, True)),
    ("m2w_near_outside_box", "mind2web", click(0.56, 0.5), GT_C, {"gt_box": BOX}, (True, False, False)),
    # SeeClick rounds the box to 3 decimals: a point inside the true box, outside the rounded one,
    # is wrong, and the other way round right
    (
        "m2w_rounded_out",
        "mind2web",
        click(0.4498, 0.5),
        GT_C,
        {"gt_box": (0.4496, 0.45, 0.55, 0.55)},
        (True, False, False),
    ),
    (
        "m2w_rounded_in",
        "mind2web",
        click(0.4502, 0.5),
        GT_C,
        {"gt_box": (0.4504, 0.45, 0.55, 0.55)},
        (True, True, True),
    ),
    # Mind2Web TYPE: the element is checked too
    (
        "m2w_type_wrong_element",
        "mind2web",
        Action("type", point=(0.9, 0.9), text="New York"),
        Action("type", point=(0.5, 0.5), text="New York"),
        {"gt_box": BOX},
        (True, False, False),
    ),
    # Co-EPG: the smallest element containing each point must be the same one
    (
        "coepg_same_element",
        "coepg",
        click(0.46, 0.46),
        GT_C,
        {"candidate_boxes": [(0, 0, 1, 1), BOX]},
        (True, True, True),
    ),
    (
        "coepg_other_element",
        "coepg",
        click(0.6, 0.5),
        GT_C,
        {"candidate_boxes": [(0, 0, 1, 1), BOX]},
        (True, False, False),
    ),
    # ... whereas the distance variant accepts 0.1 away
    ("coepg_distance_variant", "coepg_distance", click(0.6, 0.5), GT_C, {"gt_box": BOX}, (True, True, True)),
    # --- long press --------------------------------------------------------------------
    # AgentCPM: long_point is its own type; grounding still counts the point
    ("agentcpm_long_press_vs_click", "agentcpm", lp(0.5, 0.5), GT_C, {}, (False, True, False)),
    ("uis1_long_press_match", "uis1", lp(0.5, 0.5), lp(0.51, 0.5), {}, (True, True, True)),
    # GUI-R1 does not require the type: a long press at the right place is a right click step
    ("guir1_type_not_required", "guir1", lp(0.5, 0.5), GT_C, {}, (False, True, True)),
    # --- scroll conventions ------------------------------------------------------------
    # finger up == content down: same gesture, matched after conversion (AgentCPM compares finger)
    (
        "agentcpm_scroll_reversed_conv",
        "agentcpm",
        scroll("up", "finger"),
        scroll("down", "content"),
        {},
        (True, None, True),
    ),
    ("agentcpm_scroll_wrong", "agentcpm", scroll("down", "finger"), scroll("down", "content"), {}, (True, None, False)),
    ("aitz_scroll_reversed_conv", "aitz", scroll("left", "finger"), scroll("right", "content"), {}, (True, None, True)),
    # GUI-R1 compares the scroll's input text (the direction word) with its text F1
    (
        "guir1_scroll_text",
        "guir1",
        Action("scroll", direction="down", convention="content", text="down"),
        Action("scroll", direction="down", convention="content", text="down"),
        {},
        (True, None, True),
    ),
    # UI-S1 evaluation does not check the direction
    ("uis1_scroll_any_direction", "uis1", scroll("down", "finger"), scroll("down", "content"), {}, (True, None, True)),
    # CCPO AndroidControl: the finger directions of both coordinate pairs, in pixels
    (
        "ccpo_swipe_points",
        "ccpo",
        swipe((0.5, 0.7), (0.5, 0.3), "up"),
        swipe((0.5, 0.75), (0.5, 0.25), "up"),
        PHONE,
        (True, None, True),
    ),
    # ... a swipe without its end point is wrong whatever its stated direction
    (
        "ccpo_swipe_needs_points",
        "ccpo",
        scroll("up", "finger"),
        swipe((0.5, 0.75), (0.5, 0.25), "up"),
        PHONE,
        (True, None, False),
    ),
    # CCPO AITW: scrolls match on the axis only (up matches down)
    (
        "ccpo_aitw_axis",
        "ccpo_aitw",
        scroll("up", "content"),
        scroll("down", "content"),
        {"candidate_boxes": [BOX]},
        (True, None, True),
    ),
    # CES as released reads no direction (scroll()); the paper compares it
    ("ces_scroll_any", "ces", scroll("up", "content"), scroll("down", "content"), {}, (True, None, True)),
    ("ces_paper_scroll", "ces_paper", scroll("up", "content"), scroll("down", "content"), {}, (True, None, False)),
    # --- text rules --------------------------------------------------------------------
    ("agentcpm_contains", "agentcpm", typ("Coffee"), typ("coffee shop"), {}, (True, None, True)),
    ("agentcpm_not_contains", "agentcpm", typ("coffee shops"), typ("coffee shop near me"), {}, (True, None, False)),
    # Python's "in": an empty text is contained in every text (AgentCPM-GUI, UI-S1)
    ("agentcpm_empty_text", "agentcpm", typ(""), typ("coffee shop"), {}, (True, None, True)),
    ("odyssey_anls_ok", "guiodyssey", typ("helo world"), typ("hello world"), {}, (True, None, True)),  # 0.91
    ("odyssey_anls_low", "guiodyssey", typ("abc"), typ("xyz"), {}, (True, None, False)),
    ("odyssey_case_kept", "guiodyssey", typ("HELLO WORLD"), typ("hello world"), {}, (True, None, False)),
    ("odyssey_cut_at_colon", "guiodyssey", typ("10"), typ("10:30"), {}, (True, None, True)),  # "TYPE: 10:30" types 10
    (
        "guir1_f1_half",
        "guir1",
        typ("coffee shops"),
        typ("coffee shop near me"),
        {},
        (True, None, False),
    ),  # F1 1/3 < 0.5
    ("guir1_one_token_contains", "guir1", typ("pizz"), typ("pizza"), {}, (True, None, True)),
    ("ces_f1_ok", "ces", typ("cheap coffee shop"), typ("coffee shop near me"), {}, (True, None, True)),  # F1 4/7
    ("ces_f1_half_strict", "ces", typ("hello there"), typ("hello world"), {}, (True, None, False)),  # F1 0.5
    ("aitz_ratio_ok", "aitz", typ("hello wrld"), typ("hello world"), {}, (True, None, True)),  # ratio 0.95 > 0.8
    ("aitz_ratio_low", "aitz", typ("hello"), typ("goodbye"), {}, (True, None, False)),
    # CCPO AITW: a type step is right on the type alone
    ("ccpo_aitw_type_only", "ccpo_aitw", typ("x"), typ("hello"), {"candidate_boxes": [BOX]}, (True, None, True)),
    # --- terminate / wait --------------------------------------------------------------
    ("agentcpm_term_status_ignored", "agentcpm", term("fail"), term("success"), {}, (True, None, True)),
    ("agentcpm_wait_is_stop", "agentcpm", Action("wait"), term("success"), {}, (True, None, True)),
    ("ces_term_status_checked", "ces", term("fail"), term("success"), {}, (True, None, False)),
    # Co-EPG Table 10: "terminate" covers done and impossible, so its status is not compared (COEPG-27)
    ("coepg_term_status_ignored", "coepg", term("fail"), term("success"), {}, (True, None, True)),
    ("ces_term_status_ok", "ces", term("success"), term("success"), {}, (True, None, True)),
    ("ces_wait_not_stop", "ces", Action("wait"), term("success"), {}, (False, None, False)),
    ("uis1_wait", "uis1", Action("wait"), Action("wait"), {}, (True, None, True)),
    # UI-S1 cannot score a terminate ground truth (NotImplementedError): always wrong
    ("uis1_terminate_unscored", "uis1", term("success"), term("success"), {}, (False, None, False)),
    # CCPO compares a wait as a whole dict: the time must match
    (
        "ccpo_wait_time",
        "ccpo",
        Action("wait", duration_ms=1000),
        Action("wait", duration_ms=2000),
        {},
        (True, None, False),
    ),
    # --- press / open_app --------------------------------------------------------------
    ("press_ok", "agentcpm", Action("press", key="back"), Action("press", key="back"), {}, (True, None, True)),
    ("press_wrong_key", "agentcpm", Action("press", key="home"), Action("press", key="back"), {}, (True, None, False)),
    # UI-S1: clicking the app icon solves an open_app step, with the file's boxes ...
    (
        "uis1_open_by_click",
        "uis1_candidates",
        click(0.5, 0.5),
        Action("open_app", text="Maps"),
        {"candidate_boxes": [BOX]},
        (True, None, True),
    ),
    (
        "uis1_open_click_miss",
        "uis1_candidates",
        click(0.9, 0.1),
        Action("open_app", text="Maps"),
        {"candidate_boxes": [BOX]},
        (True, None, False),
    ),
    # ... never as published (the boxes are dropped)
    (
        "uis1_open_click_as_run",
        "uis1",
        click(0.5, 0.5),
        Action("open_app", text="Maps"),
        {"candidate_boxes": [BOX]},
        (False, None, False),
    ),
    (
        "agentcpm_open_by_click",
        "agentcpm",
        click(0.5, 0.5),
        Action("open_app", text="Maps"),
        {"candidate_boxes": [BOX]},
        (False, None, False),
    ),
    # --- type mismatches ---------------------------------------------------------------
    ("type_mismatch_click_vs_type", "ces", click(0.5, 0.5), typ("a"), {}, (False, None, False)),
    ("type_mismatch_type_vs_click", "ces", typ("a"), GT_C, {}, (False, False, False)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_score_step_table(case):
    _, proto, pred, gt, kw, (tm, gr, ex) = case
    s = score_step(pred, gt, proto, **kw)
    assert (s.type_match, s.grounding, s.exact) == (tm, gr, ex), s.reason
    assert s.gt_type == gt.type.value
    assert not s.unparsable


@pytest.mark.parametrize(
    "pred, expect_reason",
    [
        (None, "unparsable: no prediction"),  # model gave no output
        (ParseResult.fail("no JSON object found", raw="blah"), "unparsable: no JSON object found"),  # parser failed
    ],
)
@pytest.mark.parametrize("proto", sorted(PROTOCOLS))
def test_unparsable_is_wrong_everywhere(pred, expect_reason, proto):
    # click gt: grounding is False (not None); type gt: None unless the protocol checks the
    # element of a type step (Mind2Web)
    s = score_step(pred, GT_C, proto)
    assert (s.type_match, s.grounding, s.exact, s.unparsable) == (False, False, False, True)
    assert s.reason == expect_reason
    s2 = score_step(pred, typ("x"), proto)
    grounded = "type" in (get_protocol(proto).rules.args.grounded_types or ())
    assert (s2.type_match, s2.grounding, s2.exact) == (False, False if grounded else None, False)


def test_uncounted_steps_are_left_out_of_sr():
    # GUI-R1 counts no press / wait / complete step; an unparsable output there is not counted either
    s = score_step(Action("press", key="back"), Action("press", key="back"), "guir1")
    assert (s.type_match, s.exact, s.counted) == (True, False, False)
    u = score_step(None, Action("wait"), "guir1")
    assert (u.exact, u.counted) == (False, False)
    r = score_step(click(0.5, 0.5), GT_C, "guir1")
    agg = aggregate_steps([s, u, r])
    assert (agg["n"], agg["n_counted"], agg["SR"], agg["TM"]) == (3, 1, 1.0, pytest.approx(2 / 3))
    # SeeClick skips a step whose value holds a double quote (its reference does not parse)
    q = score_step(typ("x"), Action("type", point=(0.5, 0.5), text='say "hi"'), "mind2web", gt_box=BOX)
    assert not q.counted and not q.exact


def test_parse_result_ok_is_unwrapped():
    # a successful ParseResult scores like its action
    s = score_step(ParseResult(action=click(0.5, 0.5)), GT_C, "agentcpm")
    assert s.exact and not s.unparsable


def test_pixel_distance_uses_screen_size():
    # 0.1 of width 1000 = 100 px; 0.0 in y
    s = score_step(click(0.6, 0.5), GT_C, "agentcpm", screen_size=(1000, 2000))
    assert s.pixel_distance == pytest.approx(100.0)
    assert s.distance == pytest.approx(0.1)


def test_gt_point_from_box_when_gt_has_no_point():
    # select action always has a point; grounding of a select under mind2web uses the box
    gt = Action("select", point=(0.5, 0.5), text="Economy")
    assert score_step(Action("select", point=(0.46, 0.46), text="economy"), gt, "mind2web", gt_box=BOX).exact
    assert not score_step(Action("select", point=(0.46, 0.46), text="business"), gt, "mind2web", gt_box=BOX).exact


def test_aggregate_steps_counts():
    scores = [
        StepScore(True, True, True, "", "click"),
        StepScore(True, False, False, "", "click"),
        StepScore(False, None, False, "unparsable: x", "type", unparsable=True),
        StepScore(True, None, True, "", "scroll"),
    ]
    agg = aggregate_steps(scores)
    assert agg["TM"] == pytest.approx(0.75)
    assert agg["GR"] == pytest.approx(0.5)  # only the two click steps count
    assert agg["SR"] == pytest.approx(0.5)
    assert (agg["n"], agg["n_counted"], agg["n_grounding"], agg["n_unparsable"]) == (4, 4, 2, 1)
    rows = breakdown_by_type(scores)
    assert [r["type"] for r in rows] == ["click", "scroll", "type", "total"]
    assert rows[0]["SR"] == pytest.approx(0.5) and math.isnan(rows[1]["GR"])
    assert rows[-1] == {"type": "total", **agg}


def test_aggregate_empty_is_nan():
    agg = aggregate_steps([])
    assert math.isnan(agg["TM"]) and math.isnan(agg["SR"]) and agg["n"] == 0


def test_registry_has_required_protocols():
    for name in [
        "agentcpm",
        "agentcpm_androidcontrol",
        "guiodyssey",
        "uis1",
        "guir1",
        "aitz",
        "mind2web",
        "ces",
        "ccpo_androidcontrol",
        "ccpo_guiodyssey",
        "ccpo_mind2web",
        "ccpo_aitw",
        "coepg",
        "coepg_mind2web",
    ]:
        p = get_protocol(name)
        assert p.name == name and p.source and p.variant_of is None and p.golden
        assert p.rules is RULES[name]  # a protocol is a name + a rule set of the engine + provenance
    # plain "ccpo" is CCPO's AndroidControl evaluator (docs/metrics.md says why)
    assert get_protocol("ccpo").rules is RULES["ccpo_androidcontrol"]
    # every variant names the as-run protocol it changes and says what it changes
    for p in PROTOCOLS.values():
        if p.variant_of is not None:
            assert p.variant_of in PROTOCOLS and PROTOCOLS[p.variant_of].variant_of is None and p.changes, p.name
    assert {"uis1_candidates", "aitz_fixed", "ces_paper", "ccpo_aitw_fixed", "coepg_distance"} <= set(PROTOCOLS)
    assert get_protocol("agentcpm_androidcontrol").rules.click.nearest_k == 5
    with pytest.raises(KeyError, match="unknown protocol"):
        get_protocol("nope")


def test_protocol_with_unknown_rule_set_names_it():
    with pytest.raises(ValueError, match="Protocol 'bad'.*unknown matching rule set 'nope'"):
        Protocol(name="bad", rules="nope")


def test_custom_protocol_object_accepted():
    p = Protocol(name="tight", rules=RuleSet("tight", ClickRule(distance_threshold=0.01)))
    assert not score_step(click(0.52, 0.5), GT_C, p).exact
    assert click_match((0.505, 0.5), (0.5, 0.5), p.rules.click)


def test_rule_set_scores_like_a_protocol():
    # a bare rule set (here a reward's) can be scored with the metrics: CCPO's released reward
    # code accepts "milk" for "buy milk and eggs" (containment), the paper's reward (eq. 13,
    # exact) and the ccpo protocol (set F1 0.4) do not
    gt, pred = typ("buy milk and eggs"), typ("milk")
    assert score_step(pred, gt, RULES["ccpo_reward_code"]).exact
    assert not score_step(pred, gt, RULES["ccpo_reward"]).exact
    assert not score_step(pred, gt, "ccpo").exact
    assert get_protocol(RULES["ccpo_reward_code"]).name == "ccpo_reward_code"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_unit = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(px=_unit, py=_unit, gx=_unit, gy=_unit)
def test_distance_only_protocols_match_their_threshold(px, py, gx, gy):
    # ccpo (<= 140 px of the rounded original pixels), uis1 (<= 0.04) and guir1 (< 0.14):
    # exact iff the distance passes, whatever the points
    w, h = 1080, 2400
    d_px = math.sqrt((round(px * w) - round(gx * w)) ** 2 + (round(py * h) - round(gy * h)) ** 2)
    assert score_step(click(px, py), click(gx, gy), "ccpo", screen_size=(w, h)).exact == (d_px <= 140)
    assert score_step(click(px, py), click(gx, gy), "uis1").exact == (
        math.sqrt((px - gx) ** 2 + (py - gy) ** 2) <= 0.04
    )
    assert score_step(click(px, py), click(gx, gy), "guir1").exact == ((px - gx) ** 2 + (py - gy) ** 2 < 0.14**2)


@settings(max_examples=100, deadline=None)
@given(px=_unit, py=_unit, proto=st.sampled_from(sorted(PROTOCOLS)))
def test_score_step_never_raises_and_exact_implies_type_match(px, py, proto):
    # exact implies type match, except where the original does not require the type (GUI-R1)
    required = get_protocol(proto).rules.args.type_required
    for gt in (GT_C, typ("hello"), scroll("up", "content"), term("success"), Action("wait")):
        s = score_step(click(px, py), gt, proto, gt_box=BOX, candidate_boxes=[BOX, FAR_BOX], screen_size=(1080, 2400))
        assert not s.exact or s.type_match or not required
        assert not s.exact or s.counted
