"""Matching rules as data: when a click, a text and the other arguments of a step count as right.

A :class:`RuleSet` bundles three frozen records, one per kind of decision, that
:func:`guirl.matching.match_step` interprets. Nothing in the engine branches on a rule set's
*name*: an evaluator protocol (:mod:`guirl.metrics.protocols`) and a reward
(``guirl.methods.<paper>.reward``) differ only in the records they pass. Every field has a
default that leaves the decision as it was before the field existed, so a rule set states only
what its evaluator does differently; the registry (:mod:`guirl.matching.registry`) says beside
every value which original code it reproduces.

Units: points and boxes are normalised to ``[0, 1]`` by the screenshot's width and height
(:mod:`guirl.actions.types`); a box is ``(x1, y1, x2, y2)``; distances are Euclidean in that
per-axis normalised space unless ``ClickRule.units`` says the original computed its click rule in
pixels or on the ``[0, 1000]`` grid (then the threshold is in those units and the engine converts
points and boxes, rounding to ``unit_decimals`` to recover the original's integer grid exactly).

Click rules (:class:`ClickRule`). The box rule is tried first, then the distance fallback.
``box_mode`` names the boxes inside which a predicted point is right:

* ``"none"``: no box; distance only.
* ``"gt_box"``: the ground-truth element box.
* ``"any_candidate"``: any candidate box or the gt box (UI-S1 ``candidate_bbox``).
* ``"containing_gt"``: any candidate box (or the gt box) that contains the gt point
  (AgentCPM-GUI).
* ``"nearest_k"``: the ``nearest_k`` candidate boxes (or the gt box) whose centres are nearest
  the gt point (AgentCPM-GUI, AndroidControl mode).
* ``"same_box"``: prediction and gt point inside one common candidate box (AITW/AITZ
  ``ui_positions``).
* ``"pred_box"``: the *predicted* element box (``Action.extra["box"]``, normalised) contains the
  gt point, or a candidate box containing the gt point overlaps the predicted box with IoU
  ``> pred_box_iou`` (CoAT's ``_check_click_``; both boxes enlarged).
* ``"smallest_element"``: the smallest candidate box containing the predicted point is the
  smallest candidate box containing the gt point (area, edges included, the first listed wins a
  tie; a point inside no box is wrong) -- UGround's element mapping, stated by Co-EPG.

``box_enlarge`` scales boxes before the inside test; ``None`` uses them as annotated.
``box_enlarge_mode`` says how: ``"centre"`` about the centre (:func:`guirl.geometry.enlarge_box`;
a factor of 1.0 is the identity), ``"shift"`` as AgentCPM-GUI / AITW code it on ``(y, x, h, w)``
(the size grows by ``(f - 1) x size``, the top-left corner moves by half of that but not below 0,
the size is capped at 1: a box near the top or left edge is shifted, not clipped), and
``"shift_fraction"`` the same with a growth of ``f x size`` (AITW's ``_resize_annotation_bounding_boxes``:
1.4 grows a box to 2.4x). ``box_round`` rounds the (enlarged) box's normalised coordinates to
that many decimals (SeeClick), ``point_round`` the predicted point's (CCPO's Mind2Web and AITW
glue). ``box_strict`` excludes the edges (``<`` instead of ``<=``).

The fallback accepts a point whose distance is ``<= distance_threshold`` (``<`` when
``distance_strict``); ``distance_fallback`` says whether it always applies or only when the step
has no gt box; ``distance_to`` says what the distance is measured to: the gt point (else the gt
box centre), the nearest target (the gt point or any box of the rule, 0 inside one), or the gt
box's top-left corner when a gt box is given (GUI-R1's ``gt_bbox[0:2]``). ``distance_formula``:
``"hypot"`` (:func:`math.hypot`), ``"sqrt_sum"`` (``sqrt(dx*dx + dy*dy)``, numpy's norm) or
``"squared"`` (``dx*dx + dy*dy`` against the squared threshold, CES / GUI-R1): the three agree
except in the last bit, which decides points exactly at the threshold. ``gt_point``:
``"annotated"``, or ``"origin"`` (CoAT's released evaluator never sets a click's gt point: it is
``(0, 0)``).

Text rules (:class:`TextRule`). ``normalize`` says what both strings go through first:
``"collapse"`` (lower-case, strip, collapse white space: :func:`guirl.textmatch.normalize_text`),
``"lower_strip"``, ``"strip"`` (case kept) or ``"none"``. ``None`` on either side never matches.

* ``"contains"``: either string contains the other (an empty string matches only an empty one,
  unless ``empty_contained``: Python's ``"" in s`` is true for every ``s``);
* ``"exact"``: equal;
* ``"f1"``: token F1 (``\\w+`` tokens, multiset) ``>= threshold`` (``>`` when ``strict``);
* ``"set_f1"``: F1 of the sets of white-space separated tokens (the public evaluators' own
  ``calculate_f1_score``); ``single_token_contains``: two one-token strings that contain each
  other score 1 (GUI-R1); ``strip_brackets`` removes ``[`` and ``]`` first (GUI-R1);
* ``"contains_or_anls"``: contains, or ``1 - lev / max(len) >= threshold`` (``>`` when ``strict``);
* ``"contains_or_ratio"``: contains, or Levenshtein ratio ``>= threshold`` (``>`` when ``strict``);
* ``"phrase"``: the gt's ``[a-z0-9]+`` words appear contiguously, in order, in the prediction's
  (one-directional; an empty gt never matches).

Argument rules (:class:`ArgumentRule`): scroll direction compared in a named convention, from
the start/end points, on the axis only, as text, or not at all; system key; terminate status;
wait duration; which coordinate steps also compare their text; type merges; whether the type
must match at all; which gt types are not counted, cannot be scored, or need the point checked;
UI-S1's "a click on the app icon opens the app"; Mind2Web's operation strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from guirl.actions.types import ActionType

__all__ = [
    "BoxMode",
    "TextKind",
    "Units",
    "BOX_MODES",
    "TEXT_KINDS",
    "UNITS",
    "SCROLL_MATCHES",
    "WAIT_AS_TERMINATE",
    "LONG_PRESS_AS_CLICK",
    "ClickRule",
    "TextRule",
    "ArgumentRule",
    "RuleSet",
]

BoxMode = Literal[
    "none", "gt_box", "any_candidate", "containing_gt", "nearest_k", "same_box", "pred_box", "smallest_element"
]
TextKind = Literal["contains", "exact", "f1", "set_f1", "contains_or_anls", "contains_or_ratio", "phrase"]
Units = Literal["normalised", "pixels", "thousand"]
ScrollMatch = Literal["direction", "finger_points", "angle_points", "axis", "text"]

BOX_MODES: tuple[str, ...] = (
    "none",
    "gt_box",
    "any_candidate",
    "containing_gt",
    "nearest_k",
    "same_box",
    "pred_box",
    "smallest_element",
)
TEXT_KINDS: tuple[str, ...] = ("contains", "exact", "f1", "set_f1", "contains_or_anls", "contains_or_ratio", "phrase")
UNITS: tuple[str, ...] = ("normalised", "pixels", "thousand")
SCROLL_MATCHES: tuple[str, ...] = ("direction", "finger_points", "angle_points", "axis", "text")
_ENLARGE_MODES = ("centre", "shift", "shift_fraction")
_DISTANCE_TO = ("point", "nearest_target", "box_top_left")
_FORMULAS = ("hypot", "sqrt_sum", "squared")
_NORMALIZE = ("collapse", "lower_strip", "strip", "none")
_TYPE_VALUES: tuple[str, ...] = tuple(t.value for t in ActionType)

#: Type merge: a wait step and a terminate step are one "stop" class (AgentCPM-GUI evaluator).
WAIT_AS_TERMINATE: tuple[str, str] = ("wait", "terminate")
#: Type merge: long press and click are one type (the web has no long press).
LONG_PRESS_AS_CLICK: tuple[str, str] = ("long_press", "click")


def _check_choice(owner: str, name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{owner}: {name} {value!r} not in {choices}")


def _check_types(owner: str, name: str, values: tuple[str, ...]) -> tuple[str, ...]:
    vals = tuple(values)
    bad = [v for v in vals if v not in _TYPE_VALUES]
    if bad:
        raise ValueError(f"{owner}: {name} {bad} are not action types {_TYPE_VALUES}")
    return vals


@dataclass(frozen=True)
class ClickRule:
    """When a predicted point hits the ground truth (module docstring).

    Attributes:
        box_mode: which boxes make a click right.
        box_enlarge: factor by which boxes are scaled; ``None``: as annotated.
        box_enlarge_mode: ``"centre"``, ``"shift"`` or ``"shift_fraction"`` (module docstring).
        box_strict: exclude the box edges from "inside".
        box_round: decimals the normalised box coordinates are rounded to (``None``: none).
        nearest_k: number of boxes for ``box_mode="nearest_k"``.
        pred_box_iou: IoU a candidate box containing the gt point must exceed with the
            predicted box (``box_mode="pred_box"``).
        point_round: decimals the predicted normalised point is rounded to (``None``: none).
        gt_point: ``"annotated"`` or ``"origin"`` (the gt point of a click is ``(0, 0)``).
        gt_box_required: a click step without a gt box is wrong (GUI-Odyssey unpacks an empty
            ``sam2_bbox`` and fails).
        distance_threshold: fallback radius in ``units``; ``None``: no fallback.
        distance_strict: compare the distance with ``<`` instead of ``<=``.
        distance_fallback: ``"always"``, or ``"no_gt_box"`` (only for steps without a gt box).
        distance_to: ``"point"`` (the gt point, else the gt box centre), ``"nearest_target"``
            (the gt point or the nearest box of the rule, 0 inside a box) or ``"box_top_left"``
            (the gt box's top-left corner when given, else the gt point).
        units: the units the original computes the click rule in: ``"normalised"``,
            ``"pixels"`` (needs the screen size) or ``"thousand"``; points, boxes and the
            threshold are in these units.
        unit_decimals: decimals points and boxes are rounded to in ``units`` (``None``: none),
            which recovers the original's integer grid exactly.
        iou_min_area: floor of each box's area in the IoU of ``box_mode="pred_box"`` (CoAT: 1
            square pixel).
        distance_formula: ``"hypot"``, ``"sqrt_sum"`` or ``"squared"`` (module docstring).
    """

    box_mode: BoxMode = "none"
    box_enlarge: float | None = None
    box_enlarge_mode: Literal["centre", "shift", "shift_fraction"] = "centre"
    box_strict: bool = False
    box_round: int | None = None
    nearest_k: int | None = None
    pred_box_iou: float = 0.5
    point_round: int | None = None
    gt_point: Literal["annotated", "origin"] = "annotated"
    gt_box_required: bool = False
    distance_threshold: float | None = None
    distance_strict: bool = False
    distance_fallback: Literal["always", "no_gt_box"] = "always"
    distance_to: Literal["point", "nearest_target", "box_top_left"] = "point"
    units: Units = "normalised"
    unit_decimals: int | None = None
    iou_min_area: float = 0.0
    distance_formula: Literal["hypot", "sqrt_sum", "squared"] = "hypot"

    def __post_init__(self) -> None:
        own = "ClickRule"
        _check_choice(own, "box_mode", self.box_mode, BOX_MODES)
        if self.box_mode == "nearest_k" and (self.nearest_k is None or self.nearest_k < 1):
            raise ValueError("ClickRule: box_mode 'nearest_k' needs nearest_k >= 1")
        if self.box_enlarge is not None and self.box_enlarge <= 0:
            raise ValueError(f"ClickRule: box_enlarge must be > 0 (or None), got {self.box_enlarge}")
        _check_choice(own, "box_enlarge_mode", self.box_enlarge_mode, _ENLARGE_MODES)
        if self.distance_threshold is not None and self.distance_threshold < 0:
            raise ValueError(f"ClickRule: distance_threshold must be >= 0, got {self.distance_threshold}")
        if self.box_mode == "none" and self.distance_threshold is None:
            raise ValueError("ClickRule: no box rule and no distance threshold: no click could ever be right")
        _check_choice(own, "distance_fallback", self.distance_fallback, ("always", "no_gt_box"))
        _check_choice(own, "distance_to", self.distance_to, _DISTANCE_TO)
        _check_choice(own, "units", self.units, UNITS)
        _check_choice(own, "distance_formula", self.distance_formula, _FORMULAS)
        _check_choice(own, "gt_point", self.gt_point, ("annotated", "origin"))
        if self.iou_min_area < 0:
            raise ValueError(f"ClickRule: iou_min_area must be >= 0, got {self.iou_min_area}")
        if not 0.0 <= self.pred_box_iou <= 1.0:
            raise ValueError(f"ClickRule: pred_box_iou must be in [0, 1], got {self.pred_box_iou}")
        for name in ("box_round", "point_round", "unit_decimals"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 0):
                raise ValueError(f"ClickRule: {name} must be a non-negative int (or None), got {v!r}")


@dataclass(frozen=True)
class TextRule:
    """How a predicted text argument is compared with the ground truth's (module docstring).

    Attributes:
        kind: the comparison.
        threshold: the score threshold of ``f1``, ``set_f1``, ``contains_or_anls`` and
            ``contains_or_ratio``.
        strict: compare the score with ``>`` instead of ``>=``.
        normalize: ``"collapse"``, ``"lower_strip"``, ``"strip"`` or ``"none"``.
        empty_contained: ``"contains"``: an empty string is contained in every string.
        single_token_contains: ``"set_f1"``: two one-token strings containing each other score 1.
        strip_brackets: ``"set_f1"``: remove ``[`` and ``]`` before tokenising.
        cut_at: keep only what precedes this string in both texts (GUI-Odyssey splits its answer
            strings at ``:``, so ``TYPE: 10:30`` types ``10``).
    """

    kind: TextKind = "contains"
    threshold: float = 0.5
    strict: bool = False
    normalize: Literal["collapse", "lower_strip", "strip", "none"] = "collapse"
    empty_contained: bool = False
    single_token_contains: bool = False
    strip_brackets: bool = False
    cut_at: str | None = None

    def __post_init__(self) -> None:
        _check_choice("TextRule", "kind", self.kind, TEXT_KINDS)
        if self.cut_at == "":
            raise ValueError("TextRule: cut_at must be a non-empty string or None")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"TextRule: threshold must be in [0, 1], got {self.threshold}")
        _check_choice("TextRule", "normalize", self.normalize, _NORMALIZE)


@dataclass(frozen=True)
class ArgumentRule:
    """Which arguments beyond the point are compared, and which action types are one class.

    Attributes:
        scroll_convention: ``"finger"`` or ``"content"``: both directions are converted to it
            (:meth:`guirl.actions.Action.in_convention`) before comparison. Because every
            canonical scroll carries its convention, the result does not depend on the choice;
            it records what the original code compares.
        scroll_direction_checked: ``False``: any scroll direction is right once the type matches.
        scroll_match: how two scrolls are compared when the direction is checked:
            ``"direction"`` (the stated directions), ``"finger_points"`` (both need start and end
            points; the finger direction of each, dominant axis, a tie and a zero-length swipe
            vertical), ``"angle_points"`` (both need points; the angle of start -> end, right for
            -45..45 degrees, down for 45..135, left beyond 135, up otherwise), ``"axis"`` (only
            horizontal vs vertical) or ``"text"`` (the text rule on the actions' texts).
        scroll_units: units the ``*_points`` directions are computed in (``"pixels"`` changes
            which axis dominates on a non-square screen).
        scroll_unit_decimals: decimals the points are rounded to in ``scroll_units`` (``None``:
            none), which recovers the original's integer grid (and its ties) exactly.
        key_checked: a system-key press must name the gt key.
        terminate_status_checked: terminate ``success``/``fail`` must match.
        wait_duration_checked: a wait must have the gt's duration (CCPO's dict equality).
        text_checked: type / answer / open_app steps compare their text (``False``: the type
            alone, AITW).
        coordinate_text: which coordinate steps also compare their text: ``"select"`` (only a
            select's option text, the evaluators) or ``"if_present"`` (any coordinate gt that
            carries a text, the rewards).
        type_merges: ``(from, to)`` pairs of :class:`~guirl.actions.ActionType` values mapped to
            one class before the type comparison (:data:`WAIT_AS_TERMINATE`,
            :data:`LONG_PRESS_AS_CLICK`). A merged terminate step is matched without its status.
        type_required: ``False``: a step is right on its arguments alone (GUI-R1 scores a click
            step by the point whatever the predicted type).
        grounded_types: gt types whose point must pass the click rule (``None``: every
            coordinate type; Mind2Web also checks the element of TYPE and ENTER steps).
        uncounted_types: gt types the original leaves out of the step-success denominator
            (:attr:`StepMatch.counted` is ``False``).
        unscored_types: gt types the original cannot score (it raises): always wrong.
        needs_screen_boxes: the original fails on a screen without element boxes, whatever the
            action (AITW's ``annot_position``): such a step is wrong.
        skip_gt_text_with: a gt whose text contains this string is skipped by the original
            (SeeClick's reference string does not parse): not counted.
        op_codes: Mind2Web operation strings: ``(type, code)`` pairs; when given, a step is
            compared as ``"<code>"`` (click-like types) or ``"<code> <text lower-cased>"`` (types in
            ``op_value_types``) with the text rule, and the type class is the code.
        op_value_types: the types whose operation string carries the text.
        open_app_click_ok: a click inside the app icon's box (the first candidate box, else the
            gt box) solves an open_app step (UI-S1).
    """

    scroll_convention: Literal["finger", "content"] = "finger"
    scroll_direction_checked: bool = True
    scroll_match: ScrollMatch = "direction"
    scroll_units: Units = "normalised"
    scroll_unit_decimals: int | None = None
    key_checked: bool = True
    terminate_status_checked: bool = True
    wait_duration_checked: bool = False
    text_checked: bool = True
    coordinate_text: Literal["select", "if_present"] = "select"
    type_merges: tuple[tuple[str, str], ...] = ()
    type_required: bool = True
    grounded_types: tuple[str, ...] | None = None
    uncounted_types: tuple[str, ...] = ()
    unscored_types: tuple[str, ...] = ()
    needs_screen_boxes: bool = False
    skip_gt_text_with: str | None = None
    op_codes: tuple[tuple[str, str], ...] = ()
    op_value_types: tuple[str, ...] = ("type", "select")
    open_app_click_ok: bool = False

    def __post_init__(self) -> None:
        own = "ArgumentRule"
        _check_choice(own, "scroll_convention", self.scroll_convention, ("finger", "content"))
        _check_choice(own, "coordinate_text", self.coordinate_text, ("select", "if_present"))
        _check_choice(own, "scroll_match", self.scroll_match, SCROLL_MATCHES)
        _check_choice(own, "scroll_units", self.scroll_units, UNITS)
        merges = tuple(tuple(m) for m in self.type_merges)
        for m in merges:
            if len(m) != 2 or not all(v in _TYPE_VALUES for v in m):
                raise ValueError(f"ArgumentRule: type merge {m!r} must be two action types from {_TYPE_VALUES}")
        sources = [a for a, _ in merges]
        if len(set(sources)) != len(sources) or any(b in sources for _, b in merges):
            raise ValueError(f"ArgumentRule: type_merges {merges!r} must map each type once, without chains")
        object.__setattr__(self, "type_merges", merges)
        if self.grounded_types is not None:
            object.__setattr__(self, "grounded_types", _check_types(own, "grounded_types", self.grounded_types))
        for name in ("uncounted_types", "unscored_types", "op_value_types"):
            object.__setattr__(self, name, _check_types(own, name, getattr(self, name)))
        codes = tuple(tuple(c) for c in self.op_codes)
        for c in codes:
            if len(c) != 2 or c[0] not in _TYPE_VALUES or not isinstance(c[1], str) or not c[1].strip():
                raise ValueError(f"ArgumentRule: op code {c!r} must be (action type, non-empty code)")
        object.__setattr__(self, "op_codes", codes)
        if self.skip_gt_text_with == "":
            raise ValueError("ArgumentRule: skip_gt_text_with must be a non-empty string or None")

    def type_class(self, t: ActionType) -> str:
        """The class an action type is compared as: its operation code when ``op_codes`` is
        given (an unlisted type is its own class), else its value unless merged."""
        if self.op_codes:
            return dict(self.op_codes).get(t.value, f"<{t.value}>")
        return dict(self.type_merges).get(t.value, t.value)


@dataclass(frozen=True)
class RuleSet:
    """A named bundle of click, text and argument rules (:data:`guirl.matching.RULES`).

    ``source`` says in one line where the rules come from (paper section, released code).
    """

    name: str
    click: ClickRule
    text: TextRule = field(default_factory=TextRule)
    args: ArgumentRule = field(default_factory=ArgumentRule)
    source: str = ""

    def __post_init__(self) -> None:
        for attr, cls in (("click", ClickRule), ("text", TextRule), ("args", ArgumentRule)):
            if not isinstance(getattr(self, attr), cls):
                raise TypeError(f"RuleSet {self.name!r}: {attr} must be a {cls.__name__}")
