"""Matching rules as data: when a click, a text and the other arguments of a step count as right.

A :class:`RuleSet` bundles three frozen records, one per kind of decision, that
:func:`guirl.matching.match_step` interprets. Nothing in the engine branches on a rule set's
*name*: an evaluator protocol (:mod:`guirl.metrics.protocols`) and a reward
(``guirl.methods.<paper>.reward``) differ only in the records they pass.

Units: points and boxes are normalised to ``[0, 1]`` by the screenshot's width and height
(:mod:`guirl.actions.types`); a box is ``(x1, y1, x2, y2)``; distances are Euclidean in that
per-axis normalised space.

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

``box_enlarge`` scales every box about its centre before the inside test
(:func:`guirl.geometry.enlarge_box`); ``None`` uses the boxes as annotated, with no arithmetic.
(``enlarge_box(b, 1.0)`` is not bit-exact in floating point, so ``1.0`` and ``None`` can differ
for a point on a box edge; the evaluator protocols keep ``1.0`` as they always had.)
``box_strict`` excludes the edges (``<`` instead of ``<=``). The fallback accepts a point whose
distance is ``<= distance_threshold`` (``<`` when ``distance_strict``); ``distance_fallback``
says whether it always applies or only when the step has no gt box; ``distance_to`` says what
the distance is measured to: the gt point (else the gt box centre), or the nearest target
(the gt point or any box of the rule, 0 inside one).

Text rules (:class:`TextRule`), on lower-cased, stripped, space-collapsed strings
(:func:`guirl.textmatch.normalize_text`); ``None`` on either side never matches:

* ``"contains"``: either string contains the other;
* ``"exact"``: equal;
* ``"f1"``: token F1 ``>= threshold`` (``>`` when ``strict``);
* ``"contains_or_anls"``: contains, or ANLS ``>= threshold`` (``>`` when ``strict``);
* ``"contains_or_ratio"``: contains, or Levenshtein ratio ``>= threshold`` (``>`` when ``strict``);
* ``"phrase"``: the gt's ``[a-z0-9]+`` words appear contiguously, in order, in the prediction's
  (one-directional; an empty gt never matches).

Argument rules (:class:`ArgumentRule`): scroll direction compared in a named convention (or not
at all), system key, terminate status, which coordinate steps also compare their text, type
merges (wait -> terminate, long press -> click) and UI-S1's "a click on the app icon opens the
app".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from guirl.actions.types import ActionType

__all__ = [
    "BoxMode",
    "TextKind",
    "BOX_MODES",
    "TEXT_KINDS",
    "WAIT_AS_TERMINATE",
    "LONG_PRESS_AS_CLICK",
    "ClickRule",
    "TextRule",
    "ArgumentRule",
    "RuleSet",
]

BoxMode = Literal["none", "gt_box", "any_candidate", "containing_gt", "nearest_k", "same_box"]
TextKind = Literal["contains", "exact", "f1", "contains_or_anls", "contains_or_ratio", "phrase"]

BOX_MODES: tuple[str, ...] = ("none", "gt_box", "any_candidate", "containing_gt", "nearest_k", "same_box")
TEXT_KINDS: tuple[str, ...] = ("contains", "exact", "f1", "contains_or_anls", "contains_or_ratio", "phrase")
_TYPE_VALUES: tuple[str, ...] = tuple(t.value for t in ActionType)

#: Type merge: a wait step and a terminate step are one "stop" class (AgentCPM-GUI evaluator).
WAIT_AS_TERMINATE: tuple[str, str] = ("wait", "terminate")
#: Type merge: long press and click are one type (the web has no long press).
LONG_PRESS_AS_CLICK: tuple[str, str] = ("long_press", "click")


@dataclass(frozen=True)
class ClickRule:
    """When a predicted point hits the ground truth (module docstring).

    Attributes:
        box_mode: which boxes make a click right.
        box_enlarge: factor by which boxes are scaled about their centre; ``None``: as annotated.
        box_strict: exclude the box edges from "inside".
        nearest_k: number of boxes for ``box_mode="nearest_k"``.
        distance_threshold: fallback radius in normalised screen units; ``None``: no fallback.
        distance_strict: compare the distance with ``<`` instead of ``<=``.
        distance_fallback: ``"always"``, or ``"no_gt_box"`` (only for steps without a gt box).
        distance_to: ``"point"`` (the gt point, else the gt box centre) or ``"nearest_target"``
            (the gt point or the nearest box of the rule, 0 inside a box).
    """

    box_mode: BoxMode = "none"
    box_enlarge: float | None = None
    box_strict: bool = False
    nearest_k: int | None = None
    distance_threshold: float | None = None
    distance_strict: bool = False
    distance_fallback: Literal["always", "no_gt_box"] = "always"
    distance_to: Literal["point", "nearest_target"] = "point"

    def __post_init__(self) -> None:
        if self.box_mode not in BOX_MODES:
            raise ValueError(f"ClickRule: box_mode {self.box_mode!r} not in {BOX_MODES}")
        if self.box_mode == "nearest_k" and (self.nearest_k is None or self.nearest_k < 1):
            raise ValueError("ClickRule: box_mode 'nearest_k' needs nearest_k >= 1")
        if self.box_enlarge is not None and self.box_enlarge <= 0:
            raise ValueError(f"ClickRule: box_enlarge must be > 0 (or None), got {self.box_enlarge}")
        if self.distance_threshold is not None and self.distance_threshold < 0:
            raise ValueError(f"ClickRule: distance_threshold must be >= 0, got {self.distance_threshold}")
        if self.box_mode == "none" and self.distance_threshold is None:
            raise ValueError("ClickRule: no box rule and no distance threshold: no click could ever be right")
        if self.distance_fallback not in ("always", "no_gt_box"):
            raise ValueError(f"ClickRule: distance_fallback {self.distance_fallback!r} not in ('always', 'no_gt_box')")
        if self.distance_to not in ("point", "nearest_target"):
            raise ValueError(f"ClickRule: distance_to {self.distance_to!r} not in ('point', 'nearest_target')")


@dataclass(frozen=True)
class TextRule:
    """How a predicted text argument is compared with the ground truth's (module docstring).

    Attributes:
        kind: the comparison.
        threshold: the score threshold of ``f1``, ``contains_or_anls`` and ``contains_or_ratio``.
        strict: compare the score with ``>`` instead of ``>=``.
    """

    kind: TextKind = "contains"
    threshold: float = 0.5
    strict: bool = False

    def __post_init__(self) -> None:
        if self.kind not in TEXT_KINDS:
            raise ValueError(f"TextRule: kind {self.kind!r} not in {TEXT_KINDS}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"TextRule: threshold must be in [0, 1], got {self.threshold}")


@dataclass(frozen=True)
class ArgumentRule:
    """Which arguments beyond the point are compared, and which action types are one class.

    Attributes:
        scroll_convention: ``"finger"`` or ``"content"``: both directions are converted to it
            (:meth:`guirl.actions.Action.in_convention`) before comparison. Because every
            canonical scroll carries its convention, the result does not depend on the choice;
            it records what the original code compares.
        scroll_direction_checked: ``False``: any scroll direction is right once the type matches.
        key_checked: a system-key press must name the gt key.
        terminate_status_checked: terminate ``success``/``fail`` must match.
        coordinate_text: which coordinate steps also compare their text: ``"select"`` (only a
            select's option text, the evaluators) or ``"if_present"`` (any coordinate gt that
            carries a text, the rewards).
        type_merges: ``(from, to)`` pairs of :class:`~guirl.actions.ActionType` values mapped to
            one class before the type comparison (:data:`WAIT_AS_TERMINATE`,
            :data:`LONG_PRESS_AS_CLICK`). A merged terminate step is matched without its status.
        open_app_click_ok: a click inside the app icon's box (the first candidate box, else the
            gt box) solves an open_app step (UI-S1).
    """

    scroll_convention: Literal["finger", "content"] = "finger"
    scroll_direction_checked: bool = True
    key_checked: bool = True
    terminate_status_checked: bool = True
    coordinate_text: Literal["select", "if_present"] = "select"
    type_merges: tuple[tuple[str, str], ...] = ()
    open_app_click_ok: bool = False

    def __post_init__(self) -> None:
        if self.scroll_convention not in ("finger", "content"):
            raise ValueError(f"ArgumentRule: scroll_convention {self.scroll_convention!r} not in ('finger', 'content')")
        if self.coordinate_text not in ("select", "if_present"):
            raise ValueError(f"ArgumentRule: coordinate_text {self.coordinate_text!r} not in ('select', 'if_present')")
        merges = tuple(tuple(m) for m in self.type_merges)
        for m in merges:
            if len(m) != 2 or not all(v in _TYPE_VALUES for v in m):
                raise ValueError(f"ArgumentRule: type merge {m!r} must be two action types from {_TYPE_VALUES}")
        sources = [a for a, _ in merges]
        if len(set(sources)) != len(sources) or any(b in sources for _, b in merges):
            raise ValueError(f"ArgumentRule: type_merges {merges!r} must map each type once, without chains")
        object.__setattr__(self, "type_merges", merges)

    def type_class(self, t: ActionType) -> str:
        """The class an action type is compared as (its value unless merged)."""
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
