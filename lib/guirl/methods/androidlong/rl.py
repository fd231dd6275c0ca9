"""AndroidLong's GRPO (App. C, Table 7) as hooks of the RL engine: role ``androidlong``.

The paper trains online, in the emulator (Verl GRPO with agent rollouts: at most 100 turns, 8
samples per task, 256 concurrent episodes, Table 7); this role does the same in MiniGUI:

* **tasks**: MiniGUI long-loop tasks (AndroidLong's category: "for each of the first 4 contacts,
  if ...", "mark every unfinished note as done") in fresh worlds, drawn with
  ``seed + RL_TASK_SEED_OFFSET`` (away from the seeds of the data set and of the online evaluation,
  :data:`guirl.studies.shared.evaluation.ONLINE_TASK_SEED_OFFSET`), ``rl.prompts_per_step x
  rl.max_steps`` of them, streamed (shuffled when ``androidlong.rl.shuffle``);
* **rollout**: each task is played ``rl.group_size`` times from its first screen by the policy being
  trained (:func:`guirl.rollout.play_online`, sampled, at most ``eval.max_turns`` turns), with its
  memory in its reasoning when ``androidlong.memory`` (:class:`~guirl.methods.androidlong.memory.MemoryAgent`)
  or as a plain policy; every turn is one training sample (its prompt and completion);
* **reward**: Subgoal SR of the episode's final state (the share of the task's state-checked
  subgoals that hold), given to every turn of the episode; the supplement states no reward formula,
  the issue's "Subgoal-based rewards" is read as this (components: ``subgoal_rate``, ``success``,
  ``format`` = the share of the episode's outputs that parsed);
* **advantage**: GRPO over the ``group_size`` episodes of a task (one reward per episode, the group's
  mean and std; ``rl.advantage``), each turn taking its episode's advantage.

Everything else is the engine's (``rl.*``: clipped loss, KL to the reference, one update per step
with ``rl.mini_batches`` 1) and, on the paper profiles, Table 7 through
:func:`guirl.methods.androidlong.config.variant_updates`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from guirl.configbase import RunConfig
from guirl.methods.androidlong.config import section
from guirl.methods.androidlong.memory import MemoryAgent
from guirl.rewards.base import RewardResult
from guirl.rl.samples import RolloutArgs, Sample
from guirl.rollout.agents import AgentStep, PolicyAgent, Turn
from guirl.rollout.policy import Completion

if TYPE_CHECKING:
    from guirl.rl.hooks import HookInputs, RLHooks

__all__ = [
    "RL_TASK_SEED_OFFSET",
    "RecordingAgent",
    "androidlong_rl_hooks",
    "episode_advantage_hook",
    "online_rollout",
    "rl_tasks",
    "subgoal_reward",
]

#: The GRPO tasks are drawn with ``seed = cfg.seed + RL_TASK_SEED_OFFSET`` (prefix ``rl``).
RL_TASK_SEED_OFFSET = 2000
#: MiniGUI's task category of AndroidLong's long looping tasks: what its GRPO trains on and its
#: Table 6 is scored on (:data:`guirl.env.tasks.CATEGORIES`).
TASK_CATEGORY = "long_loop"


def rl_tasks(cfg: RunConfig, n: int) -> list[Any]:
    """``n`` MiniGUI long-loop tasks for GRPO (module doc)."""
    from guirl.env.tasks import generate_tasks

    return generate_tasks(n, seed=cfg.seed + RL_TASK_SEED_OFFSET, categories=[TASK_CATEGORY], prefix="rl")


class _Recorder:
    """A policy that remembers the prompts and first completions of its last ``complete`` call."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.last: list[tuple[Any, Completion]] = []

    def complete(self, prompts, **kw):
        outs = self.policy.complete(prompts, **kw)
        self.last = [(p, c[0]) for p, c in zip(prompts, outs, strict=True)]
        return outs


class RecordingAgent:
    """An agent (a :class:`MemoryAgent`, or a :class:`~guirl.rollout.PolicyAgent`) around a policy
    that keeps, per episode key, the ``(prompt, completion)`` of every turn it answered: what a turn
    of an online rollout trains on. The inner agent must ask its policy once per ``act``, one prompt
    per turn in order (both do)."""

    def __init__(self, policy: Any, spec: Any, *, memory: bool, min_pixels: int, max_pixels: int) -> None:
        self.recorder = _Recorder(policy)
        kind = MemoryAgent if memory else PolicyAgent
        self.agent = kind(self.recorder, spec, min_pixels=min_pixels, max_pixels=max_pixels)
        self.output_format = self.agent.output_format
        self.turns: dict[str, list[tuple[Any, Completion]]] = {}

    def reset(self, keys: Sequence[str]) -> None:
        self.agent.reset(keys)
        for k in keys:
            self.turns[k] = []

    def act(self, turns: Sequence[Turn], **kw: Any) -> list[AgentStep]:
        self.recorder.last = []
        steps = self.agent.act(turns, **kw)
        if len(self.recorder.last) != len(turns):
            raise RuntimeError(f"the agent asked for {len(self.recorder.last)} completions for {len(turns)} turns")
        for turn, pair in zip(turns, self.recorder.last, strict=True):
            self.turns.setdefault(turn.key, []).append(pair)
        return steps


