"""Frozen copy of ``lib/guirl/metrics/protocols.py`` at commit c7e8c23 (before the matching engine); tests only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BoxMode = Literal["none", "gt_box", "containing_gt", "nearest_k", "any_candidate", "same_box"]
TextRule = Literal["contains", "contains_or_anls", "contains_or_ratio", "f1", "exact"]

BOX_MODES: tuple[str, ...] = ("none", "gt_box", "containing_gt", "nearest_k", "any_candidate", "same_box")
TEXT_RULES: tuple[str, ...] = ("contains", "contains_or_anls", "contains_or_ratio", "f1", "exact")


@dataclass(frozen=True)
class Protocol:
    """How one public evaluator decides that a predicted step matches the ground truth.

    Attributes:
        name: registry key.
        box_mode: which boxes make a click correct (module docstring).
        box_enlarge: factor by which boxes are scaled about their centre before the
            inside test (1.0 = as annotated).
        nearest_k: number of nearest candidate boxes for ``box_mode="nearest_k"``.
        distance_threshold: fallback radius in normalised screen units, or ``None``.
        distance_strict: compare with ``<`` instead of ``<=``.
        text_rule / text_threshold: how type / answer / open_app / select text is
            compared (module docstring).
        scroll_convention: ``"finger"`` or ``"content"``; both directions are converted
            to it with :meth:`guirl.actions.Action.in_convention` before comparison.
        scroll_direction_checked: ``False`` when the evaluator accepts any scroll
            direction once the type matches.
        scroll_note: what the original code does to directions (e.g. an up/down flip).
        terminate_status_checked: whether terminate ``success``/``fail`` must match.
        wait_as_terminate: the evaluator maps wait to the same "stop" class as terminate.
        long_press_as_click: long press and click are one action type.
        open_app_click_ok: a click inside the app icon's box counts for an open_app step.
        coordinates: the coordinate space the original evaluator reads.
        source: where every number comes from.
    """

    name: str
    box_mode: BoxMode = "none"
    box_enlarge: float = 1.0
    nearest_k: int | None = None
    distance_threshold: float | None = None
    distance_strict: bool = False
    text_rule: TextRule = "contains"
    text_threshold: float = 0.5
    scroll_convention: Literal["finger", "content"] = "finger"
    scroll_direction_checked: bool = True
    scroll_note: str = ""
    terminate_status_checked: bool = True
    wait_as_terminate: bool = False
    long_press_as_click: bool = False
    open_app_click_ok: bool = False
    coordinates: str = "normalised [0,1]"
    source: str = ""

    def __post_init__(self) -> None:
        if self.box_mode not in BOX_MODES:
            raise ValueError(f"Protocol {self.name!r}: box_mode {self.box_mode!r} not in {BOX_MODES}")
        if self.text_rule not in TEXT_RULES:
            raise ValueError(f"Protocol {self.name!r}: text_rule {self.text_rule!r} not in {TEXT_RULES}")
        if self.box_mode == "nearest_k" and (self.nearest_k is None or self.nearest_k < 1):
            raise ValueError(f"Protocol {self.name!r}: box_mode 'nearest_k' needs nearest_k >= 1")
        if self.box_enlarge <= 0:
            raise ValueError(f"Protocol {self.name!r}: box_enlarge must be > 0, got {self.box_enlarge}")
        if self.distance_threshold is not None and self.distance_threshold < 0:
            raise ValueError(f"Protocol {self.name!r}: distance_threshold must be >= 0")
        if self.box_mode == "none" and self.distance_threshold is None:
            raise ValueError(f"Protocol {self.name!r}: no box rule and no distance threshold")


PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        # AgentCPM-GUI, eval/utils/evaluator.py (OpenBMB/AgentCPM-GUI): candidate boxes
        # enlarged 1.2x ("aitz and qwen 2.5 vl set it to 1.2"), keep those containing the
        # gt point, else _TAP_DISTANCE_THRESHOLD = 0.14; coordinates [0,1000]; scroll
        # direction from start->end of the predicted swipe = finger direction; every stop
        # status (finish/satisfied/impossible/...) and wait ("pause and wait") map to
        # "stop", matched without comparing the status; "long_point" is its own type;
        # text: containment after lower/strip ("align with Qwen-2.5-VL eval").
        Protocol(
            name="agentcpm",
            box_mode="containing_gt",
            box_enlarge=1.2,
            distance_threshold=0.14,
            text_rule="contains",
            scroll_convention="finger",
            scroll_note="compares the finger direction of start->end; AndroidControl content directions are converted",
            terminate_status_checked=False,
            wait_as_terminate=True,
            coordinates="[0,1000]",
            source="AgentCPM-GUI eval/utils/evaluator.py: 1.2x boxes containing gt, else 0.14",
        ),
        # Same file, eval_android_control=True: the 5 candidate boxes whose centres are
        # nearest the gt point (obtain_gt_bbox ... sorted_boxes[:5]), enlarged 1.2x, else
        # _TAP_DISTANCE_THRESHOLD_AC = 0.04 ("align with qwen's code").
        Protocol(
            name="agentcpm_androidcontrol",
            box_mode="nearest_k",
            box_enlarge=1.2,
            nearest_k=5,
            distance_threshold=0.04,
            text_rule="contains",
            scroll_convention="finger",
            scroll_note="as agentcpm",
            terminate_status_checked=False,
            wait_as_terminate=True,
            coordinates="[0,1000]",
            source="AgentCPM-GUI eval/utils/evaluator.py (eval_android_control): 5 nearest 1.2x boxes, else 0.04",
        ),
        # GUI-Odyssey: inside the gt box or within 0.14; text containment or ANLS >= 0.5;
        # coordinates [0,1000] (docs/evaluator-conventions.md).
        Protocol(
            name="guiodyssey",
            box_mode="gt_box",
            distance_threshold=0.14,
            text_rule="contains_or_anls",
            text_threshold=0.5,
            scroll_convention="finger",
            coordinates="[0,1000]",
            source="GUI-Odyssey evaluator (stack-facts): in box or 0.14; contains or ANLS>=0.5",
        ),
        # UI-S1, UI-S1/evaluation/qwenvl_utils.py (X-PLUG/MobileAgent):
        # BBOX_ENLARGE_FACTOR = 1.2 over candidate_bbox, POINT_DISTANCE_THRESHOLD = 0.04;
        # check_text = containment after lower/strip; long_press must equal long_press;
        # wait must equal wait; open_app also accepts a click inside the app's first
        # candidate box; swipe: type match suffices (direction check commented out: "the
        # down up is wrong in gt"); its RL reward flips up/down instead.
        Protocol(
            name="uis1",
            box_mode="any_candidate",
            box_enlarge=1.2,
            distance_threshold=0.04,
            text_rule="contains",
            scroll_convention="finger",
            scroll_direction_checked=False,
            scroll_note="eval ignores direction; the reward flips gt up/down (content -> finger)",
            open_app_click_ok=True,
            coordinates="pixels / (width, height)",
            source="UI-S1 evaluation/qwenvl_utils.py: 1.2x candidate box or 0.04",
        ),
        # GUI-R1 r1gui_accuracy_reward: gt point, (dx/W)^2 + (dy/H)^2 < 0.14^2 (strict);
        # open/type/system_button via calculate_f1_score >= 0.5; scroll direction compared;
        # other types (terminate, wait, ...) count on type alone.
        Protocol(
            name="guir1",
            box_mode="none",
            distance_threshold=0.14,
            distance_strict=True,
            text_rule="f1",
            text_threshold=0.5,
            scroll_convention="finger",
            terminate_status_checked=False,
            coordinates="pixels / (width, height)",
            source="GUI-R1 r1gui_accuracy_reward: within 0.14 (strict), F1>=0.5",
        ),
        # AITW action_matching.check_actions_match (google-research/android_in_the_wild):
        # tap correct if both taps fall in one ui_positions box (AITZ and Qwen2.5-VL use a
        # 1.2x enlargement, AITW 1.4x: AgentCPM-GUI evaluator comment) or within
        # _TAP_DISTANCE_THRESHOLD = 0.14. Typed text, AITZ CoAT coat/evaluate.py:
        # containment or Levenshtein ratio > 0.8; stop matched without status; scroll
        # compared by its description ("scroll down" = content direction in AITW's
        # action2json: touch y 0.8 -> lift y 0.2).
        Protocol(
            name="aitz",
            box_mode="same_box",
            box_enlarge=1.2,
            distance_threshold=0.14,
            text_rule="contains_or_ratio",
            text_threshold=0.8,
            scroll_convention="content",
            terminate_status_checked=False,
            coordinates="normalised (y, x) [0,1]",
            source="AITW action_matching (same box or 0.14); AITZ CoAT evaluate.py (contains or ratio>0.8)",
        ),
        # Mind2Web (MindAct; SeeClick's visual variant): element correct when the chosen
        # element is the gt element (visual: click inside its box); step success needs the
        # operation string to match (op F1 == 1). See guirl.metrics.mind2web for Op.F1.
        Protocol(
            name="mind2web",
            box_mode="gt_box",
            distance_threshold=None,
            text_rule="f1",
            text_threshold=1.0,
            scroll_convention="content",
            long_press_as_click=True,  # the web has no long press; Mind2Web ops are CLICK/TYPE/SELECT
            coordinates="pixels of the page screenshot",
            source="Mind2Web (Deng et al. 2023) Sec. 4; SeeClick mind2web eval: click in gt box, op F1==1",
        ),
        # CES reward: inside the gt box or within 0.14; text token F1 >= 0.5
        # (docs/evaluator-conventions.md).
        Protocol(
            name="ces",
            box_mode="gt_box",
            distance_threshold=0.14,
            text_rule="f1",
            text_threshold=0.5,
            scroll_convention="finger",
            coordinates="pixels / (width, height)",
            source="CES reward (stack-facts): in box or 0.14; F1>=0.5",
        ),
        # CCPO code: within 0.1 of the gt point (docs/evaluator-conventions.md).
        Protocol(
            name="ccpo",
            box_mode="none",
            distance_threshold=0.1,
            text_rule="f1",
            text_threshold=0.5,
            scroll_convention="finger",
            coordinates="pixels / (width, height)",
            source="CCPO code (stack-facts): within 0.1",
        ),
        # Co-EPG reports AndroidControl / Mind2Web; its text rule is token F1 >= 0.5
        # (stack-facts); clicks follow the GUI-R1 style distance rule.
        Protocol(
            name="coepg",
            box_mode="gt_box",
            distance_threshold=0.14,
            text_rule="f1",
            text_threshold=0.5,
            scroll_convention="finger",
            coordinates="pixels / (width, height)",
            source="Co-EPG (stack-facts): F1>=0.5; click rule assumed in box or 0.14",
        ),
    )
}


def get_protocol(name: str | Protocol) -> Protocol:
    """The registered protocol called ``name`` (a :class:`Protocol` is returned as is)."""
    if isinstance(name, Protocol):
        return name
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r}; registered: {sorted(PROTOCOLS)}") from None
