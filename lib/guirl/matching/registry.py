"""Named rule sets: the evaluator protocols' and the rewards' matching rules, as data.

``RULES[name]`` is a :class:`~guirl.matching.RuleSet`. Two families:

* **evaluator rule sets**, named like the protocol that uses them (``"agentcpm"``,
  ``"uis1"``, ...); :mod:`guirl.metrics.protocols` adds provenance (coordinate space, source).
* **reward rule sets**, named ``"<reward>_reward"``; each reward's config names the one it
  trains with (``CCPOConfig.rules``) and each paper's ``Method.reward_rules`` declares it
  beside its ``eval_protocol``. Where a paper's reward and evaluator differ, the difference is
  the difference between two entries here (``docs/metrics.md``, "Reward rules vs evaluator").

Every number carries its source. "stack-facts" means the project's survey of the public
evaluators summarised in ``docs/metrics.md``.
"""

from __future__ import annotations

from guirl.matching.rules import (
    WAIT_AS_TERMINATE,
    ArgumentRule,
    ClickRule,
    RuleSet,
    TextRule,
)

__all__ = ["RULES", "TEXT_RULES", "get_rules", "get_text_rule", "rules_differ"]

_CONTAINS = TextRule("contains")
_F1 = TextRule("f1", threshold=0.5)
_F1_STRICT = TextRule("f1", threshold=0.5, strict=True)

# ------------------------------------------------------------------------------ evaluators
# Each evaluator rule set reproduces the original code as it runs (docs/golden.md describes the
# originals; tests/test_golden.py checks every row of tests/fixtures/golden/). Python's
# "text in other" is true for an empty text (empty_contained). The calculate_f1_score of GUI-R1,
# CES and CCPO is an F1 of lower-cased white-space token *sets* (set_f1).
_PY_CONTAINS = TextRule("contains", normalize="lower_strip", empty_contained=True)
_SET_F1_STRICT = TextRule("set_f1", threshold=0.5, strict=True, normalize="lower_strip")
# Mind2Web Op.F1 == 1 on "<op> <value>" strings (SeeClick's calculate_f1: token sets).
_OP_F1_ONE = TextRule("set_f1", threshold=1.0, normalize="none")
_M2W_GROUNDED = ("click", "hover", "press", "long_press", "type", "select")
_SEECLICK_OPS = (("click", "4"), ("hover", "4"), ("press", "4"), ("long_press", "4"), ("type", "3"), ("select", "2"))

_AGENTCPM_ARGS = ArgumentRule(
    scroll_convention="finger", terminate_status_checked=False, type_merges=(WAIT_AS_TERMINATE,)
)

