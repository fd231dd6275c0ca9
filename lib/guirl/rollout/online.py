"""Online episodes: a policy or an agent plays MiniGUI tasks from their first screen with its own
history.

All tasks advance in lockstep, so each turn is one batched call over the tasks still running
(:meth:`Policy.complete`, or :meth:`guirl.rollout.agents.Agent.act` for a multi-model agent). The prompt has the task's instruction, the agent's previous actions (with
their screenshots in ``nAO`` mode) and the current screen; there is no step instruction online.
An output that does not parse is a wasted turn (the screen does not change) and is shown in
the history as its raw text (first 200 characters); a parsed action is shown re-written in the
output format. Task SR and Subgoal SR come from the tasks' state checks (the AndroidLong
protocol; :func:`guirl.metrics.summary.summarize_online` averages runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from guirl import timing
from guirl.actions.formats import get_format
from guirl.prompts import PromptSpec, format_context
from guirl.rollout.agents import Agent, Turn, as_agent
from guirl.rollout.policy import Policy, derive_seed

__all__ = ["ONLINE_FIELDS", "play_online", "subgoal_rate"]

#: Fields of one online episode record.
ONLINE_FIELDS = (
    "task_id",
    "category",
    "success",
    "subgoals_done",
    "subgoals_total",
    "subgoal_rate",
    "turns",
    "n_unparsable",
    "n_invalid",
    "actions",
    "stopped",
    "trace",
)

#: Characters of an unparsable output kept in the history.
UNPARSABLE_HISTORY_CHARS = 200


def play_online(
    policy: Policy | Agent,
    tasks: Sequence[Any],
    spec: PromptSpec,
    *,
    width: int,
    height: int,
    max_turns: int,
    min_pixels: int,
    max_pixels: int,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Play MiniGUI ``tasks`` (``guirl.env`` task objects) with ``policy``; one record per task.

    Args:
        policy: a :class:`Policy` (answers one prompt per running task each turn, ``n=1``) or an
            :class:`~guirl.rollout.agents.Agent` (answers one :class:`~guirl.rollout.agents.Turn`
            per running task; its per-task state starts afresh, keyed by the task id).
        tasks: the tasks; each gets its own ``width`` x ``height`` px phone.
        spec: history setting, and the output format of a policy (an agent's own
            ``output_format`` is what its text is parsed with); ``spec.use_step_instruction``
            has no effect: there is no step instruction online.
        max_turns: turn limit per task (the phone's step limit too).
        min_pixels, max_pixels: the processor's resize bounds (coordinates the model sees).
        do_sample, temperature, top_p: decoding (greedy by default).
        seed: sampling seed of the run; turn ``k`` uses ``derive_seed(seed, k)``.

    Returns:
        Records with :data:`ONLINE_FIELDS`: ``success`` (the task's check on the final state),
        ``subgoals_done`` / ``subgoals_total`` / ``subgoal_rate``, ``turns`` taken,
        ``n_unparsable`` outputs, ``n_invalid`` actions the phone rejected, ``actions`` (the
        parsed actions as dicts, in order), ``stopped`` (the agent ended the episode itself, by
        terminating or answering, rather than running out of turns) and ``trace`` (one dict per
        turn: ``screen``, the ``"<app>/<screen>"`` the turn acted on; ``parsed``; the phone's
        ``effect``, ``"changed"`` or ``"no_change"``, and ``invalid`` reason, ``None`` for an
        unparsable output), in the order of ``tasks``; an agent whose steps carry ``info`` adds
        ``agent_info`` (one dict per turn).
    """
    from tqdm.auto import tqdm

    from guirl.env import MiniGUIEnv

    agent = as_agent(policy, spec, min_pixels=min_pixels, max_pixels=max_pixels)
    agent.reset([task.task_id for task in tasks])
    fmt = get_format(agent.output_format)
    ctx = format_context((width, height), min_pixels, max_pixels)
    envs, obs, hist, recs = [], [], [], []
    for task in tasks:
        with timing.phase("env", "online"):
            env = MiniGUIEnv(width=width, height=height, render=True, max_steps=max_turns)
            o, _ = env.reset(options={"task": task})
        envs.append(env)
        obs.append(o)
        hist.append([])
        recs.append(
            {
                "task_id": task.task_id,
                "category": task.category,
                "turns": 0,
                "n_unparsable": 0,
                "n_invalid": 0,
                "actions": [],
                "agent_info": [],
                "stopped": False,
                "trace": [],
                "done": False,
            }
        )
    for turn in tqdm(range(max_turns), desc="online", disable=not progress):
        live = [i for i, r in enumerate(recs) if not r["done"]]
        if not live:
            break
        turns = [
            Turn(
                tasks[i].task_id,
                tasks[i].instruction,
                tuple(hist[i]),
                obs[i]["screenshot"],
                (width, height),
                None,
                turn,
            )
            for i in live
        ]
        answers = agent.act(
            turns, do_sample=do_sample, temperature=temperature, top_p=top_p, seed=derive_seed(seed, turn)
        )
        for i, answer in zip(live, answers, strict=True):
            text = answer.text
            r = recs[i]
            r["turns"] += 1
            if answer.info:
                r["agent_info"].append(dict(answer.info))
            parsed = fmt.parse(text, ctx)
            ui = envs[i].state.ui
            screen = f"{ui.app}/{ui.screen}"
            if not parsed.ok:
                r["n_unparsable"] += 1
                r["trace"].append({"screen": screen, "parsed": False, "effect": None, "invalid": None})
                hist[i].append((text.strip()[:UNPARSABLE_HISTORY_CHARS], obs[i]["screenshot"]))
                continue
            a = parsed.action
            r["actions"].append(a.to_dict())
            hist[i].append((fmt.format(a, ctx) if fmt.can_format(a) else text, obs[i]["screenshot"]))
            with timing.phase("env", "online"):
                o, _, terminated, truncated, info = envs[i].step(a)
            obs[i] = o
            r["trace"].append(
                {"screen": screen, "parsed": True, "effect": info.get("effect"), "invalid": info.get("invalid")}
            )
            if info.get("invalid"):
                r["n_invalid"] += 1
            if terminated:
                r["stopped"] = True
            if terminated or truncated:
                r["done"] = True
    out = []
    for task, env, r in zip(tasks, envs, recs):
        status = task.subgoal_status(env.state)
        done = sum(bool(s) for s in status)
        success = bool(task.check(env.state))
        out.append(
            {
                **{k: v for k, v in r.items() if k != "done" and not (k == "agent_info" and not v)},
                "success": success,
                "subgoals_done": done,
                "subgoals_total": len(status),
                "subgoal_rate": subgoal_rate(task, env.state),
            }
        )
    return out


def subgoal_rate(task: Any, state: Any) -> float:
    """The share of ``task``'s subgoals met in phone ``state`` (in [0, 1]); a task without
    subgoals counts its own check (1.0 or 0.0). AndroidLong's Subgoal SR averages it over tasks."""
    status = task.subgoal_status(state)
    if not status:
        return float(bool(task.check(state)))
    return sum(bool(s) for s in status) / len(status)
