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

# (id, protocol, pred, gt, kwargs, (type_match, grounding, exact))
CASES = [
    # --- distance thresholds, just inside / just outside -------------------------------
    ("agentcpm_dist_in", "agentcpm", click(0.639, 0.5), GT_C, {}, (True, True, True)),  # 0.139 <= 0.14
    ("agentcpm_dist_out", "agentcpm", click(0.641, 0.5), GT_C, {}, (True, False, False)),  # 0.141 > 0.14
    ("guir1_dist_in", "guir1", click(0.5, 0.639), GT_C, {}, (True, True, True)),  # strict < 0.14
    ("guir1_dist_out", "guir1", click(0.5, 0.641), GT_C, {}, (True, False, False)),
    ("guir1_ignores_box", "guir1", click(0.85, 0.85), GT_C, {"gt_box": FAR_BOX}, (True, False, False)),  # distance only
    ("ccpo_dist_in", "ccpo", click(0.599, 0.5), GT_C, {}, (True, True, True)),  # 0.099 <= 0.1
    ("ccpo_dist_out", "ccpo", click(0.601, 0.5), GT_C, {}, (True, False, False)),  # 0.101 > 0.1
    ("uis1_dist_in", "uis1", click(0.539, 0.5), GT_C, {}, (True, True, True)),  # 0.039 <= 0.04
    ("uis1_dist_out", "uis1", click(0.541, 0.5), GT_C, {}, (True, False, False)),  # 0.041 > 0.04
    # --- box rules ----------------------------------------------------------------------
    # UI-S1: inside the 1.2x enlarged candidate (0.1 wide -> 0.12: edge at 0.56), far from gt point
    ("uis1_enlarged_in", "uis1", click(0.559, 0.5), GT_C, {"candidate_boxes": [BOX]}, (True, True, True)),
    ("uis1_enlarged_out", "uis1", click(0.561, 0.5), GT_C, {"candidate_boxes": [BOX]}, (True, False, False)),
    # GUI-Odyssey: inside the (unenlarged) gt box though 0.3 away from gt point
    ("odyssey_in_far_box", "guiodyssey", click(0.85, 0.85), click(0.81, 0.81), {"gt_box": FAR_BOX}, (True, True, True)),
    ("odyssey_no_box_far", "guiodyssey", click(0.2, 0.2), GT_C, {"gt_box": BOX}, (True, False, False)),
    ("ces_in_box", "ces", click(0.89, 0.89), click(0.81, 0.81), {"gt_box": FAR_BOX}, (True, True, True)),
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
    # AITZ: pred and gt in the same 1.2x box
    ("aitz_same_box", "aitz", click(0.9, 0.5), GT_C, {"candidate_boxes": [(0.1, 0.4, 0.9, 0.6)]}, (True, True, True)),
    # AITZ: pred in a box that does not contain the gt point, and far -> wrong
    ("aitz_other_box", "aitz", click(0.85, 0.85), GT_C, {"candidate_boxes": [FAR_BOX, BOX]}, (True, False, False)),
    # AITZ: no common box but within 0.14
    ("aitz_dist_in", "aitz", click(0.6, 0.5), GT_C, {}, (True, True, True)),
    # Mind2Web: only the element box counts, no distance fallback
    ("m2w_in_box", "mind2web", click(0.54, 0.54), GT_C, {"gt_box": BOX}, (True, True, True)),
    ("m2w_near_outside_box", "mind2web", click(0.56, 0.5), GT_C, {"gt_box": BOX}, (True, False, False)),
    # --- long press --------------------------------------------------------------------
    # AgentCPM: long_point is its own type; grounding still counts the point
    ("agentcpm_long_press_vs_click", "agentcpm", lp(0.5, 0.5), GT_C, {}, (False, True, False)),
    ("uis1_long_press_match", "uis1", lp(0.5, 0.5), lp(0.51, 0.5), {}, (True, True, True)),
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
    ("guir1_scroll_same_conv", "guir1", scroll("up", "content"), scroll("up", "content"), {}, (True, None, True)),
    # UI-S1 evaluation does not check the direction
    ("uis1_scroll_any_direction", "uis1", scroll("down", "finger"), scroll("down", "content"), {}, (True, None, True)),
    # --- text rules --------------------------------------------------------------------
    ("agentcpm_contains", "agentcpm", typ("Coffee"), typ("coffee shop"), {}, (True, None, True)),
    ("agentcpm_not_contains", "agentcpm", typ("coffee shops"), typ("coffee shop near me"), {}, (True, None, False)),
    ("odyssey_anls_ok", "guiodyssey", typ("helo world"), typ("hello world"), {}, (True, None, True)),  # ANLS 0.91
    ("odyssey_anls_low", "guiodyssey", typ("abc"), typ("xyz"), {}, (True, None, False)),
    (
        "guir1_f1_half",
        "guir1",
        typ("coffee shops"),
        typ("coffee shop near me"),
        {},
        (True, None, False),
    ),  # F1 1/3 < 0.5
    ("ces_f1_ok", "ces", typ("cheap coffee shop"), typ("coffee shop near me"), {}, (True, None, True)),  # F1 4/7
    ("aitz_ratio_ok", "aitz", typ("hello wrld"), typ("hello world"), {}, (True, None, True)),  # ratio 0.95 > 0.8
    ("aitz_ratio_low", "aitz", typ("hello"), typ("goodbye"), {}, (True, None, False)),
    # --- terminate / wait --------------------------------------------------------------
    ("agentcpm_term_status_ignored", "agentcpm", term("fail"), term("success"), {}, (True, None, True)),
    ("agentcpm_wait_is_stop", "agentcpm", Action("wait"), term("success"), {}, (True, None, True)),
    ("ces_term_status_checked", "ces", term("fail"), term("success"), {}, (True, None, False)),
    ("ces_term_status_ok", "ces", term("success"), term("success"), {}, (True, None, True)),
    ("ces_wait_not_stop", "ces", Action("wait"), term("success"), {}, (False, None, False)),
    ("uis1_wait", "uis1", Action("wait"), Action("wait"), {}, (True, None, True)),
    # --- press / open_app --------------------------------------------------------------
    ("press_ok", "agentcpm", Action("press", key="back"), Action("press", key="back"), {}, (True, None, True)),
    ("press_wrong_key", "agentcpm", Action("press", key="home"), Action("press", key="back"), {}, (True, None, False)),
    # UI-S1: clicking the app icon solves an open_app step
    (
        "uis1_open_by_click",
        "uis1",
        click(0.5, 0.5),
        Action("open_app", text="Maps"),
        {"candidate_boxes": [BOX]},
        (True, None, True),
    ),
    (
        "uis1_open_click_miss",
        "uis1",
        click(0.9, 0.1),
        Action("open_app", text="Maps"),
        {"candidate_boxes": [BOX]},
        (True, None, False),
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
    # click gt: grounding is False (not None); type gt: grounding is None
    s = score_step(pred, GT_C, proto)
    assert (s.type_match, s.grounding, s.exact, s.unparsable) == (False, False, False, True)
    assert s.reason == expect_reason
    s2 = score_step(pred, typ("x"), proto)
    assert (s2.type_match, s2.grounding, s2.exact) == (False, None, False)


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
    assert (agg["n"], agg["n_grounding"], agg["n_unparsable"]) == (4, 2, 1)
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
        "ccpo",
        "coepg",
    ]:
        p = get_protocol(name)
        assert p.name == name and p.source
        assert p.rules is RULES[name]  # a protocol is a name + a rule set of the engine + provenance
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
    # a bare rule set (here a reward's) can be scored with the metrics: CCPO's reward rules
    # accept "milk" for "buy milk and eggs" (containment), the ccpo protocol does not (F1 0.4)
    gt, pred = typ("buy milk and eggs"), typ("milk")
    assert score_step(pred, gt, RULES["ccpo_reward"]).exact
    assert not score_step(pred, gt, "ccpo").exact
    assert get_protocol(RULES["ccpo_reward"]).name == "ccpo_reward"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_unit = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(px=_unit, py=_unit, gx=_unit, gy=_unit)
def test_distance_only_protocols_match_their_threshold(px, py, gx, gy):
    # ccpo (<= 0.1) and guir1 (< 0.14): exact iff the distance passes, whatever the points
    d = math.hypot(px - gx, py - gy)
    assert score_step(click(px, py), click(gx, gy), "ccpo").exact == (d <= 0.1)
    assert score_step(click(px, py), click(gx, gy), "guir1").exact == (d < 0.14)


@settings(max_examples=100, deadline=None)
@given(px=_unit, py=_unit, proto=st.sampled_from(sorted(PROTOCOLS)))
def test_score_step_never_raises_and_exact_implies_type_match(px, py, proto):
    for gt in (GT_C, typ("hello"), scroll("up", "content"), term("success"), Action("wait")):
        s = score_step(click(px, py), gt, proto, gt_box=BOX, candidate_boxes=[BOX, FAR_BOX])
        assert not s.exact or s.type_match