_EVALUATORS: tuple[RuleSet, ...] = (
    # AgentCPM-GUI eval/utils/evaluator.py ActionEvaluator: ui_positions enlarged 1.2x by
    # _resize_annotation_bounding_boxes (y = max(0, y - dh/2), h = min(1, h + dh): "shift"),
    # kept when they contain the gt point (obtain_gt_bbox/check_inside), else np.linalg.norm <=
    # _TAP_DISTANCE_THRESHOLD = 0.14; text lower().strip() containment either way; every stop
    # status and "pause and wait" are one "stop" class, matched without the status.
    RuleSet(
        "agentcpm",
        ClickRule(
            box_mode="containing_gt",
            box_enlarge=1.2,
            box_enlarge_mode="shift",
            distance_threshold=0.14,
            distance_formula="sqrt_sum",
        ),
        _PY_CONTAINS,
        _AGENTCPM_ARGS,
        source="AgentCPM-GUI eval/utils/evaluator.py::ActionEvaluator.__call__",
    ),
    # Same file, eval_android_control=True: the 5 enlarged boxes whose centres are nearest the gt
    # point (obtain_gt_bbox: sorted_boxes[:5]), else _TAP_DISTANCE_THRESHOLD_AC = 0.04.
    RuleSet(
        "agentcpm_androidcontrol",
        ClickRule(
            box_mode="nearest_k",
            box_enlarge=1.2,
            box_enlarge_mode="shift",
            nearest_k=5,
            distance_threshold=0.04,
            distance_formula="sqrt_sum",
        ),
        _PY_CONTAINS,
        _AGENTCPM_ARGS,
        source="AgentCPM-GUI eval/utils/evaluator.py::ActionEvaluator.__call__ (eval_android_control=True)",
    ),
    # GUI-Odyssey src/eval_mm/GUIOdyssey_action_matching.py::action_matching: inside sam2_bbox
    # (inclusive, an empty box raises: "invalid"), else ||pred - gt|| / 1000 <= 0.14; text
    # strip() (case kept), containment or 1 - lev / max(len) >= 0.5, both cut at the second ':'
    # of the answer string; scroll words equal; other actions on the action string alone.
    RuleSet(
        "guiodyssey",
        ClickRule(box_mode="gt_box", gt_box_required=True, distance_threshold=0.14, distance_formula="sqrt_sum"),
        TextRule("contains_or_anls", threshold=0.5, normalize="strip", empty_contained=True, cut_at=":"),
        ArgumentRule(scroll_convention="finger"),
        source="GUI-Odyssey src/eval_mm/GUIOdyssey_action_matching.py::action_matching",
    ),
    # UI-S1 evaluation/eval_qwenvl.py::process_line as published: fix_line replaces every step's
    # check_options with candidate_bbox = [] (it looks for step['bbox']), so
    # qwenvl_utils.py::evaluate_android_control_action sees no candidate box: clicks and long
    # presses within POINT_DISTANCE_THRESHOLD = 0.04 (np.linalg.norm) only, a click never opens
    # an app; check_text = lower/strip containment; swipe on the type alone; a terminate ground
    # truth raises NotImplementedError.
    RuleSet(
        "uis1",
        ClickRule(box_mode="none", distance_threshold=0.04, distance_formula="sqrt_sum"),
        _PY_CONTAINS,
        ArgumentRule(scroll_convention="finger", scroll_direction_checked=False, unscored_types=("terminate",)),
        source="UI-S1 evaluation/eval_qwenvl.py::process_line -> qwenvl_utils.py::evaluate_android_control_action",
    ),
    # The same function given the file's own check_options: candidate boxes enlarged 1.2x about
    # the centre (BBOX_ENLARGE_FACTOR), else 0.04; an open step also by clicking the app's box.
    RuleSet(
        "uis1_candidates",
        ClickRule(box_mode="any_candidate", box_enlarge=1.2, distance_threshold=0.04, distance_formula="sqrt_sum"),
        _PY_CONTAINS,
        ArgumentRule(
            scroll_convention="finger",
            scroll_direction_checked=False,
            unscored_types=("terminate",),
            open_app_click_ok=True,
        ),
        source="UI-S1 evaluation/qwenvl_utils.py::evaluate_android_control_action with the file's candidate_bbox",
    ),
    # GUI-R1 guir1/eval/eval_omni.py::evaluate: a click / long press step is right when
    # ((gt_x - x)/W)^2 + ((gt_y - y)/H)^2 < 0.14^2 with gt_bbox[0:2] as the target, whatever
    # the predicted type; an open_app / type / scroll / select step when calculate_f1_score of
    # the input texts >= 0.5 (token sets after removing [ ], one-token containment); press /
    # wait / complete steps are in no step denominator.
    RuleSet(
        "guir1",
        ClickRule(
            box_mode="none",
            distance_threshold=0.14,
            distance_strict=True,
            distance_formula="squared",
            distance_to="box_top_left",
        ),
        TextRule("set_f1", threshold=0.5, normalize="lower_strip", single_token_contains=True, strip_brackets=True),
        ArgumentRule(
            scroll_match="text",
            type_required=False,
            grounded_types=("click", "long_press"),
            uncounted_types=("press", "wait", "terminate", "answer", "hover"),
        ),
        source="GUI-R1 guir1/eval/eval_omni.py::evaluate",
    ),
    # CoAT coat/evaluate.py::ActionEvaluator.__call__ as released: _parse_answer_ sets the gt
    # point only for scrolls, so a click's gt point is [0, 0]; _check_click_: the predicted bbox
    # (pixels, enlarged 1.2x) contains it, or an enlarged ui_positions node containing it has
    # intersect_iou > 0.5 with the predicted box (areas floored at 1 px^2); text containment or
    # Levenshtein.ratio > 0.8, case kept; scroll word = the finger direction; stop on the type.
    RuleSet(
        "aitz",
        ClickRule(
            box_mode="pred_box",
            box_enlarge=1.2,
            gt_point="origin",
            units="pixels",
            unit_decimals=0,
            iou_min_area=1.0,
        ),
        TextRule("contains_or_ratio", threshold=0.8, strict=True, normalize="none", empty_contained=True),
        ArgumentRule(scroll_convention="finger", terminate_status_checked=False),
        source="CoAT coat/evaluate.py::ActionEvaluator.__call__",
    ),
    # The same with the click's annotated gt point (result_touch_yx), what _check_click_ means.
    RuleSet(
        "aitz_fixed",
        ClickRule(box_mode="pred_box", box_enlarge=1.2, units="pixels", unit_decimals=0, iou_min_area=1.0),
        TextRule("contains_or_ratio", threshold=0.8, strict=True, normalize="none", empty_contained=True),
        ArgumentRule(scroll_convention="finger", terminate_status_checked=False),
        source="CoAT coat/evaluate.py::ActionEvaluator.__call__ with the annotated click point",
    ),
    # SeeClick agent_tasks/mind2web_test.py: Ele_match = click_point inside the target bbox
    # normalised and rounded to 3 decimals (every operation, TYPE and SELECT too); Op_F1 =
    # calculate_f1 of token sets of "<action_type> <value lower-cased>" (CLICK, HOVER, ENTER are
    # 4, TYPE 3, SELECT 2); step success = Op_F1 == 1 and Ele_match; a value holding '"' makes
    # the reference unparsable and the step is skipped.
    RuleSet(
        "mind2web",
        ClickRule(box_mode="gt_box", box_round=3),
        _OP_F1_ONE,
        ArgumentRule(op_codes=_SEECLICK_OPS, grounded_types=_M2W_GROUNDED, skip_gt_text_with='"'),
        source="SeeClick agent_tasks/mind2web_test.py (per-step loop)",
    ),
    # CES verl/utils/reward_score/gui.py::acc_reward as released: click inside
    # extra_info['bbox'] ([[x1, y1], [x2, y2]] or a list of them), else
    # dx^2 + dy^2 <= CLICK_COORD_THRESHOLD^2 = 0.14^2; type / open_app: calculate_f1_score >
    # TEXT_F1_THRESHOLD = 0.5; scroll on the name alone (scroll() has no direction); press_*,
    # wait, finished, error on the name.
    RuleSet(
        "ces",
        ClickRule(box_mode="any_candidate", distance_threshold=0.14, distance_formula="squared"),
        _SET_F1_STRICT,
        ArgumentRule(scroll_direction_checked=False),
        source="CES verl/utils/reward_score/gui.py::acc_reward",
    ),
    # CES Sec. 5.1 (CES-28/29): GR = the point inside the gt box (the acted element's box; no
    # other candidate box, no distance fallback); SR = type and parameters: point in the box,
    # same scroll direction, text F1 > 0.5.
    RuleSet(
        "ces_paper",
        ClickRule(box_mode="gt_box"),
        _SET_F1_STRICT,
        ArgumentRule(scroll_convention="content"),
        source="CES Sec. 5.1 (GR / SR definitions)",
    ),
    # CCPO evaluation/evaluation_AC_AO_sequence_final.py::action_matching_evaluation: the
    # prediction mapped resized -> original pixels and rounded; click / long press within
    # 0.14 * 1000 = 140 *pixels* (math.sqrt); open / type: calculate_f1_score > 0.5; swipe:
    # predict_direction of both coordinate pairs (dominant axis, tie vertical); every other
    # action by dict equality (wait time, button spelling, terminate status).
    RuleSet(
        "ccpo_androidcontrol",
        ClickRule(
            box_mode="none", distance_threshold=140.0, units="pixels", unit_decimals=0, distance_formula="sqrt_sum"
        ),
        _SET_F1_STRICT,
        ArgumentRule(
            scroll_match="finger_points",
            scroll_units="pixels",
            scroll_unit_decimals=0,
            wait_duration_checked=True,
        ),
        source="CCPO evaluation/evaluation_AC_AO_sequence_final.py::action_matching_evaluation",
    ),
    # The same with the click threshold its comment states ("set 14 % of screen size as the
    # ratio"): 0.14 of the screen, per-axis normalised, instead of 140 original pixels.
    RuleSet(
        "ccpo_androidcontrol_fixed",
        ClickRule(box_mode="none", distance_threshold=0.14, distance_formula="sqrt_sum"),
        _SET_F1_STRICT,
        ArgumentRule(
            scroll_match="finger_points",
            scroll_units="pixels",
            scroll_unit_decimals=0,
            wait_duration_checked=True,
        ),
        source="CCPO AndroidControl evaluation with 14% of the screen as its comment says",
    ),
    # CCPO evaluation/evaluation_guio.py::new_action_matching_evaluation: coordinates on
    # GUI-Odyssey's [0, 1000] grid (normalize_action_coordinates rounds to 3 decimals); click /
    # long press within 140 on that grid; scroll: get_direction by the angle of start -> end;
    # type: calculate_f1_score > 0.5; PRESS_* / COMPLETE / IMPOSSIBLE on the action word.
    RuleSet(
        "ccpo_guiodyssey",
        ClickRule(
            box_mode="none", distance_threshold=140.0, units="thousand", unit_decimals=3, distance_formula="sqrt_sum"
        ),
        _SET_F1_STRICT,
        ArgumentRule(scroll_match="angle_points", scroll_units="thousand", scroll_unit_decimals=3),
        source="CCPO evaluation/evaluation_guio.py::new_action_matching_evaluation",
    ),
    # CCPO evaluation/evaluation_mind2web.py::mind2web_evaluation: SeeClick's rule with the
    # predicted point rounded to 3 decimals too; no skipped steps.
    RuleSet(
        "ccpo_mind2web",
        ClickRule(box_mode="gt_box", box_round=3, point_round=3),
        _OP_F1_ONE,
        ArgumentRule(op_codes=_SEECLICK_OPS, grounded_types=_M2W_GROUNDED),
        source="CCPO evaluation/evaluation_mind2web.py::mind2web_evaluation",
    ),
    # CCPO evaluation/evaluation_AITW_sequence_final_coord.py with evaluation/action_matching.py
    # (SeeClick's AITW check_actions_match): taps in one annot_position box grown by
    # ANNOTATION_*_AUGMENT_FRACTION = 1.4 x its size (2.4x), shifted at the edges, or within
    # 0.14 (the prediction normalised by the resized size and rounded to 3 decimals); scrolls on
    # the main axis only; every other action on its AITW type (a type step on the type alone);
    # an empty annot_position fails the step.
    RuleSet(
        "ccpo_aitw",
        ClickRule(
            box_mode="same_box",
            box_enlarge=1.4,
            box_enlarge_mode="shift_fraction",
            point_round=3,
            distance_threshold=0.14,
            distance_formula="sqrt_sum",
        ),
        _SET_F1_STRICT,
        ArgumentRule(scroll_convention="content", scroll_match="axis", text_checked=False, needs_screen_boxes=True),
        source="CCPO evaluation/evaluation_AITW_sequence_final_coord.py + action_matching.check_actions_match",
    ),
    # The same with boxes grown to 1.4x their size (the factor the constant's name states).
    RuleSet(
        "ccpo_aitw_fixed",
        ClickRule(
            box_mode="same_box",
            box_enlarge=1.4,
            box_enlarge_mode="shift",
            point_round=3,
            distance_threshold=0.14,
            distance_formula="sqrt_sum",
        ),
        _SET_F1_STRICT,
        ArgumentRule(scroll_convention="content", scroll_match="axis", text_checked=False, needs_screen_boxes=True),
        source="CCPO AITW evaluation with 1.4x boxes",
    ),
    # Co-EPG (AAAI 2026) App. A: on AndroidControl the grounder's point is mapped to the smallest
    # visible element containing it (UGround) and must be the gt point's element; arguments of
    # other steps are not stated: type equality plus lower/strip-equal text / app and equal
    # content-convention scroll direction; "terminate" (Table 10) covers done and impossible, so
    # its status is not compared.
    RuleSet(
        "coepg",
        ClickRule(box_mode="smallest_element"),
        TextRule("exact", normalize="lower_strip"),
        ArgumentRule(scroll_convention="content", terminate_status_checked=False),
        source="Co-EPG App. A (UGround element mapping); argument rule assumed",
    ),
    # Co-EPG Sec. 5.1 on Multimodal-Mind2Web: point inside the target box; Op.F1 of
    # "OP value" strings (HOVER / ENTER are CLICK); Step SR = element and Op.F1 == 1.
    RuleSet(
        "coepg_mind2web",
        ClickRule(box_mode="gt_box"),
        _OP_F1_ONE,
        ArgumentRule(
            op_codes=(
                ("click", "click"),
                ("hover", "click"),
                ("press", "click"),
                ("type", "type"),
                ("select", "select"),
            ),
            grounded_types=("click", "hover", "press", "type", "select"),
        ),
        source="Co-EPG Sec. 5.1 (Multimodal-Mind2Web Ele.Acc / Op.F1 / Step SR)",
    ),
    # The rule guirl used for Co-EPG before the paper's (inside the gt box, else within 0.14;
    # token F1 >= 0.5), kept for comparison.
    RuleSet(
        "coepg_distance",
        ClickRule(box_mode="gt_box", box_enlarge=1.0, distance_threshold=0.14),
        _F1,
        ArgumentRule(scroll_convention="finger"),
        source="guirl's earlier Co-EPG rule (gt box or 0.14); not the paper's",
    ),
)

