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
    LONG_PRESS_AS_CLICK,
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

_EVALUATORS: tuple[RuleSet, ...] = (
    # AgentCPM-GUI eval/utils/evaluator.py: candidate boxes enlarged 1.2x ("aitz and qwen 2.5 vl
    # set it to 1.2"), kept when they contain the gt point, else _TAP_DISTANCE_THRESHOLD = 0.14;
    # text containment after lower/strip; every stop status and "pause and wait" map to one
    # "stop" class matched without the status; long press ("long_point") is its own type;
    # scroll direction from start->end of the swipe = finger direction.
    RuleSet(
        "agentcpm",
        ClickRule(box_mode="containing_gt", box_enlarge=1.2, distance_threshold=0.14),
        _CONTAINS,
        ArgumentRule(scroll_convention="finger", terminate_status_checked=False, type_merges=(WAIT_AS_TERMINATE,)),
        source="AgentCPM-GUI eval/utils/evaluator.py",
    ),
    # Same file, eval_android_control=True: the 5 candidate boxes whose centres are nearest the
    # gt point (obtain_gt_bbox ... sorted_boxes[:5]), enlarged 1.2x, else
    # _TAP_DISTANCE_THRESHOLD_AC = 0.04.
    RuleSet(
        "agentcpm_androidcontrol",
        ClickRule(box_mode="nearest_k", box_enlarge=1.2, nearest_k=5, distance_threshold=0.04),
        _CONTAINS,
        ArgumentRule(scroll_convention="finger", terminate_status_checked=False, type_merges=(WAIT_AS_TERMINATE,)),
        source="AgentCPM-GUI eval/utils/evaluator.py (eval_android_control)",
    ),
    # GUI-Odyssey (stack-facts): inside the gt box or within 0.14; containment or ANLS >= 0.5.
    RuleSet(
        "guiodyssey",
        ClickRule(box_mode="gt_box", box_enlarge=1.0, distance_threshold=0.14),
        TextRule("contains_or_anls", threshold=0.5),
        ArgumentRule(scroll_convention="finger"),
        source="GUI-Odyssey evaluator (stack-facts)",
    ),
    # UI-S1 evaluation/qwenvl_utils.py: BBOX_ENLARGE_FACTOR = 1.2 over candidate_bbox,
    # POINT_DISTANCE_THRESHOLD = 0.04; check_text = containment; long_press = long_press;
    # wait = wait; open_app also by a click inside the app's first candidate box; swipe: type
    # match suffices (direction check commented out, "the down up is wrong in gt").
    RuleSet(
        "uis1",
        ClickRule(box_mode="any_candidate", box_enlarge=1.2, distance_threshold=0.04),
        _CONTAINS,
        ArgumentRule(scroll_convention="finger", scroll_direction_checked=False, open_app_click_ok=True),
        source="UI-S1 evaluation/qwenvl_utils.py",
    ),
    # GUI-R1 r1gui_accuracy_reward as its evaluator: (dx/W)^2 + (dy/H)^2 < 0.14^2 (strict);
    # text by calculate_f1_score >= 0.5; scroll direction compared; stop on type alone.
    RuleSet(
        "guir1",
        ClickRule(box_mode="none", box_enlarge=1.0, distance_threshold=0.14, distance_strict=True),
        _F1,
        ArgumentRule(scroll_convention="finger", terminate_status_checked=False),
        source="GUI-R1 r1gui_accuracy_reward",
    ),
    # AITW action_matching.check_actions_match: both taps in one ui_positions box (AITZ and
    # Qwen2.5-VL enlarge 1.2x) or within _TAP_DISTANCE_THRESHOLD = 0.14; AITZ CoAT
    # coat/evaluate.py: containment or Levenshtein ratio > 0.8; stop without status; scroll
    # compared by its description ("scroll down" = content direction).
    RuleSet(
        "aitz",
        ClickRule(box_mode="same_box", box_enlarge=1.2, distance_threshold=0.14),
        TextRule("contains_or_ratio", threshold=0.8, strict=True),
        ArgumentRule(scroll_convention="content", terminate_status_checked=False),
        source="AITW action_matching.py; AITZ CoAT coat/evaluate.py",
    ),
    # Mind2Web (SeeClick's visual variant): click inside the gt element box, no distance
    # fallback; the select option must match exactly (op F1 == 1); no long press on the web.
    RuleSet(
        "mind2web",
        ClickRule(box_mode="gt_box", box_enlarge=1.0, distance_threshold=None),
        TextRule("f1", threshold=1.0),
        ArgumentRule(scroll_convention="content", type_merges=(LONG_PRESS_AS_CLICK,)),
        source="Mind2Web Sec. 4; SeeClick mind2web eval",
    ),
    # CES (stack-facts): inside the gt box or within 0.14; token F1 >= 0.5.
    RuleSet(
        "ces",
        ClickRule(box_mode="gt_box", box_enlarge=1.0, distance_threshold=0.14),
        _F1,
        ArgumentRule(scroll_convention="finger"),
        source="CES evaluator (stack-facts)",
    ),
    # CCPO code (stack-facts): within 0.1 of the gt point; token F1 >= 0.5.
    RuleSet(
        "ccpo",
        ClickRule(box_mode="none", box_enlarge=1.0, distance_threshold=0.1),
        _F1,
        ArgumentRule(scroll_convention="finger"),
        source="CCPO code (stack-facts)",
    ),
    # Co-EPG (stack-facts): token F1 >= 0.5; click rule assumed inside the gt box or within 0.14.
    RuleSet(
        "coepg",
        ClickRule(box_mode="gt_box", box_enlarge=1.0, distance_threshold=0.14),
        _F1,
        ArgumentRule(scroll_convention="finger"),
        source="Co-EPG (stack-facts); click rule assumed",
    ),
)

