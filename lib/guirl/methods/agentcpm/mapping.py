"""AgentCPM-GUI's unified action mapping across model families (AgentCPM-GUI App. B, Tables 6, 8-12).

AgentCPM-GUI evaluates every baseline in its own compact action space: each family's output is
converted (App. B, one mapping table per family; in the public eval code a per-family function of
``eval/run_predict_*.py`` read by ``eval/utils/evaluator.py::ActionEvaluator.action_map``).
:func:`to_unified` reproduces those rules on canonical actions, so that our metrics can score any
family the way the AgentCPM-GUI paper does.

``variant="paper"`` (default) follows the paper's tables where the released converters differ;
``variant="released"`` reproduces the released code (``docs/fidelity/agentcpm.md``):

* OS-Atlas scroll with the low-level instruction (Table 9, B.3.2; ACPM-30): reversed in the
  paper; the released converter compares a lower-cased word with ``"UP"``, so it never reverses;
* OdysseyAgent ``RECENT`` (B.5.2; ACPM-33): not in AgentCPM-GUI's action space and ignored in
  evaluation (:class:`IgnoredInEvaluation`); the released converter maps it to ``APPSELECT``;
* Aguvis ``mobile.terminate`` (Table 12; ACPM-34): ``{"STATUS": "finish"}`` whatever its status;
  the released converter keeps a failure as a failed stop.

Aguvis ``open_app`` (Table 12, B.6.2) is ignored in evaluation in both variants. The input is the :class:`Action` a family's parser produced (see
:mod:`guirl.actions.formats`); the output is an :class:`Action` in the unified space:

* points on the [0, 1000] grid (``int()`` truncation for Qwen2.5-VL as in ``qwen2_5_2_minicpm``,
  ``round`` for Aguvis as in its ``mapping_actions``; the others already write [0, 1000] ints);
* scroll = finger direction + start ``POINT`` (``[500, 500]`` when the family gives none);
  ``point2`` dropped (the evaluator compares directions only);
* long press = ``POINT`` with ``duration > 200`` ms (the schema default); a shorter one is a click;
* wait = ``duration`` alone (ms); terminate keeps success/fail (the evaluator treats both, and
  wait, as "stop").

Actions AgentCPM-GUI's converters cannot express (open app, answer, a Menu/RECENT key where the
converter drops or mis-spells it, Aguvis swipes/Enter) raise :class:`ActionError` with the
reason; the ones the paper says are ignored in evaluation raise its subclass
:class:`IgnoredInEvaluation` (leave the step out of the scores); :func:`try_to_unified` returns
``(None, reason)`` instead of raising.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from guirl.actions.types import OPPOSITE, Action, ActionError, ActionType

Variant = Literal["paper", "released"]
VARIANTS: tuple[str, ...] = ("paper", "released")


class IgnoredInEvaluation(ActionError):
    """An action AgentCPM-GUI leaves out of its scores (Odyssey RECENT, B.5.2; Aguvis open_app,
    B.6.2): the step is not counted, neither right nor wrong."""


#: AgentCPM-GUI schema default duration (``schema_for_extraction.json``): a POINT with a longer
#: duration is a long press, otherwise a click.
DEFAULT_DURATION_MS = 200

Family = Literal["agentcpm", "qwen_mobile_use", "uitars", "osatlas", "osgenesis", "odyssey", "aguvis"]


@dataclass(frozen=True)
class FamilyRule:
    """How AgentCPM-GUI's converter treats one family (values cite ``eval/run_predict_*.py``)."""

    #: Scroll-direction convention of the family's direction word (as our parser returns it).
    native_convention: str
    #: ``keep``: the word becomes AgentCPM's finger ``to`` as is; ``reverse``: it is flipped.
    scroll: Literal["keep", "reverse"]
    #: ``floor`` (``int(x)``) or ``round`` when mapping to the [0, 1000] grid.
    quantize: Literal["floor", "round"]
    #: Duration given to a long press without one (ms).
    long_press_ms: int
    #: Duration written for a wait without one (ms).
    wait_ms: int


