"""The CES loop as a :class:`guirl.rollout.Agent` (CES Sec. 4.2, Fig. 3; eqs. 1-3).

At step ``t`` of every running episode, in lockstep and batched per role:

1. **Coordinator** ``l^t = pi_c(q, m^{t-1}, s^t)``: one batched ``complete`` over the turns; the
   instruction is the output's ``<answer>`` (:func:`guirl.methods.ces.roles.instruction_of`);
2. **Executor** ``u^t = pi_e(l^t, s^t)``: frozen, one batched ``complete``; its text is the agent's
   action (parsed with the Executor's output format by the loops);
3. **State Tracker** ``m^t = pi_s(q, m^{t-1}, u^t)``: text only, one batched ``complete``; the new
   state is kept as this episode's memory (keyed by ``Turn.key``) and read at step ``t + 1``.

``AgentStep.info`` records ``instruction`` (``l^t``), ``state`` (``m^{t-1}``, what the Coordinator
read), ``next_state`` (``m^t``) and the raw ``coordinator`` / ``tracker`` texts.

How the Executor is prompted (:class:`ExecutorPrompting`): App. C's executor prompt
(``"ces_executor"``: the instruction and the screenshot, output format ``ces_executor``), or a
repository model that follows "goal + step instruction" prompts (``"step_instruction"``: 01's Low
executor; :func:`guirl.prompts.build_prompt` with the instruction in the step-instruction slot, the
goal and the history window of its own prompt setting, its own output format).

The ablations and baselines of CES Tables 1-3 are the same class with parts left out:

* Executor alone (Table 1-2 "Baseline"): no Coordinator, no State Tracker, no instruction
  (``instruction="none"``: the step-instruction slot stays empty; App. C's prompt gets the goal);
* w/o Coordinator (Table 3): the Coordinator removed from CES, the State Tracker kept: the Executor
  gets the goal and the task state the Coordinator would have read (``instruction="goal_and_state"``,
  :func:`goal_and_state`; Sec. 5.3 feeds the high-level instruction directly to the Executor and
  removes only the Coordinator, and Table 3's numbers differ from Table 1's Executor-alone baseline,
  so the state still reaches the loop; how the paper passes it on is not stated: this is a reading,
  CES-28 in ``docs/fidelity/ces.md``). ``instruction="goal"`` (the goal alone in the
  step-instruction slot) stays as an option;
* w/o State Tracker (Table 3): ``memory="actions"``: the Coordinator's state is the last
  ``n_actions`` actions of the history (Sec. 5.3: "the last four action histories");
* SFT only (Table 3) / the warm-up Coordinator ("CES-P" analogue, Table 2): the warm-up models.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from guirl.methods.ces.data import INITIAL_STATE
from guirl.methods.ces.roles import (
    coordinator_prompt,
    executor_prompt,
    executor_report,
    instruction_of,
    state_of,
    tracker_prompt,
)
from guirl.prompts import PromptSpec, build_prompt, format_context
from guirl.rollout.agents import AgentStep, Turn
from guirl.rollout.policy import Policy, derive_seed

__all__ = ["ExecutorPrompting", "CESAgent", "N_ACTIONS", "INSTRUCTIONS", "goal_and_state"]

#: CES Sec. 5.3: without the State Tracker the Coordinator reads "the last four action histories".
N_ACTIONS = 4
#: What the Executor gets without a Coordinator (module doc).
INSTRUCTIONS: tuple[str, ...] = ("none", "goal", "goal_and_state")


def goal_and_state(goal: str, state: str) -> str:
    """The Executor's instruction in CES's "w/o Coordinator" ablation (module doc): the high-level
    instruction followed by the task state the State Tracker keeps."""
    return f"{goal}\nTask state: {state}"


@dataclass(frozen=True)
class ExecutorPrompting:
    """How the frozen Executor is prompted (module doc). ``spec``: the Executor's prompt setting in
    ``"step_instruction"`` mode (output format, system prompt, history window; its
    ``use_step_instruction`` must be on); in ``"ces_executor"`` mode the output format is
    ``ces_executor`` and no history is shown (eq. 2: ``pi_e(l^t, s^t)``)."""

    mode: Literal["ces_executor", "step_instruction"]
    min_pixels: int
    max_pixels: int
    spec: PromptSpec | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("ces_executor", "step_instruction"):
            raise ValueError(f"executor prompt mode must be 'ces_executor' or 'step_instruction', got {self.mode!r}")
        if self.mode == "step_instruction" and (self.spec is None or not self.spec.use_step_instruction):
            raise ValueError("the 'step_instruction' executor needs a PromptSpec with use_step_instruction=True")

    @property
    def output_format(self) -> str:
        return "ces_executor" if self.mode == "ces_executor" else self.spec.output_format  # type: ignore[union-attr]

    def prompt(
        self,
        goal: str,
        history: Sequence[tuple[str, Any]],
        screenshot: Any,
        screen_size: tuple[int, int],
        instruction: str | None,
    ):
        """The Executor's prompt for one step; ``instruction`` ``None`` or empty: none given
        (``"ces_executor"``: the goal takes its place, the prompt has a command slot only)."""
        if self.mode == "ces_executor":
            return executor_prompt(instruction or goal, screenshot)
        sp = format_context(screen_size, self.min_pixels, self.max_pixels).space("resized")
        return build_prompt(
            goal, list(history), screenshot, self.spec, instruction or None, resolution=(sp.width, sp.height)
        )  # type: ignore[arg-type]

    def write(self, action: Any, screen_size: tuple[int, int]) -> str:
        """An annotated action in the Executor's output format (a ground-truth ``u^t``)."""
        from guirl.actions.formats import get_format

        return get_format(self.output_format).format(
            action, format_context(screen_size, self.min_pixels, self.max_pixels)
        )


