"""Agents: what answers a GUI step when more than one model (or a memory) is involved.

A :class:`~guirl.rollout.Policy` turns a built prompt into text. Several papers act with more than
one model per step or carry state from step to step: Co-EPG's planner writes a plan that a
grounder turns into a point; CES's Coordinator writes an instruction for a frozen Executor while a
State Tracker keeps the task's memory; AndroidLong's agent keeps a memory of processed items in its
reasoning. An :class:`Agent` takes one :class:`Turn` per running episode (the goal, the history
shown so far, the current screenshot) and answers each with an :class:`AgentStep`: the action as
text in the agent's ``output_format`` (what the loops parse and score) and ``info`` (what the
agent wants kept: plans, instructions, memories). An agent keeps its own per-episode state, keyed
by ``Turn.key``; :meth:`Agent.reset` starts episodes afresh.

The loops that drive agents:

* online MiniGUI play: :func:`guirl.rollout.play_online` takes an agent as well as a policy;
* recorded episodes: :func:`agent_steps` answers every step with its ground-truth history, the
  episodes in lockstep so that an agent's state runs forward through each episode.

:class:`PolicyAgent` is a single policy as an agent (its prompts are exactly
:func:`guirl.prompts.build_prompt`'s, the ones :func:`guirl.rollout.step_prompts` builds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from guirl.data.schema import Episode
from guirl.prompts import PromptSpec, build_prompt, format_context
from guirl.rollout.policy import Policy

__all__ = ["Turn", "AgentStep", "Agent", "PolicyAgent", "as_agent", "RecordedStep", "agent_steps"]


@dataclass(frozen=True)
class Turn:
    """What an agent sees at one step of one episode.

    ``key``: the episode's id (an agent keys its per-episode state by it); ``instruction``: the
    goal; ``history``: ``(action text, screenshot)`` of the earlier steps the loop shows (the
    ground-truth actions offline, the agent's own online; oldest first, every earlier step);
    ``screenshot``: the current screen (a path or a PIL image); ``screen_size``: its ``(width,
    height)`` in pixels; ``step_instruction``: the recorded step's low-level instruction (offline
    only, ``None`` online: an agent that plays at the High level ignores it); ``t``: the step
    index; ``elements``: the referring elements a web page's candidate ranker lists for the step
    (offline Multimodal-Mind2Web, ``Step.extra["referring_elements"]``; empty elsewhere)."""

    key: str
    instruction: str
    history: tuple[tuple[str, Any], ...]
    screenshot: Any
    screen_size: tuple[int, int]
    step_instruction: str | None = None
    t: int = 0
    elements: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentStep:
    """An agent's answer to one :class:`Turn`: ``text`` (the action in the agent's output format),
    ``info`` (JSON-serialisable facts the agent wants recorded, e.g. ``{"plan": ...}``)."""

    text: str
    info: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Agent(Protocol):
    """Answers a batch of turns (one per running episode) in order; keeps per-episode state."""

    output_format: str

    def reset(self, keys: Sequence[str]) -> None:
        """Forget the state of these episodes (they start again)."""
        ...

    def act(
        self,
        turns: Sequence[Turn],
        *,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[AgentStep]:
        """One :class:`AgentStep` per turn, in input order."""
        ...


class PolicyAgent:
    """A single :class:`~guirl.rollout.Policy` as an :class:`Agent`: each turn becomes the prompt of
    :func:`guirl.prompts.build_prompt` (``spec``'s history window and output format, the model's
    view of the screen at ``min_pixels`` / ``max_pixels``); no state between steps."""

    def __init__(self, policy: Policy, spec: PromptSpec, *, min_pixels: int, max_pixels: int) -> None:
        self.policy, self.spec = policy, spec
        self.min_pixels, self.max_pixels = int(min_pixels), int(max_pixels)
        self.output_format = spec.output_format

    def reset(self, keys: Sequence[str]) -> None:
        return None

    def history(self, turn: Turn) -> list[tuple[str, Any]]:
        """The ``(action text, screenshot)`` pairs the prompt of ``turn`` shows (here: the turn's
        own; an agent with state between steps rewrites them)."""
        return list(turn.history)

    def prompt(self, turn: Turn):
        """The prompt of ``turn`` (what the policy answers)."""
        sp = format_context(turn.screen_size, self.min_pixels, self.max_pixels).space("resized")
        return build_prompt(
            turn.instruction,
            self.history(turn),
            turn.screenshot,
            self.spec,
            turn.step_instruction,
            resolution=(sp.width, sp.height),
        )

    def act(self, turns, *, do_sample=False, temperature=1.0, top_p=1.0, seed=None) -> list[AgentStep]:
        if not turns:
            return []
        outs = self.policy.complete(
            [self.prompt(t) for t in turns], do_sample=do_sample, temperature=temperature, top_p=top_p, seed=seed
        )
        return [self.step(turn, completions[0].text) for turn, completions in zip(turns, outs, strict=True)]

    def step(self, turn: Turn, text: str) -> AgentStep:
        """The :class:`AgentStep` of the policy's answer ``text`` to ``turn``."""
        return AgentStep(text)


