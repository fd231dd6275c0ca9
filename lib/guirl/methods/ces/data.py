"""CES's training data from expert trajectories (CES Sec. 4.3.1, App. B.1).

The task state ``m`` is the data set's progress annotation: GUI-Odyssey's ``context`` ("a summary of
actions taken before the current step", App. B.1), which the loaders keep as
``Step.progress_summary``; MiniGUI writes the same field from its tasks' subgoal checks
(:func:`guirl.env.expert.progress_text`: subgoals met so far and the last two low-level
instructions). So:

* :func:`state_before` ``(episode, t)`` is ``m_gt^{t-1}``, the state the Coordinator sees at step
  ``t`` (stage 1 and its warm-up): step ``t``'s annotation, except at ``t = 0``, where every
  episode starts from :data:`INITIAL_STATE` (what the loop's memory holds before the first step,
  offline and online alike; the annotation there would tell the Coordinator how many subgoals the
  first screen already meets, which no deployed loop knows);
* :func:`state_after` ``(episode, t)`` is the State Tracker's target after step ``t``: "the
  ``context`` of the next step" (App. B.1); after the last step of a MiniGUI episode, the same text
  written from the subgoals the recorded trajectory met (all of them for a successful one); ``None``
  where a data set has no next annotation.

Warm-up records (:func:`coordinator_records`, :func:`tracker_records`) are
:mod:`guirl.train.data` records for a ``records`` SFT stage:

* Coordinator: prompt = App. C's Coordinator turn with ``(q, m_gt^{t-1}, s^t)``; target =
  ``<think>description. intention</think><answer>low-level instruction</answer>`` (App. B.1;
  ``ces.warmup.think: intention`` keeps the intention only);
* State Tracker: prompt = App. C's State Tracker turn with ``(q, m_gt^{t-1}, u_gt^t)``, ``u_gt^t``
  the ground-truth action written in the Executor's output format
  (:func:`guirl.methods.ces.roles.executor_report`); target = ``<think></think><answer>m_gt^t
  </answer>``: the paper's plain ``context`` inside the tags its format reward asks for (eq. 22;
  ``docs/fidelity/ces.md``, "Where the paper contradicts itself"), with an empty thought.

:func:`sample_steps` draws the steps (``ces.warmup.samples``, App. B.1's 1K; ``ces.rl_pool``, its
3K for RL) from the training episodes with a seed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from guirl.data.schema import Episode
from guirl.methods.ces.roles import coordinator_prompt, executor_report, format_think_answer, tracker_prompt

__all__ = [
    "INITIAL_STATE",
    "StepRef",
    "state_before",
    "state_after",
    "coordinator_target",
    "sample_steps",
    "coordinator_records",
    "tracker_records",
    "gt_report_fn",
]

#: The task state before the first step (the loop's memory when an episode starts).
INITIAL_STATE = "Nothing done yet."

#: ``(episode, t)``: step ``t`` of a recorded episode.
StepRef = tuple[Episode, int]


def state_before(episode: Episode, t: int) -> str:
    """``m_gt^{t-1}``: the task state the Coordinator sees at step ``t`` (module doc)."""
    if not 0 <= t < len(episode.steps):
        raise IndexError(f"episode {episode.episode_id} has {len(episode.steps)} steps, asked for step {t}")
    if t == 0:
        return INITIAL_STATE
    state = episode.steps[t].progress_summary.strip()
    if not state:
        raise ValueError(
            f"episode {episode.episode_id} step {t} has no progress annotation (progress_summary); CES needs the "
            "data set's task-state field (GUI-Odyssey's context, MiniGUI's subgoal progress)"
        )
    return state


def state_after(episode: Episode, t: int) -> str | None:
    """The task state after step ``t`` (the State Tracker's target, module doc), or ``None`` when
    the data set has none (the last step of a non-MiniGUI episode)."""
    if not 0 <= t < len(episode.steps):
        raise IndexError(f"episode {episode.episode_id} has {len(episode.steps)} steps, asked for step {t}")
    if t + 1 < len(episode.steps):
        return state_before(episode, t + 1)
    if episode.source != "minigui" or not episode.subgoals:
        return None
    from guirl.env.expert import progress_text

    last = episode.steps[-1].extra.get("subgoals_done", 0)
    done = len(episode.subgoals) if episode.success else int(last)
    return progress_text(done, len(episode.subgoals), [s.low_level_instruction for s in episode.steps])


def coordinator_target(episode: Episode, t: int, think: str = "description_intention") -> str | None:
    """The Coordinator's warm-up target at step ``t`` (module doc), ``None`` when the step has no
    low-level instruction. ``think``: ``"description_intention"`` (App. B.1) or ``"intention"``."""
    step = episode.steps[t]
    instruction = step.low_level_instruction.strip()
    if not instruction:
        return None
    parts = (
        [step.intention.strip()] if think == "intention" else [step.screen_description.strip(), step.intention.strip()]
    )
    thought = ". ".join(p.rstrip(".") for p in parts if p)
    return format_think_answer(instruction, thought=thought + "." if thought else "")


def sample_steps(
    episodes: Sequence[Episode], n: int, *, seed: int, keep: Callable[[Episode, int], bool] | None = None
) -> list[StepRef]:
    """``n`` steps ``(episode, t)`` drawn without replacement from ``episodes`` with ``seed`` (all
    of them, shuffled, when there are fewer); ``keep`` filters the candidates first."""
    refs = [(ep, t) for ep in episodes for t in range(len(ep.steps)) if keep is None or keep(ep, t)]
    random.Random(seed).shuffle(refs)
    return refs[:n]


def _image(root: Path, data_dir: Path | None, rel: str) -> str:
    path = Path(root) / rel
    if data_dir is None:
        return str(path)
    return os.path.relpath(path, data_dir)  # relative to the stage's data folder (train.data.read_records)


def coordinator_records(
    steps: Sequence[StepRef], *, image_root: str | Path, data_dir: str | Path | None = None, think: str
) -> list[dict[str, Any]]:
    """Warm-up records of the Coordinator (module doc), one per step with a low-level instruction;
    image paths relative to ``data_dir`` (the records stage's data folder) when given."""
    out = []
    for ep, t in steps:
        target = coordinator_target(ep, t, think)
        if target is None:
            continue
        step = ep.steps[t]
        shot = _image(Path(image_root), Path(data_dir) if data_dir is not None else None, step.screenshot)
        messages, images = coordinator_prompt(ep.instruction, state_before(ep, t), shot)
        out.append(
            {
                "prompt": messages,
                "completion": [{"role": "assistant", "content": [{"type": "text", "text": target}]}],
                "images": images,
                "episode_id": ep.episode_id,
                "step_id": step.step_id,
                "history": "ces_coordinator",
                "action_type": step.action.type.value,
            }
        )
    return out


def tracker_records(steps: Sequence[StepRef], *, report: Callable[[Episode, int], str]) -> list[dict[str, Any]]:
    """Warm-up records of the State Tracker (module doc), one per step with a next state;
    ``report(episode, t)`` is ``u_gt^t`` (the ground-truth action in the Executor's format, see
    :func:`guirl.methods.ces.agent.ExecutorPrompting.gt_report`). Text only: string content, no image."""
    out = []
    for ep, t in steps:
        after = state_after(ep, t)
        if after is None:
            continue
        messages, _ = tracker_prompt(ep.instruction, state_before(ep, t), report(ep, t))
        out.append(
            {
                "prompt": messages,
                "completion": [{"role": "assistant", "content": format_think_answer(after, thought="")}],
                "images": [],
                "episode_id": ep.episode_id,
                "step_id": ep.steps[t].step_id,
                "history": "ces_state_tracker",
                "action_type": ep.steps[t].action.type.value,
            }
        )
    return out


def gt_report_fn(write_action: Callable[[Any], str], *, with_instruction: bool) -> Callable[[Episode, int], str]:
    """``report(episode, t)`` for :func:`tracker_records`: ``u_gt^t`` from the step's annotated
    action written by ``write_action(step)`` and, when ``with_instruction``, its low-level instruction
    (:func:`guirl.methods.ces.roles.executor_report`)."""

    def report(ep: Episode, t: int) -> str:
        step = ep.steps[t]
        return executor_report(write_action(step), step.low_level_instruction, with_instruction=with_instruction)

    return report