# The rewards compare every argument of a coordinate gt that carries one (coordinate_text
# "if_present") and use boxes as annotated (box_enlarge None) unless the code enlarges them.
_REWARDS: tuple[RuleSet, ...] = (
    # AgentCPM-GUI RFT reward, paper default (AgentCPM-GUI Sec. 2.5.1; ACPM-15 in
    # docs/fidelity/agentcpm.md): a POINT is right only inside the gt box. The paper is silent on
    # steps without a gt box; there, within 0.14 of the gt point (ours). Text by containment,
    # status and key checked (the released evaluator's rules; the paper gives none).
    RuleSet(
        "agentcpm_reward",
        ClickRule(box_mode="gt_box", distance_threshold=0.14, distance_fallback="no_gt_box"),
        _CONTAINS,
        ArgumentRule(coordinate_text="if_present"),
        source="AgentCPM-GUI Sec. 2.5.1 (point inside the gt box); 0.14 without a gt box is ours",
    ),
    # The former rule: inside the gt box, else within 0.14 of the gt point (the released
    # evaluator's _TAP_DISTANCE_THRESHOLD applied to the reward; the released RFT reward itself is
    # shaped and continuous, rft/trainer/utils/gui_eval.py, not reproduced).
    RuleSet(
        "agentcpm_reward_code",
        ClickRule(box_mode="gt_box", distance_threshold=0.14),
        _CONTAINS,
        ArgumentRule(coordinate_text="if_present"),
        source="AgentCPM-GUI eval/utils/evaluator.py 0.14 radius on the reward",
    ),
    # UI-S1 reward (verl gui_traj.py check_response_match): 1.2x candidate box (BBOX_ENLARGE_FACTOR)
    # or within 0.04 (POINT_DISTANCE_THRESHOLD); containment; swipe direction compared (the code
    # flips the gt's up/down, i.e. compares finger directions); terminate by type alone.
    RuleSet(
        "uis1_reward",
        ClickRule(box_mode="any_candidate", box_enlarge=1.2, distance_threshold=0.04),
        _CONTAINS,
        ArgumentRule(scroll_convention="finger", terminate_status_checked=False, coordinate_text="if_present"),
        source="UI-S1 verl/utils/reward_score/gui_traj.py",
    ),
    # CES execution-feedback reward, paper default (CES eq. 25 and Sec. 5.1; CES-11 in
    # docs/fidelity/ces.md): click / long press right only with the point inside the gt box; type
    # by token F1 > 0.5 (strict); scroll by direction; any other action by its type (a press
    # key is part of the CES verb, press_home / press_back); terminate without status. The paper
    # is silent on steps without a gt box; there, within 0.14 of the gt point (ours).
    RuleSet(
        "ces_reward",
        ClickRule(box_mode="gt_box", distance_threshold=0.14, distance_fallback="no_gt_box"),
        _F1_STRICT,
        ArgumentRule(terminate_status_checked=False, coordinate_text="if_present"),
        source="CES eq. 25 (point in the gt box); 0.14 without a gt box is ours",
    ),
    # CES released code (verl/utils/reward_score/gui.py compute_match_score): inside a gt or
    # candidate box, else within 0.14 (CLICK_COORD_THRESHOLD); F1 > 0.5; scroll() has no
    # argument, so any scroll direction scores 1.
    RuleSet(
        "ces_reward_code",
        ClickRule(box_mode="any_candidate", distance_threshold=0.14),
        _F1_STRICT,
        ArgumentRule(scroll_direction_checked=False, terminate_status_checked=False, coordinate_text="if_present"),
        source="CES code verl/utils/reward_score/gui.py (0.14 radius, scroll without direction)",
    ),
    # CCPO reward, paper (CCPO eqs. 12-13, App. A.2.1; guirl.methods.ccpo.reward): the distance is
    # to the annotated point (eq. 12) and the reward turns it into credit (CCPOConfig); a point is
    # "right" (StepMatch.exact / grounding) within tau_min = 0.04 (A.2.1), where the credit is full;
    # non-coordinate arguments by exact match (eq. 13). CCPOConfig.tau_min is the credit curve's
    # source of truth; this threshold only labels the full-credit region.
    RuleSet(
        "ccpo_reward",
        ClickRule(box_mode="none", distance_threshold=0.04),
        TextRule("exact"),
        ArgumentRule(coordinate_text="if_present"),
        source="CCPO eqs. 12-13, App. A.2.1",
    ),
    # CCPO reward as released (code gui_utils/utils_reward.py; CCPOConfig.code()): the distance is
    # to the nearest of the gt point and the gt/candidate boxes (0 inside a box); non-coordinate
    # arguments by containment (check_text). A click is "right" only on a target (distance 0).
    RuleSet(
        "ccpo_reward_code",
        ClickRule(box_mode="any_candidate", distance_threshold=0.0, distance_to="nearest_target"),
        _CONTAINS,
        ArgumentRule(coordinate_text="if_present"),
        source="CCPO code gui_utils/utils_reward.py",
    ),
    # Co-EPG C-DREM: a grounding model's point hits the gt element box; without a box, within 0.14
    # of the gt point (our choice, not the paper's); value token F1 > 0.5.
    RuleSet(
        "coepg_reward",
        ClickRule(box_mode="gt_box", distance_threshold=0.14, distance_fallback="no_gt_box"),
        _F1_STRICT,
        ArgumentRule(coordinate_text="if_present"),
        source="Co-EPG Sec. 3 (C-DREM); 0.14 without a box is ours",
    ),
    # GUI-R1 reward (r1gui.py): inside the gt box with strict < when a box is given, else within
    # 0.14 of the gt point; select / type / open / answer text by F1 >= 0.5; scroll direction;
    # every other type (press, terminate, wait) on the type alone.
    RuleSet(
        "guir1_reward",
        ClickRule(box_mode="gt_box", box_strict=True, distance_threshold=0.14, distance_fallback="no_gt_box"),
        _F1,
        ArgumentRule(key_checked=False, terminate_status_checked=False),
        source="GUI-R1 verl/utils/reward_score/r1gui.py",
    ),
)