def as_agent(policy_or_agent: Any, spec: PromptSpec, *, min_pixels: int, max_pixels: int) -> Agent:
    """``policy_or_agent`` itself when it is an :class:`Agent`, else a :class:`PolicyAgent` of it."""
    if isinstance(policy_or_agent, Agent):
        return policy_or_agent
    return PolicyAgent(policy_or_agent, spec, min_pixels=min_pixels, max_pixels=max_pixels)


@dataclass(frozen=True)
class RecordedStep:
    """Step ``t`` of ``episode`` answered by an agent (:func:`agent_steps`)."""

    episode: Episode
    t: int
    step: AgentStep


def agent_steps(
    agent: Agent,
    episodes: Sequence[Episode],
    spec: PromptSpec,
    *,
    image_root: str | Path,
    min_pixels: int,
    max_pixels: int,
    max_steps: int | None = None,
    progress: bool = False,
) -> list[RecordedStep]:
    """Every recorded step (the first ``max_steps`` in episode order, as
    :func:`guirl.rollout.step_prompts` keeps them) answered by ``agent`` with its ground-truth
    history: the annotated actions written in ``spec.output_format`` with their screenshots. The
    episodes advance in lockstep (step ``t`` of every episode in one :meth:`Agent.act` call), so an
    agent's state runs forward through each episode. Screenshots are paths joined to
    ``image_root`` as :func:`guirl.prompts.episode_step_prompt` joins them. Returns the steps in
    episode order."""
    from tqdm.auto import tqdm

    from guirl.prompts import action_text

    keep = [(ep, t) for ep in episodes for t in range(len(ep.steps))]
    if max_steps is not None:
        keep = keep[:max_steps]
    wanted: dict[str, set[int]] = {}
    for ep, t in keep:
        wanted.setdefault(ep.episode_id, set()).add(t)
    eps = [ep for ep in episodes if ep.episode_id in wanted]
    agent.reset([ep.episode_id for ep in eps])
    root = str(image_root).rstrip("/")

    def path(rel: str) -> str:
        return f"{root}/{rel}" if root else rel

    texts: dict[tuple[str, int], str] = {}
    answers: dict[tuple[str, int], AgentStep] = {}
    horizon = max((max(ts) for ts in wanted.values()), default=-1) + 1
    for t in tqdm(range(horizon), desc="agent steps", disable=not progress):
        turns = []
        for ep in eps:
            if t > max(wanted[ep.episode_id]):
                continue
            for k in range(t):  # the annotated actions of the earlier steps, written once each
                if (ep.episode_id, k) not in texts:
                    s = ep.steps[k]
                    ctx = format_context(s.screen_size, min_pixels, max_pixels)
                    texts[(ep.episode_id, k)] = action_text(s.action, spec, ctx)
            step = ep.steps[t]
            turns.append(
                Turn(
                    key=ep.episode_id,
                    instruction=ep.instruction,
                    history=tuple((texts[(ep.episode_id, k)], path(ep.steps[k].screenshot)) for k in range(t)),
                    screenshot=path(step.screenshot),
                    screen_size=tuple(step.screen_size),
                    step_instruction=step.low_level_instruction or None,
                    t=t,
                    elements=tuple(step.extra.get("referring_elements") or ()),
                )
            )
        for turn, ans in zip(turns, agent.act(turns), strict=True):
            answers[(turn.key, turn.t)] = ans
    return [RecordedStep(ep, t, answers[(ep.episode_id, t)]) for ep, t in keep]
