"""AndroidLong's error taxonomy (App. D.1) as a written rule over an online MiniGUI episode.

App. D.1 describes five kinds of failure with one example each: *insufficient exploration* (the
agent stops after the items in view, without swiping on to the rest), *turn limit exceeded* (the
task runs out of turns, wasted on redundant or inefficient steps), *insufficient reflection*
(actions that take no effect, e.g. typing with no field focused, and the agent carries on as if
they had), *inconsistency* (the agent forgets its progress and checks the same item again, ending
in a loop of taps on one place) and *formality error* (the output breaks the prompt's format). The
supplement gives no rule; this module's, applied to an episode record of
:func:`guirl.rollout.play_online` (``success``, ``turns``, ``stopped``, ``actions``, ``trace``:
the screen each turn acted on, whether the output parsed, and the phone's effect or rejection), is:

1. a successful episode has no error (``None``);
2. ``format_error``: at least half of its turns were unparsable outputs;
3. ``insufficient_reflection``: at least :data:`MIN_NO_EFFECT` parsed actions, and at least a third
   of them, left the phone as it was (rejected by the phone, or no change); waits and the final
   stop are not counted;
4. ``inconsistency``: one tap, long press or typing (same type, same text, point on the same
   :data:`GRID` cell) repeated :data:`MIN_REPEATS` times on the same screen;
5. ``turn_limit``: the agent never stopped (the turn limit ended the episode);
6. ``insufficient_exploration``: the agent stopped (terminated or answered) with the task not done.

The first rule that holds names the failure, so every failed episode gets exactly one kind
(:data:`ERROR_TYPES`, in this order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ERROR_TYPES", "GRID", "MIN_NO_EFFECT", "MIN_REPEATS", "classify_failure", "error_counts"]

ERROR_TYPES: tuple[str, ...] = (
    "format_error",
    "insufficient_reflection",
    "inconsistency",
    "turn_limit",
    "insufficient_exploration",
)
#: Points closer than one cell of this grid (normalised units) are the same place.
GRID = 0.05
#: Repetitions of one action on one screen that make an inconsistency.
MIN_REPEATS = 3
#: Parsed actions without effect needed (besides the one-third share) for insufficient reflection.
MIN_NO_EFFECT = 2

_NOT_COUNTED = ("wait", "terminate", "answer")
_REPEATED = ("click", "long_press", "type")


def _key(screen: str, action: Mapping[str, Any]) -> tuple[Any, ...] | None:
    t = action.get("type")
    if t not in _REPEATED:
        return None
    point = action.get("point")
    cell = tuple(int(float(v) // GRID) for v in point) if point is not None else None
    return (screen, t, cell, action.get("text"))


def classify_failure(episode: Mapping[str, Any]) -> str | None:
    """The App. D.1 kind of a failed online episode (module doc), ``None`` for a success."""
    if episode["success"]:
        return None
    trace = list(episode.get("trace") or [])
    turns = int(episode.get("turns", len(trace)))
    parsed = [t for t in trace if t.get("parsed")]
    if turns and 2 * (turns - len(parsed)) >= turns:
        return "format_error"
    actions = list(episode.get("actions") or [])
    if len(actions) != len(parsed):
        raise ValueError(
            f"episode {episode.get('task_id')!r}: {len(actions)} actions for {len(parsed)} parsed turns in its trace"
        )
    counted = [(t, a) for t, a in zip(parsed, actions) if a.get("type") not in _NOT_COUNTED]
    no_effect = sum(1 for t, _ in counted if t.get("invalid") or t.get("effect") == "no_change")
    if no_effect >= MIN_NO_EFFECT and 3 * no_effect >= len(counted):
        return "insufficient_reflection"
    repeats = Counter(k for t, a in zip(parsed, actions) if (k := _key(str(t.get("screen")), a)) is not None)
    if repeats and max(repeats.values()) >= MIN_REPEATS:
        return "inconsistency"
    if not episode.get("stopped"):
        return "turn_limit"
    return "insufficient_exploration"


def error_counts(episodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many episodes of each kind (:data:`ERROR_TYPES` in order, then ``success``)."""
    counts = dict.fromkeys((*ERROR_TYPES, "success"), 0)
    for ep in episodes:
        counts[classify_failure(ep) or "success"] += 1
    return counts