# The rewards compare every argument of a coordinate gt that carries one (coordinate_text
# "if_present") and use boxes as annotated (box_enlarge None) unless the code enlarges them.
_REWARDS: tuple[RuleSet, ...] = (
    # AgentCPM-GUI RFT reward as implemented (module guirl.methods.agentcpm.reward): inside the gt
    # box, else within 0.14 of the gt point; containment; status and key checked. The paper
    # (AgentCPM-GUI Sec. 2.5) states "inside the gt box" only (docs/metrics.md).
    RuleSet(
        "agentcpm_reward",
        ClickRule(box_mode="gt_box", distance_threshold=0.14),
        _CONTAINS,
        ArgumentRule(coordinate_text="if_present"),
        source="AgentCPM-GUI Sec. 2.5 with the evaluator's 0.14 fallback",
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
    # CES execution-feedback reward (CES eq. 25, code compute_match_score): inside a gt or
    # candidate box, else within 0.14 (CLICK_COORD_THRESHOLD); token F1 > 0.5
    # (TEXT_F1_THRESHOLD, strict); scroll direction (eq. 25); press key is part of the verb;
    # finished() has no status.
    RuleSet(
        "ces_reward",
        ClickRule(box_mode="any_candidate", distance_threshold=0.14),
        _F1_STRICT,
        ArgumentRule(terminate_status_checked=False, coordinate_text="if_present"),
        source="CES eq. 25; code verl/utils/reward_score/gui.py",
    ),
    # CES released code: scroll() has no argument, so any scroll direction scores 1.
    RuleSet(
        "ces_reward_code",
        ClickRule(box_mode="any_candidate", distance_threshold=0.14),
        _F1_STRICT,
        ArgumentRule(scroll_direction_checked=False, terminate_status_checked=False, coordinate_text="if_present"),
        source="CES code verl/utils/reward_score/gui.py (scroll without direction)",
    ),
    # CCPO reward as implemented (released code gui_utils/utils_reward.py): the distance is to the
    # nearest of the gt point and the gt/candidate boxes (0 inside a box), and the reward turns it
    # into credit (CCPO eq. 12's curve, guirl.methods.ccpo.reward); non-coordinate arguments by
    # containment (check_text). CCPO eq. 13 states exact match (docs/metrics.md). A click is
    # "right" (grounding) only on a target (distance 0); the credit curve and its tau_min are the
    # reward's (CCPOConfig).
    RuleSet(
        "ccpo_reward",
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
