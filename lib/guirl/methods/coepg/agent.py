"""The P-G dual model as an agent (Co-EPG Sec. 4.1, eq. 1-2).

:class:`PlannerGrounderAgent` answers each :class:`~guirl.rollout.Turn` in two calls: the planner
``pi(Q, o_t, h_t)`` writes ``<plan>`` / ``<action>`` / ``<value>`` (format ``coepg_planner``,
:func:`guirl.methods.coepg.prompts.planner_prompt`); for an action with a target (click, long
press, select, ...), and for a typing action whose plan names an element (Mind2Web's TYPE, Table 9),
the grounder ``phi(o_t, p_t)`` turns the plan into a point. The planner's prompt is the one of
its settings' level (``"High"``, or ``"Low"`` with the turn's step instruction, Table 12). The executed
action ``a_t = (a_coor, a_type, a_value)`` is the planner's type and value with the grounder's
point, written in ``output_format`` (the run's executable format, e.g. ``ccpo``): the loops of
:mod:`guirl.rollout` and the evaluation of :mod:`guirl.studies.shared.evaluation` parse and score
it as any policy's answer, and show it as the history of the next steps (Sec. 3: ``h_t`` holds
the previous actions). ``AgentStep.info`` keeps the plan and both models' raw answers.

An answer that cannot be executed is returned as text no format parses (``"unparsable: ..."``
with the reason): the planner's output does not parse, it names a target without a plan, or
the grounder's answer is no point on the screen.

:func:`read_planner` is the planner's answer without a point (its type, plan and value): the
agent, the GRPO reward and the data enhancement read plans with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import Action, ActionType, ParseResult
from guirl.methods.coepg.prompts import PlannerPromptSettings, planner_prompt
from guirl.prompts import format_context
from guirl.rollout.agents import AgentStep
from guirl.rollout.policy import Policy

__all__ = ["PlannerAnswer", "read_planner", "PlannerGrounderAgent", "UNPARSABLE"]

#: The point given to the planner format while its answer is read without a grounder.
_PROBE = (0.5, 0.5)
#: Prefix of an answer the agent cannot execute (no output format parses it).
UNPARSABLE = "unparsable:"


@dataclass(frozen=True)
class PlannerAnswer:
    """The planner's answer read without a point: ``parsed`` (with ``_PROBE`` as the point of an
    action that needs one), ``plan`` (``None`` when absent or "None"), ``needs_point``."""

    parsed: ParseResult
    plan: str | None
    needs_point: bool

    @property
    def ok(self) -> bool:
        return self.parsed.ok and (not self.needs_point or bool(self.plan))

    @property
    def grounds_typing(self) -> bool:
        """A typing action whose plan names a target element (Co-EPG Table 9: on Mind2Web TYPE acts on
        an ELEMENT): the grounder locates it, as for a click; a type without a plan ("None", Table 10's
        input_text into the focused field) is not grounded."""
        a = self.parsed.action
        return self.parsed.ok and a is not None and a.type is ActionType.TYPE and bool(self.plan)

    def with_point(self, point: tuple[float, float] | None) -> Action:
        """The executable action: the grounder's ``point`` on an action that needs one, and on a
        grounded typing action (:attr:`grounds_typing`) when the grounder gave one."""
        assert self.parsed.action is not None
        a = self.parsed.action
        if self.needs_point:
            return replace(a, point=point)
        if self.grounds_typing and point is not None:
            return replace(a, point=point)
        return replace(a, point=None) if a.point == _PROBE else a


def read_planner(text: str) -> PlannerAnswer:
    """Read a ``coepg_planner`` answer without a grounder (module doc); never raises."""
    fmt = get_format("coepg_planner")
    bare = fmt.parse(text, FormatContext())
    if bare.ok:
        a = bare.action
        plan = (a.extra.get("plan") if a is not None else None) or None
        return PlannerAnswer(bare, None if plan in (None, "None") else plan, False)
    probed = fmt.parse(text, FormatContext(grounded_point=_PROBE))
    if not probed.ok or probed.action is None:
        return PlannerAnswer(probed, None, True)
    plan = probed.action.extra.get("plan") or None
    return PlannerAnswer(probed, None if plan in (None, "None") else plan, True)


class PlannerGrounderAgent:
    """Planner + grounder as one :class:`~guirl.rollout.Agent` (module doc).

    ``planner`` and ``grounder`` are :class:`~guirl.rollout.Policy` objects (e.g.
    :class:`~guirl.rollout.HFPolicy` with their generation budgets); ``settings`` builds both
    prompts; ``min_pixels`` / ``max_pixels`` are the screen as both models see it;
    ``output_format`` is the format the executed action is written in. No state between steps.
    """

    def __init__(
        self,
        planner: Policy,
        grounder: Policy,
        settings: PlannerPromptSettings,
        *,
        min_pixels: int,
        max_pixels: int,
        output_format: str,
    ) -> None:
        self.planner, self.grounder, self.settings = planner, grounder, settings
        self.min_pixels, self.max_pixels = int(min_pixels), int(max_pixels)
        self.output_format = output_format

    def reset(self, keys: Sequence[str]) -> None:
        return None

    def act(self, turns, *, do_sample=False, temperature=1.0, top_p=1.0, seed=None) -> list[AgentStep]:
        from guirl.methods.coepg.prompts import grounder_prompt

        if not turns:
            return []
        prompts = [
            planner_prompt(
                self.settings,
                t.instruction,
                [h for h, _ in t.history],
                t.screenshot,
                step_instruction=t.step_instruction,
                elements=t.elements,
            )
            for t in turns
        ]
        plans = self.planner.complete(prompts, do_sample=do_sample, temperature=temperature, top_p=top_p, seed=seed)
        answers = [read_planner(c[0].text) for c in plans]
        need = [i for i, a in enumerate(answers) if a.ok and (a.needs_point or a.grounds_typing)]
        points: dict[int, tuple[str, tuple[float, float] | None]] = {}
        if need:
            gp = [grounder_prompt(self.settings, turns[i].screenshot, answers[i].plan or "") for i in need]
            outs = self.grounder.complete(gp)
            fmt = get_format("coepg_grounder")
            for i, c in zip(need, outs, strict=True):
                ctx = format_context(turns[i].screen_size, self.min_pixels, self.max_pixels)
                parsed = fmt.parse(c[0].text, ctx)
                points[i] = (c[0].text, parsed.action.point if parsed.ok and parsed.action is not None else None)
        writer = get_format(self.output_format)
        out = []
        for i, (turn, comp, ans) in enumerate(zip(turns, plans, answers, strict=True)):
            info: dict[str, Any] = {"planner": comp[0].text, "plan": ans.plan}
            if not ans.ok:
                why = ans.parsed.reason or "a target without a plan"
                out.append(AgentStep(f"{UNPARSABLE} planner: {why}", info))
                continue
            point = None
            if i in points:
                info["grounder"], point = points[i]
                if point is None and ans.needs_point:
                    out.append(AgentStep(f"{UNPARSABLE} grounder: no point in {info['grounder'][:60]!r}", info))
                    continue
            action = ans.with_point(point)
            ctx = format_context(turn.screen_size, self.min_pixels, self.max_pixels)
            if not writer.can_format(action):
                out.append(AgentStep(f"{UNPARSABLE} {self.output_format} cannot write {action.type.value}", info))
                continue
            out.append(AgentStep(writer.format(action, ctx), info))
        return out
