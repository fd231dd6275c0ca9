"""Co-EPG's prompts as messages: the planner's (Co-EPG Table 12 with Tables 10-11, or this
project's short layout), the grounder's, and the data-enhancement addition of Table 13.

* :func:`planner_prompt`: ``pi(Q, o_t, h_t)`` (eq. 1): the goal, the history ``h_t`` (the
  previous actions as text, Sec. 3: the actions ``a_0 .. a_{t-1}`` written in the run's
  executable format, the ground truth offline and the agent's own online) and the current
  screenshot. With ``user_template`` (the paper profiles: ``coepg_androidcontrol_high``, Table 12)
  the user turn is the paper's; without (the tiny profile) it is this project's layout ("Task:",
  "Previous actions:", "Current screen:"). With ``enhancement`` the Table 13 addition (the correct
  ACTION, VALUE and ELEMENT_BBOX) follows the prompt, as in the data enhancement (App. F).
* :func:`grounder_prompt`: ``phi(o_t^vision, p_t)`` (eq. 2): the screenshot and the plan; the
  answer is a point ``(x, y)`` in pixels of the resized screenshot (format ``coepg_grounder``).

:class:`PlannerPromptSettings` holds what a run configures (:func:`planner_settings` reads the
``coepg`` section). Prompts are ``(messages, images)``, the :mod:`guirl.rollout` convention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from guirl.actions import Action
from guirl.actions.coords import CoordSpace
from guirl.actions.formats import FormatContext, get_format
from guirl.actions.formats._base import tag
from guirl.prompts import get_prompt, render

__all__ = [
    "PlannerPromptSettings",
    "planner_settings",
    "planner_prompt",
    "grounder_prompt",
    "enhancement_text",
    "planner_words",
    "planner_text",
]

#: Placeholder plan for writing an action whose plan is not known yet (only its words are read).
_PLAN = "x"


@dataclass(frozen=True)
class PlannerPromptSettings:
    """How the planner's prompt is built: the registered ``system_prompt``, the registered user
    prompt ``user_template`` (``None``: this project's layout), ``n_history`` previous actions
    shown (0..5) and ``grounder_prompt`` (the grounder's registered system prompt)."""

    system_prompt: str = "coepg"
    user_template: str | None = "coepg_androidcontrol_high"
    n_history: int = 5
    grounder_prompt: str = "coepg_grounder"

    def __post_init__(self) -> None:
        if not 0 <= self.n_history <= 5:
            raise ValueError(f"n_history must be in 0..5, got {self.n_history}")
        for name, role in ((self.system_prompt, "system"), (self.grounder_prompt, "system")):
            if get_prompt(name).role != role:
                raise ValueError(f"{name!r} is not a {role} prompt")
        if self.user_template is not None:
            info = get_prompt(self.user_template)
            if info.role != "user" or "history" not in info.placeholders:
                raise ValueError(f"user_template {self.user_template!r} must be a user prompt with a {{history}}")


def planner_settings(cfg: Any) -> PlannerPromptSettings:
    """The planner prompt settings of ``cfg.coepg`` (``system_prompt``, ``user_template``,
    ``n_history``, ``grounder_prompt``)."""
    sec = cfg.method_section("coepg")
    return PlannerPromptSettings(
        system_prompt=sec.system_prompt,
        user_template=sec.user_template,
        n_history=sec.n_history,
        grounder_prompt=sec.grounder_prompt,
    )


def _system(name: str) -> dict[str, Any]:
    return {"role": "system", "content": [{"type": "text", "text": render(name)}]}


def planner_words(action: Action) -> tuple[str, str]:
    """The ``<action>`` word and ``<value>`` text that the ``coepg_planner`` writer gives ``action``
    (the Table 13 addition names them)."""
    fmt = get_format("coepg_planner")
    text = fmt.format(replace(action, extra={"plan": _PLAN}), FormatContext())
    return tag(text, "action") or "", tag(text, "value") or ""


def planner_text(action: Action, plan: str | None) -> str:
    """``action`` in the ``coepg_planner`` format with ``plan`` (``None``: the paper's "None" for
    an action without a target element, Table 10)."""
    fmt = get_format("coepg_planner")
    return fmt.format(replace(action, extra={"plan": plan if plan else "None"}), FormatContext())


def enhancement_text(action: Action, box: Sequence[float] | None, space: CoordSpace) -> str:
    """Co-EPG Table 13: the correct ACTION and VALUE (the planner format's words) and the target's
    box in the model's pixels (``space``: the resized screenshot), ``None`` without a box."""
    word, value = planner_words(action)
    if box is None:
        bbox = "None"
    else:
        x1, y1 = space.from_norm((float(box[0]), float(box[1])))
        x2, y2 = space.from_norm((float(box[2]), float(box[3])))
        bbox = f"[{x1}, {y1}, {x2}, {y2}]"
    return render("coepg_verifier_addition", action=word, value=value or "None", target_bbox=bbox)


def planner_prompt(
    settings: PlannerPromptSettings,
    instruction: str,
    history: Sequence[str],
    screenshot: Any,
    *,
    enhancement: str | None = None,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """The planner's prompt (module doc): ``history`` holds the texts of every previous action,
    oldest first (the last ``settings.n_history`` are shown); ``enhancement``: the Table 13 text
    (:func:`enhancement_text`) appended after the screenshot."""
    shown = list(history)[-settings.n_history :] if settings.n_history else []
    offset = len(history) - len(shown)
    lines = "\n".join(f"Step {offset + i + 1}: {text}" for i, text in enumerate(shown))
    if settings.user_template is not None:
        text = render(settings.user_template, instruction=instruction, history=lines or "None")
        content: list[dict[str, Any]] = [{"type": "text", "text": text}, {"type": "image"}]
    else:
        head = f"Task: {instruction}\n" + (f"Previous actions:\n{lines}\n" if lines else "")
        content = [{"type": "text", "text": head + "Current screen:"}, {"type": "image"}]
    if enhancement is not None:
        content.append({"type": "text", "text": "\n" + enhancement})
    return [_system(settings.system_prompt), {"role": "user", "content": content}], [screenshot]


def grounder_prompt(
    settings: PlannerPromptSettings, screenshot: Any, plan: str
) -> tuple[list[dict[str, Any]], list[Any]]:
    """The grounder's prompt: its system prompt, then the screenshot and the plan."""
    user = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": plan}]}
    return [_system(settings.grounder_prompt), user], [screenshot]
