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
    "LEVELS",
    "LOW_TEMPLATES",
    "at_level",
    "PlannerPromptSettings",
    "planner_settings",
    "planner_prompt",
    "elements_text",
    "grounder_prompt",
    "enhancement_text",
    "planner_words",
    "planner_text",
]

#: Placeholder plan for writing an action whose plan is not known yet (only its words are read).
_PLAN = "x"


#: Co-EPG Table 12's two AndroidControl prompts: the high-level one and its low-level twin, which
#: adds the step's instruction (Table 2 / Table 7 report both, "High" and "Low").
LOW_TEMPLATES: dict[str, str] = {"coepg_androidcontrol_high": "coepg_androidcontrol_low"}
LEVELS: tuple[str, ...] = ("High", "Low")


@dataclass(frozen=True)
class PlannerPromptSettings:
    """How the planner's prompt is built: the registered ``system_prompt``, the registered user
    prompt ``user_template`` (``None``: this project's layout), ``n_history`` previous actions
    shown (0..5), ``grounder_prompt`` (the grounder's registered system prompt) and ``level``:
    ``"High"`` (the goal only) or ``"Low"`` (the goal and the step's instruction: a user template
    with a ``{step_instruction}``, or a "Step instruction:" line in this project's layout;
    :func:`at_level`)."""

    system_prompt: str = "coepg"
    user_template: str | None = "coepg_androidcontrol_high"
    n_history: int = 5
    grounder_prompt: str = "coepg_grounder"
    level: str = "High"

    def __post_init__(self) -> None:
        if not 0 <= self.n_history <= 5:
            raise ValueError(f"n_history must be in 0..5, got {self.n_history}")
        for name, role in ((self.system_prompt, "system"), (self.grounder_prompt, "system")):
            if get_prompt(name).role != role:
                raise ValueError(f"{name!r} is not a {role} prompt")
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {self.level!r}")
        if self.user_template is not None:
            info = get_prompt(self.user_template)
            if info.role != "user" or "history" not in info.placeholders:
                raise ValueError(f"user_template {self.user_template!r} must be a user prompt with a {{history}}")
            if (self.level == "Low") != ("step_instruction" in info.placeholders):
                raise ValueError(
                    f"user_template {self.user_template!r} does not fit level {self.level!r}: a Low prompt shows the "
                    "step instruction ({step_instruction}), a High prompt does not; use at_level(settings, level)"
                )


def at_level(settings: PlannerPromptSettings, level: str) -> PlannerPromptSettings:
    """``settings`` for Co-EPG's ``"High"`` or ``"Low"`` setting (Table 2): the Low twin of the
    high-level template (:data:`LOW_TEMPLATES`, Table 12) and back; this project's layout (no
    template) adds or drops its "Step instruction:" line. A template without a twin is an error."""
    if level == settings.level:
        return settings
    template = settings.user_template
    if template is not None:
        twins = LOW_TEMPLATES if level == "Low" else {v: k for k, v in LOW_TEMPLATES.items()}
        if template not in twins:
            raise ValueError(f"the planner prompt {template!r} has no {level}-level version (Co-EPG Table 12)")
        template = twins[template]
    return replace(settings, user_template=template, level=level)


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


def elements_text(elements: Sequence[str]) -> str:
    """Co-EPG Table 9's ``{elements}``: one referring element a line, lettered as multiple-choice
    options (``A. <button> ...``, then ``AA.`` past ``Z``), or ``None`` without any."""
    if not elements:
        return "None"

    def label(i: int) -> str:
        out = ""
        i += 1
        while i:
            i, r = divmod(i - 1, 26)
            out = chr(65 + r) + out
        return out

    return "\n".join(f"{label(i)}. {e}" for i, e in enumerate(elements))


def planner_prompt(
    settings: PlannerPromptSettings,
    instruction: str,
    history: Sequence[str],
    screenshot: Any,
    *,
    enhancement: str | None = None,
    step_instruction: str | None = None,
    elements: Sequence[str] = (),
) -> tuple[list[dict[str, Any]], list[Any]]:
    """The planner's prompt (module doc): ``history`` holds the texts of every previous action,
    oldest first (the last ``settings.n_history`` are shown); ``enhancement``: the Table 13 text
    (:func:`enhancement_text`) appended after the screenshot; ``step_instruction``: the step's
    low-level instruction, shown at ``settings.level == "Low"`` (required there, a ``ValueError``
    without it) and ignored at ``"High"``; ``elements``: the page's referring elements (Table 9's
    ``{elements}``: :func:`elements_text`; a template without that slot ignores them)."""
    shown = list(history)[-settings.n_history :] if settings.n_history else []
    offset = len(history) - len(shown)
    lines = "\n".join(f"Step {offset + i + 1}: {text}" for i, text in enumerate(shown))
    low = settings.level == "Low"
    if low and not step_instruction:
        raise ValueError("a Low-level planner prompt shows the step's instruction: pass step_instruction")
    if settings.user_template is not None:
        fields: dict[str, str] = {"step_instruction": step_instruction} if low and step_instruction else {}
        if "elements" in get_prompt(settings.user_template).placeholders:
            fields["elements"] = elements_text(elements)
        text = render(settings.user_template, instruction=instruction, history=lines or "None", **fields)
        content: list[dict[str, Any]] = [{"type": "text", "text": text}, {"type": "image"}]
    else:
        head = f"Task: {instruction}\n" + (f"Step instruction: {step_instruction}\n" if low else "")
        head += f"Previous actions:\n{lines}\n" if lines else ""
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