RULES: dict[str, FamilyRule] = {
    # Identity: AgentCPM-GUI's own output.
    "agentcpm": FamilyRule("finger", "keep", "round", 1000, DEFAULT_DURATION_MS),
    # qwen2_5_2_minicpm: x/resized_width*1000 then int(); swipe direction from coordinate ->
    # coordinate2 (finger); long_press/wait time (s) * 1000.
    "qwen_mobile_use": FamilyRule("finger", "keep", "floor", 1000, DEFAULT_DURATION_MS),
    # uitars2minicpm: "need reverse direction" for scroll; long_press time or 1000; wait() -> 200.
    "uitars": FamilyRule("content", "reverse", "round", 1000, DEFAULT_DURATION_MS),
    # Table 9 / os_atlas_2minicpm: LONG_PRESS -> 1000; WAIT -> 200; SCROLL kept, reversed with the
    # low-level instruction in the paper (the released reversal never fires: ``variant``).
    "osatlas": FamilyRule("content", "keep", "round", 1000, DEFAULT_DURATION_MS),
    # Table 10 / os_gensis_2minicpm: reversed only with the low-level instruction (``low_instruction``).
    "osgenesis": FamilyRule("content", "keep", "round", 1000, DEFAULT_DURATION_MS),
    # Table 11 / run_predict_odyssey.mapping_actions: SCROLL word kept; LONG_PRESS -> 1000; RECENT
    # ignored in the paper (B.5.2), APPSELECT in the released code (``variant``).
    "odyssey": FamilyRule("finger", "keep", "round", 1000, DEFAULT_DURATION_MS),
    # run_predict_aguvis.mapping_actions: scroll(page>0) -> "up", hscroll(page<0) -> "left"
    # (word kept); round(x*1000); long_press -> 1000; wait -> 3000.
    "aguvis": FamilyRule("content", "keep", "round", 1000, 3000),
}

FAMILIES: tuple[str, ...] = tuple(RULES)


def _grid(v: float, how: str) -> float:
    """Normalised coordinate -> AgentCPM [0, 1000] integer grid -> normalised."""
    k = math.floor(v * 1000) if how == "floor" else round(v * 1000)
    return min(max(k, 0), 1000) / 1000


def _point(p: tuple[float, float], how: str) -> tuple[float, float]:
    return (_grid(p[0], how), _grid(p[1], how))


def _fail(family: str, why: str) -> ActionError:
    return ActionError(f"AgentCPM-GUI unified mapping ({family}): {why}")