class CESAgent:
    """The CES loop (module doc) as an :class:`~guirl.rollout.Agent`.

    Args:
        executor: the frozen Executor's policy.
        prompting: how the Executor is prompted (:class:`ExecutorPrompting`).
        coordinator: the Coordinator's policy (``None``: no Coordinator, see ``instruction``).
        tracker: the State Tracker's policy (``None`` with ``memory="tracker"``: the state stays
            :data:`~guirl.methods.ces.data.INITIAL_STATE`).
        memory: ``"tracker"`` (the State Tracker's state) or ``"actions"`` (the last ``n_actions``
            actions of the history, CES Sec. 5.3's "w/o State Tracker").
        instruction: without a Coordinator, what the Executor gets: ``"none"``, ``"goal"`` or
            ``"goal_and_state"`` (the goal and the memory ``m^{t-1}``: :func:`goal_and_state`).
        tracker_sees_instruction: ``u^t`` for the State Tracker includes ``l^t``
            (:func:`guirl.methods.ces.roles.executor_report`).
        initial_state: ``m^{-1}``.
    """

    def __init__(
        self,
        executor: Policy,
        prompting: ExecutorPrompting,
        *,
        coordinator: Policy | None = None,
        tracker: Policy | None = None,
        memory: Literal["tracker", "actions"] = "tracker",
        instruction: Literal["none", "goal", "goal_and_state"] = "none",
        tracker_sees_instruction: bool = False,
        n_actions: int = N_ACTIONS,
        initial_state: str = INITIAL_STATE,
    ) -> None:
        if memory not in ("tracker", "actions"):
            raise ValueError(f"memory must be 'tracker' or 'actions', got {memory!r}")
        if instruction not in INSTRUCTIONS:
            raise ValueError(f"instruction must be one of {INSTRUCTIONS}, got {instruction!r}")
        self.executor, self.prompting = executor, prompting
        self.coordinator, self.tracker = coordinator, tracker
        self.memory, self.instruction = memory, instruction
        self.tracker_sees_instruction = tracker_sees_instruction
        self.n_actions, self.initial_state = int(n_actions), initial_state
        self.output_format = prompting.output_format
        self._state: dict[str, str] = {}

    def __repr__(self) -> str:
        parts = [f"executor ({self.prompting.mode})"]
        if self.coordinator is not None:
            parts.insert(0, "coordinator")
        if self.tracker is not None and self.memory == "tracker":
            parts.append("state tracker")
        elif self.memory == "actions":
            parts.append(f"last {self.n_actions} actions")
        return f"CESAgent({' + '.join(parts)})"

    def reset(self, keys: Sequence[str]) -> None:
        for k in keys:
            self._state[k] = self.initial_state

    def state(self, key: str) -> str:
        """The memory ``m^{t-1}`` episode ``key`` holds now."""
        return self._state.get(key, self.initial_state)

    def _state_in(self, turn: Turn) -> str:
        if self.memory == "actions":
            shown = [text for text, _ in turn.history][-self.n_actions :]
            return "; ".join(shown) if shown else self.initial_state
        return self.state(turn.key)

    def act(
        self,
        turns: Sequence[Turn],
        *,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[AgentStep]:
        if not turns:
            return []
        kw = dict(do_sample=do_sample, temperature=temperature, top_p=top_p)
        states = [self._state_in(t) for t in turns]
        raw_c: list[str | None] = [None] * len(turns)
        if self.coordinator is not None:
            outs = self.coordinator.complete(
                [coordinator_prompt(t.instruction, m, t.screenshot) for t, m in zip(turns, states)],
                seed=derive_seed(seed, 0),
                **kw,
            )
            raw_c = [o[0].text for o in outs]
            instructions: list[str | None] = [instruction_of(r) for r in raw_c]  # type: ignore[arg-type]
        elif self.instruction == "goal_and_state":
            instructions = [goal_and_state(t.instruction, m) for t, m in zip(turns, states)]
        else:
            instructions = [t.instruction if self.instruction == "goal" else None for t in turns]
        ex = self.executor.complete(
            [
                self.prompting.prompt(t.instruction, t.history, t.screenshot, tuple(t.screen_size), instr)
                for t, instr in zip(turns, instructions)
            ],
            seed=derive_seed(seed, 1),
            **kw,
        )
        actions = [o[0].text for o in ex]
        raw_s: list[str | None] = [None] * len(turns)
        new_states = list(states)
        if self.tracker is not None and self.memory == "tracker":
            reports = [
                executor_report(u, instr, with_instruction=self.tracker_sees_instruction)
                for u, instr in zip(actions, instructions)
            ]
            outs = self.tracker.complete(
                [tracker_prompt(t.instruction, m, u) for t, m, u in zip(turns, states, reports)],
                seed=derive_seed(seed, 2),
                **kw,
            )
            raw_s = [o[0].text for o in outs]
            new_states = [state_of(r, m) for r, m in zip(raw_s, states)]  # type: ignore[arg-type]
            for t, m in zip(turns, new_states):
                self._state[t.key] = m
        return [
            AgentStep(
                text=u,
                info={
                    "instruction": instr,
                    "state": m,
                    "next_state": m2,
                    "coordinator": c,
                    "tracker": s,
                },
            )
            for u, instr, m, m2, c, s in zip(actions, instructions, states, new_states, raw_c, raw_s)
        ]