RULES: dict[str, RuleSet] = {r.name: r for r in (*_EVALUATORS, *_REWARDS)}

#: Named text rules used on their own (no click or argument decision).
TEXT_RULES: dict[str, TextRule] = {
    # MiniGUI answer tasks: the expected words appear contiguously in the agent's answer.
    "minigui_answer": TextRule("phrase"),
}


def get_rules(name: str | RuleSet) -> RuleSet:
    """The registered rule set called ``name`` (a :class:`RuleSet` is returned as is)."""
    if isinstance(name, RuleSet):
        return name
    try:
        return RULES[name]
    except KeyError:
        raise KeyError(f"unknown matching rule set {name!r}; registered: {sorted(RULES)}") from None


def get_text_rule(name: str | TextRule) -> TextRule:
    """The registered text rule called ``name`` (a :class:`TextRule` is returned as is)."""
    if isinstance(name, TextRule):
        return name
    try:
        return TEXT_RULES[name]
    except KeyError:
        raise KeyError(f"unknown text rule {name!r}; registered: {sorted(TEXT_RULES)}") from None


def rules_differ(a: str | RuleSet, b: str | RuleSet) -> list[str]:
    """The fields (``"click.box_mode"``, ``"text.kind"``, ...) in which two rule sets differ."""
    ra, rb = get_rules(a), get_rules(b)
    out: list[str] = []
    for part in ("click", "text", "args"):
        pa, pb = getattr(ra, part), getattr(rb, part)
        for f in pa.__dataclass_fields__:
            if getattr(pa, f) != getattr(pb, f):
                out.append(f"{part}.{f}")
    return out
