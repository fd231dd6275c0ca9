"""Policies and episode loops (docs/architecture.md, "Policies and rollouts").

* :mod:`.policy`: the :class:`Policy` interface (prompts -> ``n`` :class:`Completion` each),
  :class:`HFPolicy` (batched, left-padded generation with a transformers model; greedy or
  sampled; also a frozen co-model) and :class:`FunctionPolicy` (answers from a function: scripted
  experts, test doubles).
* :mod:`.agents`: :class:`Agent` (answers a batch of turns, one per running episode, with
  per-episode state: multi-model agents such as planner + grounder), :class:`PolicyAgent` (one
  policy as an agent) and :func:`agent_steps` (recorded steps answered by an agent).
* :mod:`.online`: :func:`play_online`, lockstep MiniGUI episodes with the agent's own history.
* :mod:`.offline`: :func:`step_prompts` (recorded steps with their ground-truth history) and
  :func:`rollout_recorded` (multi-turn rollouts over recorded episodes with ``decide`` and
  ``history_builder`` hooks: patching, stopping, rewritten or cropped history images).

Loops take a ``Policy`` argument; nothing here reads a run config or names a paper.
"""

from guirl.rollout.agents import Agent, AgentStep, PolicyAgent, RecordedStep, Turn, agent_steps, as_agent
from guirl.rollout.offline import (
    Decide,
    Decision,
    EpisodeRollout,
    HistoryBuilder,
    HistoryEntry,
    StepOutcome,
    StepPrompt,
    annotated_entry,
    follow_annotation,
    keep_policy_action,
    policy_entry,
    recorded_history,
    rollout_recorded,
    step_prompts,
)
from guirl.rollout.online import ONLINE_FIELDS, play_online
from guirl.rollout.policy import (
    Completion,
    FunctionPolicy,
    HFPolicy,
    Policy,
    Prompt,
    derive_seed,
    end_at_placeholder,
    open_image,
    trim_generated,
)

__all__ = [
    "ONLINE_FIELDS",
    "Agent",
    "AgentStep",
    "PolicyAgent",
    "RecordedStep",
    "Turn",
    "agent_steps",
    "as_agent",
    "Completion",
    "Decide",
    "Decision",
    "EpisodeRollout",
    "FunctionPolicy",
    "HFPolicy",
    "HistoryBuilder",
    "HistoryEntry",
    "Policy",
    "Prompt",
    "StepOutcome",
    "StepPrompt",
    "annotated_entry",
    "derive_seed",
    "follow_annotation",
    "keep_policy_action",
    "open_image",
    "play_online",
    "policy_entry",
    "recorded_history",
    "rollout_recorded",
    "step_prompts",
    "trim_generated",
    "end_at_placeholder",
]