def to_unified(
    action: Action, source_family: str, *, low_instruction: bool = False, variant: Variant = "paper"
) -> Action:
    """Map a parsed action of ``source_family`` into AgentCPM-GUI's unified action space.

    ``low_instruction``: the AndroidControl-low setting, where AgentCPM-GUI reverses OS-Atlas'
    and OS-Genesis' scroll direction (Tables 9-10). ``variant``: ``"paper"`` (the tables) or
    ``"released"`` (the released converters; module doc). Raises :class:`IgnoredInEvaluation`
    for actions the paper leaves out of the scores, :class:`ActionError` (naming family and
    reason) for actions the converters cannot map, and ``KeyError`` for an unknown family or
    ``ValueError`` for an unknown variant.
    """
    if source_family not in RULES:
        raise KeyError(f"unknown source family {source_family!r}; known: {list(FAMILIES)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown mapping variant {variant!r}; known: {list(VARIANTS)}")
    rule = RULES[source_family]
    t = action.type
    fam = source_family

    if t is ActionType.CLICK:
        return Action(ActionType.CLICK, point=_point(action.point, rule.quantize))  # type: ignore[arg-type]
    if t is ActionType.LONG_PRESS:
        ms = action.duration_ms if action.duration_ms is not None else rule.long_press_ms
        p = _point(action.point, rule.quantize)  # type: ignore[arg-type]
        if ms <= DEFAULT_DURATION_MS:  # evaluator: POINT with duration == default is a click
            return Action(ActionType.CLICK, point=p)
        return Action(ActionType.LONG_PRESS, point=p, duration_ms=ms)
    if t is ActionType.SCROLL:
        if fam == "aguvis" and action.point2 is not None:
            raise _fail(fam, "mobile.swipe is not handled by AgentCPM-GUI's Aguvis mapping")
        word = action.in_convention(rule.native_convention).direction  # type: ignore[arg-type]
        low_reverses = fam == "osgenesis" or (fam == "osatlas" and variant == "paper")
        reverse = rule.scroll == "reverse" or (low_reverses and low_instruction)
        d = OPPOSITE[word] if reverse else word  # type: ignore[index]
        start = action.point if fam in ("agentcpm", "qwen_mobile_use") and action.point is not None else (0.5, 0.5)
        return Action(ActionType.SCROLL, point=_point(start, rule.quantize), direction=d, convention="finger")  # type: ignore[arg-type]
    if t is ActionType.TYPE:
        return Action(ActionType.TYPE, text=action.text)
    if t is ActionType.PRESS:
        if action.key == "recent" and fam == "odyssey" and variant == "paper":
            raise IgnoredInEvaluation(
                f"AgentCPM-GUI unified mapping ({fam}): RECENT is not in the action space and is ignored in "
                "evaluation (AgentCPM-GUI B.5.2)"
            )
        if action.key == "recent" and fam in ("qwen_mobile_use", "osatlas"):
            why = (
                "system_button Menu is dropped"
                if fam == "qwen_mobile_use"
                else "PRESS_RECENT becomes 'RECENT', not in the PRESS enum"
            )
            raise _fail(fam, why)
        if action.key == "enter" and fam == "aguvis":
            raise _fail(fam, "pyautogui.press is not handled by AgentCPM-GUI's Aguvis mapping")
        return Action(ActionType.PRESS, key=action.key)
    if t is ActionType.WAIT:
        ms = (
            action.duration_ms
            if (fam in ("agentcpm", "qwen_mobile_use") and action.duration_ms is not None)
            else rule.wait_ms
        )
        return Action(ActionType.WAIT, duration_ms=ms)
    if t is ActionType.TERMINATE:
        # Qwen2.5-VL (Table 6): any terminate -> STATUS finish; UI-TARS finished() / OS-Atlas COMPLETE
        # -> finish; Aguvis (Table 12): mobile.terminate -> finish in the paper, a failure is a failed
        # stop (interrupt) in the released code; Odyssey (Table 11): IMPOSSIBLE -> impossible.
        every_finish = fam == "qwen_mobile_use" or (fam == "aguvis" and variant == "paper")
        status = "success" if every_finish else action.status
        return Action(ActionType.TERMINATE, status=status)  # type: ignore[arg-type]
    if t is ActionType.OPEN_APP and fam == "aguvis":
        raise IgnoredInEvaluation(
            f"AgentCPM-GUI unified mapping ({fam}): open_app is not in the action space and is ignored in "
            "evaluation (AgentCPM-GUI Table 12, B.6.2)"
        )
    raise _fail(fam, f"{t.value!r} actions are not in AgentCPM-GUI's action schema")


def try_to_unified(
    action: Action, source_family: str, *, low_instruction: bool = False, variant: Variant = "paper"
) -> tuple[Action | None, str]:
    """:func:`to_unified` that returns ``(None, reason)`` instead of raising ``ActionError``."""
    try:
        return to_unified(action, source_family, low_instruction=low_instruction, variant=variant), ""
    except ActionError as e:
        return None, str(e)


__all__ = [
    "DEFAULT_DURATION_MS",
    "FAMILIES",
    "RULES",
    "VARIANTS",
    "FamilyRule",
    "IgnoredInEvaluation",
    "to_unified",
    "try_to_unified",
]
