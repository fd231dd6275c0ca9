"""Online episodes: a policy plays MiniGUI tasks from their first screen with its own history.

All tasks advance in lockstep, so each turn is one batched :meth:`Policy.complete` call over the
tasks still running. The prompt has the task's instruction, the agent's previous actions (with
their screenshots in ``nAO`` mode) and the current screen; there is no step instruction online.
An output that does not parse is a wasted turn (the screen does not change) and is shown in
the history as its raw text (first 200 characters); a parsed action is shown re-written in the
output format. Task SR and Subgoal SR come from the tasks' state checks (the AndroidLong
protocol; :func:`guirl.metrics.summary.summarize_online` averages runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from guirl.actions.formats import get_format
from guirl.prompts import PromptSpec, action_text, build_prompt, format_context
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
)

#: Characters of an unparsable output kept in the history.
UNPARSABLE_HISTORY_CHARS = 200


def play_online(
    policy: Policy,
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
        policy: answers one prompt per running task each turn (``n=1``).
        tasks: the tasks; each gets its own ``width`` x ``height`` px phone.
        spec: output format and history setting (``spec.use_step_instruction`` has no effect:
            there is no step instruction online).
        max_turns: turn limit per task (the phone's step limit too).
        min_pixels, max_pixels: the processor's resize bounds (coordinates the model sees).
        do_sample, temperature, top_p: decoding (greedy by default).
        seed: sampling seed of the run; turn ``k`` uses ``derive_seed(seed, k)``.

    Returns:
        Records with :data:`ONLINE_FIELDS`: ``success`` (the task's check on the final state),
        ``subgoals_done`` / ``subgoals_total`` / ``subgoal_rate``, ``turns`` taken,
        ``n_unparsable`` outputs, ``n_invalid`` actions the phone rejected, ``actions`` (the
        parsed actions as dicts, in order), in the order of ``tasks``.
    """
    from tqdm.auto import tqdm

    from guirl.env import MiniGUIEnv

    fmt = get_format(spec.output_format)
    ctx = format_context((width, height), min_pixels, max_pixels)
    sp = ctx.space("resized")
    res = (sp.width, sp.height)  # the screen as the model sees it (system prompts may state it)
    envs, obs, hist, recs = [], [], [], []
    for task in tasks:
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
                "done": False,
            }
        )
    for turn in tqdm(range(max_turns), desc="online", disable=not progress):
        live = [i for i, r in enumerate(recs) if not r["done"]]
        if not live:
            break
        prompts = [
            build_prompt(tasks[i].instruction, hist[i], obs[i]["screenshot"], spec, None, resolution=res) for i in live
        ]
        completions = policy.complete(
            prompts, do_sample=do_sample, temperature=temperature, top_p=top_p, seed=derive_seed(seed, turn)
        )
        for i, (completion, *_) in zip(live, completions):
            text = completion.text
            r = recs[i]
            r["turns"] += 1
            parsed = fmt.parse(text, ctx)
            if not parsed.ok:
                r["n_unparsable"] += 1
                hist[i].append((text.strip()[:UNPARSABLE_HISTORY_CHARS], obs[i]["screenshot"]))
                continue
            a = parsed.action
            r["actions"].append(a.to_dict())
            hist[i].append((action_text(a, spec, ctx) if fmt.can_format(a) else text, obs[i]["screenshot"]))
            o, _, terminated, truncated, info = envs[i].step(a)
            obs[i] = o
            if info.get("invalid"):
                r["n_invalid"] += 1
            if terminated or truncated:
                r["done"] = True
    out = []
    for task, env, r in zip(tasks, envs, recs):
        status = task.subgoal_status(env.state)
        done = sum(bool(s) for s in status)
        success = bool(task.check(env.state))
        out.append(
            {
                **{k: v for k, v in r.items() if k != "done"},
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