def online_rollout(cfg: RunConfig, *, memory: bool):
    """Rollout hook: ``args.group_size`` online MiniGUI episodes per task, every turn a sample (module
    doc). Sample ``info``: ``episode`` (index in the call), ``turn``, ``subgoal_rate``, ``success``,
    ``turns``, ``n_unparsable``."""
    from guirl.prompts import prompt_spec
    from guirl.rollout import play_online

    spec = prompt_spec(cfg, cfg.rl.histories[0])
    m = cfg.model

    def rollout(policy: Any, tasks: Sequence[Any], args: RolloutArgs) -> list[Sample]:
        n = int(args.group_size)
        copies = [replace(t, task_id=f"{t.task_id}#{k}") for t in tasks for k in range(n)]
        agent = RecordingAgent(policy, spec, memory=memory, min_pixels=m.min_pixels, max_pixels=m.max_pixels)
        results = play_online(
            agent,
            copies,
            spec,
            width=cfg.data.width,
            height=cfg.data.height,
            max_turns=cfg.eval.max_turns,
            min_pixels=m.min_pixels,
            max_pixels=m.max_pixels,
            do_sample=True,
            temperature=args.temperature,
            top_p=args.top_p,
            seed=args.seed,
            progress=False,
        )
        samples: list[Sample] = []
        for i, (copy, res) in enumerate(zip(copies, results, strict=True)):
            info = {
                "episode": i,
                "subgoal_rate": float(res["subgoal_rate"]),
                "success": float(res["success"]),
                "turns": int(res["turns"]),
                "n_unparsable": int(res["n_unparsable"]),
            }
            for t, (prompt, c) in enumerate(agent.turns[copy.task_id]):
                samples.append(
                    Sample(
                        prompt=prompt,
                        completion_ids=tuple(c.token_ids),
                        text=c.text,
                        group=i // n,
                        row={"task_id": copy.task_id, "category": res["category"]},
                        info={**info, "turn": t},
                    )
                )
        return samples

    return rollout


def subgoal_reward(samples: Sequence[Sample]) -> list[RewardResult]:
    """Reward hook: the episode's final Subgoal SR for every turn (module doc)."""
    return [
        RewardResult(
            s.info["subgoal_rate"],
            {
                "subgoal_rate": s.info["subgoal_rate"],
                "success": s.info["success"],
                "format": 1.0 - s.info["n_unparsable"] / max(1, s.info["turns"]),
            },
        )
        for s in samples
    ]


def episode_advantage_hook(estimator: str = "grpo", *, eps: float = 1e-6):
    """Advantage hook: ``estimator`` (:data:`guirl.rl.advantages.ADVANTAGE_ESTIMATORS`) over the
    episodes of each group, one reward per episode, broadcast to its turns."""
    from guirl.rl.advantages import get_advantage_estimator

    fn = get_advantage_estimator(estimator)

    def advantage(samples: Sequence[Sample]) -> torch.Tensor:
        if not samples:
            return torch.zeros(0, dtype=torch.float64)
        keys = list(dict.fromkeys((s.group, s.info["episode"]) for s in samples))
        first = {}
        for s in samples:
            first.setdefault((s.group, s.info["episode"]), s.reward)
        rewards = torch.tensor([first[k] for k in keys], dtype=torch.float64)
        groups = torch.tensor([k[0] for k in keys], dtype=torch.long)
        adv = dict(zip(keys, fn(rewards, groups, eps=eps).tolist(), strict=True))
        return torch.tensor([adv[(s.group, s.info["episode"])] for s in samples], dtype=torch.float64)

    advantage.__name__ = f"episode_{estimator}_advantage"
    return advantage


def androidlong_rl_hooks(cfg: RunConfig, inputs: HookInputs) -> RLHooks:
    """Engine hooks of AndroidLong's online GRPO (role ``androidlong``; module doc). ``inputs`` is not
    read: the tasks are generated, not recorded."""
    from guirl.rl.hooks import RLHooks
    from guirl.rl.samples import TaskStream

    sec = section(cfg)
    rl = cfg.rl
    tasks = rl_tasks(cfg, max(rl.prompts_per_step * rl.max_steps, rl.prompts_per_step))
    return RLHooks(
        tasks=TaskStream(tasks, seed=cfg.seed, shuffle=sec.rl.shuffle),
        rollout=online_rollout(cfg, memory=sec.memory),
        reward=subgoal_reward,
        advantage=episode_advantage_hook(rl.advantage, eps=rl.adv_eps),
    )
