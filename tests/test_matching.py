"""Tests of guirl.matching: the click, text and argument rules (table-driven, one comment per
case), the step decision, the registry, and properties (hypothesis).

That the evaluator protocols and the rewards decide exactly as before the engine is tested in
tests/test_matching_equivalence.py; the protocols' own tables are in tests/test_metrics_step.py.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.actions.types import COORDINATE_TYPES, Action, ActionType
from guirl.geometry import box_center, distance, distance_to_box, point_in_box
from guirl.matching import (
    LONG_PRESS_AS_CLICK,
    RULES,
    TEXT_RULES,
    WAIT_AS_TERMINATE,
    ArgumentRule,
    ClickRule,
    RuleSet,
    TextRule,
    arguments_match,
    click_match,
    get_rules,
    get_text_rule,
    match_step,
    rule_boxes,
    rules_differ,
    target_distance,
    text_match,
)
from guirl.textmatch import levenshtein_ratio

GT = (0.5, 0.5)
BOX = (0.45, 0.45, 0.55, 0.55)  # 0.1 x 0.1 around GT
FAR = (0.8, 0.8, 0.9, 0.9)  # far from GT
WIDE = (0.1, 0.4, 0.9, 0.6)  # contains GT, wide


def click(x: float, y: float, text: str | None = None) -> Action:
    return Action("click", point=(x, y), text=text)


def typ(t: str) -> Action:
    return Action("type", text=t)


def scroll(d: str, conv: str) -> Action:
    return Action("scroll", direction=d, convention=conv)


# ------------------------------------------------------------------------------ click rules
# (id, rule, pred point, gt point, gt_box, candidate boxes, hit)
CLICK_CASES = [
    # distance only: <= by default, < when strict
    ("dist_le_on_threshold", ClickRule(distance_threshold=0.25), (0.75, 0.5), GT, None, (), True),
    (
        "dist_lt_on_threshold",
        ClickRule(distance_threshold=0.25, distance_strict=True),
        (0.75, 0.5),
        GT,
        None,
        (),
        False,
    ),
    ("dist_beyond", ClickRule(distance_threshold=0.1), (0.61, 0.5), GT, None, (), False),
    # the gt box as annotated: an edge point is inside; 1.2x reaches 0.56; strict excludes the edge
    ("gt_box_edge", ClickRule(box_mode="gt_box"), (0.45, 0.5), GT, BOX, (), True),
    ("gt_box_outside", ClickRule(box_mode="gt_box"), (0.56, 0.5), GT, BOX, (), False),
    ("gt_box_enlarged", ClickRule(box_mode="gt_box", box_enlarge=1.2), (0.559, 0.5), GT, BOX, (), True),
    ("gt_box_strict_edge", ClickRule(box_mode="gt_box", box_strict=True), (0.45, 0.5), GT, BOX, (), False),
    # gt_box mode ignores candidate boxes
    ("gt_box_ignores_candidates", ClickRule(box_mode="gt_box"), (0.85, 0.85), GT, BOX, (FAR,), False),
    # any_candidate: any candidate box counts, however far from the gt point
    ("any_candidate_far_box", ClickRule(box_mode="any_candidate"), (0.85, 0.85), GT, None, (FAR,), True),
    # containing_gt: only boxes that contain the gt point count
    ("containing_gt_no", ClickRule(box_mode="containing_gt"), (0.85, 0.85), GT, None, (FAR,), False),
    ("containing_gt_yes", ClickRule(box_mode="containing_gt"), (0.85, 0.5), GT, None, (FAR, WIDE), True),
    # nearest_k: FAR is the only box, so among the nearest 1 ...
    ("nearest_k_in", ClickRule(box_mode="nearest_k", nearest_k=1), (0.85, 0.85), GT, None, (FAR,), True),
    # ... but not once a nearer box exists
    ("nearest_k_pushed_out", ClickRule(box_mode="nearest_k", nearest_k=1), (0.85, 0.85), GT, None, (FAR, BOX), False),
    # same_box: prediction and gt point in one common box
    ("same_box_yes", ClickRule(box_mode="same_box"), (0.85, 0.5), GT, None, (WIDE,), True),
    ("same_box_gt_elsewhere", ClickRule(box_mode="same_box"), (0.85, 0.85), GT, None, (FAR,), False),
    # the fallback after a missed box
    ("box_miss_then_distance", ClickRule(box_mode="gt_box", distance_threshold=0.14), (0.6, 0.5), GT, FAR, (), True),
    # fallback only without a gt box (GUI-R1 reward, Co-EPG): with a box, the box decides
    (
        "no_gt_box_fallback_blocked",
        ClickRule(box_mode="gt_box", distance_threshold=0.14, distance_fallback="no_gt_box"),
        (0.6, 0.5),
        GT,
        FAR,
        (),
        False,
    ),
    (
        "no_gt_box_fallback_used",
        ClickRule(box_mode="gt_box", distance_threshold=0.14, distance_fallback="no_gt_box"),
        (0.6, 0.5),
        GT,
        None,
        (),
        True,
    ),
    # nearest target: 0.05 from the edge of FAR, 0.42 from the gt point
    (
        "nearest_target_box_edge",
        ClickRule(box_mode="any_candidate", distance_threshold=0.06, distance_to="nearest_target"),
        (0.75, 0.85),
        GT,
        None,
        (FAR,),
        True,
    ),
    # no prediction point, no hit
    ("no_point", ClickRule(distance_threshold=1.0), None, GT, None, (), False),
]


@pytest.mark.parametrize("case", CLICK_CASES, ids=[c[0] for c in CLICK_CASES])
def test_click_rules(case):
    _, rule, pred, gt, gt_box, cands, hit = case
    assert click_match(pred, gt, rule, gt_box=gt_box, candidate_boxes=cands) is hit


@pytest.mark.parametrize(
    "rule, pred, boxes, expected",
    [
        (ClickRule(distance_threshold=0.1), (0.8, 0.5), (), 0.3),  # to the gt point
        (ClickRule(distance_threshold=0.1), (0.8, 0.5), (FAR,), 0.3),  # boxes do not count for "point"
        (ClickRule(box_mode="any_candidate", distance_to="nearest_target"), (0.85, 0.85), (FAR,), 0.0),  # inside
        (ClickRule(box_mode="any_candidate", distance_to="nearest_target"), (0.85, 0.7), (FAR,), 0.1),  # below edge
        (ClickRule(box_mode="gt_box", distance_to="nearest_target"), (0.85, 0.85), (FAR,), math.hypot(0.35, 0.35)),
    ],
)
def test_target_distance(rule, pred, boxes, expected):
    assert target_distance(pred, GT, rule, candidate_boxes=boxes) == pytest.approx(expected)


def test_nearest_k_keeps_input_order_on_ties_and_counts_duplicates():
    a, b = (0.625, 0.375, 0.875, 0.625), (0.125, 0.375, 0.375, 0.625)  # centres 0.25 right / left of GT: a tie
    rule = ClickRule(box_mode="nearest_k", nearest_k=1)
    assert rule_boxes(rule, GT, candidate_boxes=(a, b)) == [a]
    assert rule_boxes(rule, GT, candidate_boxes=(b, a)) == [b]
    # a duplicated box takes two of the k places
    two = ClickRule(box_mode="nearest_k", nearest_k=2)
    assert rule_boxes(two, GT, candidate_boxes=(BOX, BOX, a)) == [BOX, BOX]


# ------------------------------------------------------------------------------ text rules
# (id, rule, pred, gt, match)
TEXT_CASES = [
    ("contains_sub", TextRule("contains"), "Milk ", "buy milk and eggs", True),  # normalised containment
    ("contains_super", TextRule("contains"), "buy milk and eggs", "milk", True),  # either direction
    ("contains_empty", TextRule("contains"), "", "milk", False),  # empty matches only empty
    ("exact_normalised", TextRule("exact"), "  Hello  World ", "hello world", True),
    ("exact_differs", TextRule("exact"), "hello", "hello world", False),
    ("f1_half_ge", TextRule("f1", 0.5), "hello there", "hello world", True),  # F1 = 0.5 >= 0.5
    ("f1_half_gt", TextRule("f1", 0.5, strict=True), "hello there", "hello world", False),  # not > 0.5
    ("f1_milk", TextRule("f1", 0.5), "milk", "buy milk and eggs", False),  # F1 = 0.4
    ("anls_ok", TextRule("contains_or_anls", 0.5), "helo world", "hello world", True),  # ANLS 10/11
    ("anls_half", TextRule("contains_or_anls", 0.5), "ab", "ax", True),  # ANLS exactly 0.5
    ("anls_half_strict", TextRule("contains_or_anls", 0.5, strict=True), "ab", "ax", False),
    ("ratio_08_strict", TextRule("contains_or_ratio", 0.8, strict=True), "hellp", "hello", False),  # ratio 0.8
    ("ratio_08", TextRule("contains_or_ratio", 0.8), "hellp", "hello", True),
    ("phrase_in", TextRule("phrase"), "Ann's number is 555-1234", "555-1234", True),
    ("phrase_word_boundary", TextRule("phrase"), "Location is off", "on", False),  # "on" is not a word there
    ("phrase_one_way", TextRule("phrase"), "555", "555-1234", False),  # the gt's words must all appear
    ("phrase_empty_gt", TextRule("phrase"), "anything", "--", False),  # no words: never matches
    ("none_pred", TextRule("contains"), None, "x", False),  # a missing text never matches
    ("none_gt", TextRule("exact"), "x", None, False),
]


@pytest.mark.parametrize("case", TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_text_rules(case):
    _, rule, pred, gt, ok = case
    assert text_match(pred, gt, rule) is ok


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("", "", 1.0),  # both empty
        ("abc", "abc", 1.0),  # identical
        ("abc", "xyz", 0.0),  # nothing shared
        ("hello wrld", "hello world", 20 / 21),  # one deletion: 2*10/21
    ],
)
def test_levenshtein_ratio(a, b, expected):
    assert levenshtein_ratio(a, b) == pytest.approx(expected)


# ------------------------------------------------------------------------------ arguments and steps
def rules(**args) -> RuleSet:
    return RuleSet("t", ClickRule(distance_threshold=0.1), TextRule("contains"), ArgumentRule(**args))


# (id, rule set, pred, gt, (type_match, grounding, exact))
STEP_CASES = [
    # finger up == content down; compared in either convention
    ("scroll_conv_finger", rules(), scroll("up", "finger"), scroll("down", "content"), (True, None, True)),
    (
        "scroll_conv_content",
        rules(scroll_convention="content"),
        scroll("up", "finger"),
        scroll("down", "content"),
        (True, None, True),
    ),
    ("scroll_wrong", rules(), scroll("down", "finger"), scroll("down", "content"), (True, None, False)),
    (
        "scroll_unchecked",
        rules(scroll_direction_checked=False),
        scroll("down", "finger"),
        scroll("down", "content"),
        (True, None, True),
    ),
    ("key_wrong", rules(), Action("press", key="home"), Action("press", key="back"), (True, None, False)),
    (
        "key_unchecked",
        rules(key_checked=False),
        Action("press", key="home"),
        Action("press", key="back"),
        (True, None, True),
    ),
    (
        "status_checked",
        rules(),
        Action("terminate", status="fail"),
        Action("terminate", status="success"),
        (True, None, False),
    ),
    (
        "status_unchecked",
        rules(terminate_status_checked=False),
        Action("terminate", status="fail"),
        Action("terminate", status="success"),
        (True, None, True),
    ),
    # wait is its own type unless merged into the stop class
    ("wait_vs_stop", rules(), Action("wait"), Action("terminate", status="success"), (False, None, False)),
    (
        "wait_as_stop",
        rules(type_merges=(WAIT_AS_TERMINATE,)),
        Action("wait"),
        Action("terminate", status="success"),
        (True, None, True),
    ),
    # long press vs click: grounding counts the point, the type differs unless merged
    ("long_press_vs_click", rules(), Action("long_press", point=GT), click(*GT), (False, True, False)),
    (
        "long_press_as_click",
        rules(type_merges=(LONG_PRESS_AS_CLICK,)),
        Action("long_press", point=GT),
        click(*GT),
        (True, True, True),
    ),
    # coordinate text: evaluators compare only a select's option; rewards any text the gt carries
    ("click_text_ignored", rules(), click(0.5, 0.5), click(0.5, 0.5, "OK"), (True, True, True)),
    (
        "click_text_if_present",
        rules(coordinate_text="if_present"),
        click(0.5, 0.5),
        click(0.5, 0.5, "OK"),
        (True, True, False),
    ),
    (
        "select_option",
        rules(),
        Action("select", point=GT, text="Economy"),
        Action("select", point=GT, text="Business"),
        (True, True, False),
    ),
    # a good option at the wrong place is still wrong
    (
        "select_far",
        rules(),
        Action("select", point=(0.9, 0.9), text="Economy"),
        Action("select", point=GT, text="Economy"),
        (True, False, False),
    ),
    ("text_contains", rules(), typ("milk"), typ("buy milk and eggs"), (True, None, True)),
    ("type_mismatch", rules(), typ("a"), click(*GT), (False, False, False)),
]


@pytest.mark.parametrize("case", STEP_CASES, ids=[c[0] for c in STEP_CASES])
def test_match_step(case):
    _, rs, pred, gt, expected = case
    m = match_step(pred, gt, rs)
    assert (m.type_match, m.grounding, m.exact) == expected, m.reason


def test_open_app_by_clicking_the_icon():
    rs = rules(open_app_click_ok=True)
    gt = Action("open_app", text="Maps")
    assert match_step(click(0.5, 0.5), gt, rs, candidate_boxes=(BOX,)).exact  # inside the icon
    assert not match_step(click(0.9, 0.1), gt, rs, candidate_boxes=(BOX,)).exact  # elsewhere
    m = match_step(click(0.5, 0.5), gt, rs)  # no icon box to hit
    assert not m.type_match and "no app box" in m.reason
    assert not match_step(click(0.5, 0.5), gt, rules(), candidate_boxes=(BOX,)).type_match  # not allowed


def test_arguments_match_reports_a_reason():
    ok, reason = arguments_match(Action("press", key="home"), Action("press", key="back"), rules())
    assert not ok and reason == "key home != back"


def test_match_step_rejects_non_actions():
    with pytest.raises(TypeError, match="two Actions"):
        match_step(None, click(*GT), rules())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="RuleSet"):
        match_step(click(*GT), click(*GT), "ccpo_androidcontrol")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ validation, registry
@pytest.mark.parametrize(
    "make, msg",
    [
        (lambda: ClickRule(box_mode="weird", distance_threshold=0.1), "box_mode"),  # unknown click rule
        (lambda: ClickRule(box_mode="nearest_k"), "nearest_k"),  # k missing
        (lambda: ClickRule(box_mode="none"), "no box rule"),  # nothing could ever be right
        (lambda: ClickRule(box_mode="gt_box", box_enlarge=0.0), "box_enlarge"),
        (lambda: ClickRule(distance_threshold=-0.1), "distance_threshold"),
        (lambda: ClickRule(distance_threshold=0.1, distance_to="box"), "distance_to"),
        (lambda: ClickRule(distance_threshold=0.1, distance_fallback="never"), "distance_fallback"),
        (lambda: TextRule("fuzzy"), "kind"),  # unknown text rule
        (lambda: TextRule("f1", threshold=1.5), "threshold"),
        (lambda: ArgumentRule(scroll_convention="screen"), "scroll_convention"),
        (lambda: ArgumentRule(coordinate_text="always"), "coordinate_text"),
        (lambda: ArgumentRule(type_merges=(("wait", "stop"),)), "type merge"),  # not an action type
        (lambda: ArgumentRule(type_merges=(("wait", "terminate"), ("terminate", "click"))), "chains"),
        (lambda: RuleSet("x", click=TextRule()), "click must be a ClickRule"),  # type: ignore[arg-type]
    ],
)
def test_rules_validate(make, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        make()


def test_registry():
    assert all(name == rs.name and rs.source for name, rs in RULES.items())
    assert get_rules("ccpo_androidcontrol") is RULES["ccpo_androidcontrol"] and get_rules(RULES["ces"]) is RULES["ces"]
    with pytest.raises(KeyError, match="unknown matching rule set 'nope'"):
        get_rules("nope")
    assert get_text_rule("minigui_answer") is TEXT_RULES["minigui_answer"]
    with pytest.raises(KeyError, match="unknown text rule"):
        get_text_rule("nope")
    # the two known disagreements, as data
    # the paper's reward (CCPO eqs. 12-13) and the released reward code vs the evaluator as run
    assert rules_differ("ccpo_reward", "ccpo_androidcontrol") == [
        "click.distance_threshold",
        "click.units",
        "click.unit_decimals",
        "click.distance_formula",
        "text.kind",
        "text.strict",
        "text.normalize",
        "args.scroll_match",
        "args.scroll_units",
        "args.scroll_unit_decimals",
        "args.wait_duration_checked",
        "args.coordinate_text",
    ]
    assert rules_differ("ccpo_reward_code", "ccpo_androidcontrol") == [
        "click.box_mode",
        "click.distance_threshold",
        "click.distance_to",
        "click.units",
        "click.unit_decimals",
        "click.distance_formula",
        "text.kind",
        "text.strict",
        "text.normalize",
        "args.scroll_match",
        "args.scroll_units",
        "args.scroll_unit_decimals",
        "args.wait_duration_checked",
        "args.coordinate_text",
    ]
    assert "click.box_mode" in rules_differ("agentcpm_reward", "agentcpm")
    assert rules_differ("ccpo_androidcontrol", "ccpo_androidcontrol") == []


# ------------------------------------------------------------------------------ properties
_unit = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def boxes(draw):
    x1, x2 = sorted((draw(_unit), draw(_unit)))
    y1, y2 = sorted((draw(_unit), draw(_unit)))
    return (x1, y1, x2, y2)


@st.composite
def box_and_point(draw):
    """A box and a point that is often on its edges or corners."""
    b = draw(boxes())
    x = draw(st.one_of(_unit, st.sampled_from((b[0], b[2]))))
    y = draw(st.one_of(_unit, st.sampled_from((b[1], b[3]))))
    return b, (x, y)


@settings(max_examples=300, deadline=None)
@given(bp=box_and_point())
def test_boxes_as_annotated_are_used_exactly(bp):
    # box_enlarge=None: "inside" is point_in_box on the annotated box, edges included, bit for bit
    b, p = bp
    assert click_match(p, GT, ClickRule(box_mode="gt_box"), gt_box=b) == point_in_box(p, b)
    strict = b[0] < p[0] < b[2] and b[1] < p[1] < b[3]
    assert click_match(p, GT, ClickRule(box_mode="gt_box", box_strict=True), gt_box=b) == strict


@settings(max_examples=300, deadline=None)
@given(bp=box_and_point())
def test_distance_to_box_is_zero_exactly_inside_and_at_most_the_centre_distance(bp):
    b, p = bp
    d = distance_to_box(p, b)
    assert (d == 0.0) == point_in_box(p, b)
    assert d <= distance(p, box_center(b)) + 1e-12


@settings(max_examples=300, deadline=None)
@given(p=st.tuples(_unit, _unit), g=st.tuples(_unit, _unit), t1=_unit, t2=_unit)
def test_larger_radius_never_rejects_what_a_smaller_accepts(p, g, t1, t2):
    lo, hi = sorted((t1, t2))
    if click_match(p, g, ClickRule(distance_threshold=lo)):
        assert click_match(p, g, ClickRule(distance_threshold=hi))


_words = st.text(alphabet="ab c", max_size=8)


@settings(max_examples=300, deadline=None)
@given(a=_words, b=_words, thr=_unit, kind=st.sampled_from(["f1", "contains_or_anls", "contains_or_ratio"]))
def test_strict_text_rules_imply_non_strict(a, b, thr, kind):
    if text_match(a, b, TextRule(kind, thr, strict=True)):
        assert text_match(a, b, TextRule(kind, thr))


@settings(max_examples=300, deadline=None)
@given(a=_words, b=_words)
def test_containment_is_symmetric(a, b):
    assert text_match(a, b, TextRule("contains")) == text_match(b, a, TextRule("contains"))


@st.composite
def gt_steps(draw):
    """A gt action and, half of the time, a gt box around its point with a margin."""
    t = draw(st.sampled_from(list(ActionType)))
    pt = draw(st.tuples(st.floats(0.05, 0.95), st.floats(0.05, 0.95)))
    kw: dict = {"type": t}
    if t in COORDINATE_TYPES:
        kw["point"] = pt
    if t in (ActionType.SELECT, ActionType.TYPE, ActionType.ANSWER, ActionType.OPEN_APP):
        kw["text"] = draw(st.sampled_from(["milk", "buy milk and eggs", "Maps", "hello world"]))
    if t is ActionType.SCROLL:
        kw["direction"] = draw(st.sampled_from(["up", "down", "left", "right"]))
        kw["convention"] = draw(st.sampled_from(["finger", "content"]))
    if t is ActionType.PRESS:
        kw["key"] = draw(st.sampled_from(["back", "home"]))
    if t is ActionType.TERMINATE:
        kw["status"] = draw(st.sampled_from(["success", "fail"]))
    box = None
    if draw(st.booleans()):
        m = draw(st.floats(0.01, 0.05))
        box = (pt[0] - m, pt[1] - m, pt[0] + m, pt[1] + m)
    return Action(**kw), box


def _self_match_exception(rs: RuleSet, gt: Action, box) -> str | None:
    """Why an original as run does not count the ground truth itself right (``None``: it does)."""
    a, c = rs.args, rs.click
    grounded = gt.type in COORDINATE_TYPES if a.grounded_types is None else gt.type.value in a.grounded_types
    if gt.type.value in a.unscored_types:
        return "the original raises on this ground truth (UI-S1: terminate)"
    if gt.type.value in a.uncounted_types:
        return "the original does not count this step (GUI-R1: press / wait / complete)"
    if a.needs_screen_boxes:
        return "the original fails on a screen without element boxes (AITW)"
    if grounded and c.box_mode == "pred_box":
        return "the click rule needs a predicted element box (CoAT); the gt action has none"
    if grounded and box is None and (c.distance_threshold is None or c.gt_box_required):
        return "a box rule without a box (Mind2Web, Co-EPG, GUI-Odyssey's sam2 box)"
    if gt.type is ActionType.SCROLL and a.scroll_direction_checked and a.scroll_match.endswith("_points"):
        return "the scroll rule reads the predicted swipe's start and end points; the gt has none (CCPO)"
    if gt.type is ActionType.SCROLL and a.scroll_match == "text" and gt.text is None:
        return "the scroll rule compares texts; the gt has none (GUI-R1)"
    if grounded and gt.point is None:
        return "the element of this step is checked (Mind2Web) but the gt action has no point"
    return None


@settings(max_examples=300, deadline=None)
@given(step=gt_steps(), name=st.sampled_from(sorted(RULES)))
def test_the_ground_truth_matches_itself_under_every_rule_set(step, name):
    # every rule set counts the ground truth right, except where the original as run cannot
    # (each exception is a documented quirk of the original, tested on its golden rows)
    gt, box = step
    rs = RULES[name]
    m = match_step(gt, gt, rs, gt_box=box, screen_size=(1080, 2400))
    why = _self_match_exception(rs, gt, box)
    if why is None:
        assert m.exact, (name, m.reason)
        assert m.type_match
    else:
        assert not m.exact, (name, why)
    grounded = (
        gt.type in COORDINATE_TYPES if rs.args.grounded_types is None else gt.type.value in rs.args.grounded_types
    )
    assert (m.grounding is None) == (not grounded)


@settings(max_examples=300, deadline=None)
@given(step=gt_steps(), other=gt_steps(), name=st.sampled_from(sorted(RULES)))
def test_exact_implies_type_match_and_grounding(step, other, name):
    (gt, box), (pred, _) = step, other
    rs = RULES[name]
    m = match_step(pred, gt, rs, gt_box=box, screen_size=(1080, 2400))
    if m.exact:
        assert m.counted and m.grounding is not False
        assert m.type_match or not rs.args.type_required  # GUI-R1 does not require the type
