"""CES's two RL roles for the repository's one RL engine (CES Sec. 4.3.2, App. A.1; Fig. 4).

* ``ces.coordinator`` (stage 1, :func:`coordinator_hooks`, eqs. 8-13): a task is one recorded step
  with its ground-truth state (App. B.1's RL pool, ``ces.rl_pool`` steps of the ``train`` split);
  the Coordinator samples ``rl.group_size`` instructions for ``(q, m_gt^{t-1}, s^t)``; the reward
  runs the **frozen Executor** on every candidate ``(l_i, s^t)`` (greedy, batched; identical
  instructions of a group are executed once) and scores its action with the execution-feedback
  reward (:func:`guirl.methods.ces.reward.ces_reward`, eq. 11), whose format term reads the
  **Coordinator's own output** (eq. 22).
* ``ces.state_tracker`` (stage 2, :func:`state_tracker_hooks`, eqs. 14-20): a task is step ``t >= 1``;
  the State Tracker samples states for ``(q, m_gt^{t-2}, u_gt^{t-1})`` (the summary up to the
  previous step, eq. 15); the reward passes each state through the **frozen Coordinator** (greedy,
  eq. 16) and the **frozen Executor** (eq. 17) at step ``t`` and scores the action (eq. 18), the
  format term reading the **State Tracker's own output**.

Both roles take the frozen models as stage inputs (``Stage.inputs``: ``executor``, and for stage 2
``coordinator``; full-weight folders or LoRA adapters), loaded lazily in the stage process on the
rank's device and never put into the optimiser: stage 2 leaves the Coordinator's weights as they
were. Group advantages are ``rl.advantage`` (GRPO, eq. 12 / 19); no data filter. Per-step log
fields besides the engine's (``reward/format``, ``reward/type``, ``reward/param`` come from the
reward's components): ``instruction_match`` (stage 1: share of trained instructions equal to the
step's annotated low-level instruction) and ``state_match`` (stage 2: share of trained states equal
to the annotated state), ``executor_calls`` (distinct Executor prompts run per step).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guirl.configbase import RunConfig
from guirl.methods.ces.agent import ExecutorPrompting
from guirl.methods.ces.config import ces_section
from guirl.methods.ces.data import sample_steps, state_after, state_before
from guirl.methods.ces.reward import ces_reward
from guirl.methods.ces.roles import (
    coordinator_prompt,
    executor_report,
    instruction_of,
    state_of,
    tracker_prompt,
)

if TYPE_CHECKING:
    from guirl.data.schema import Episode
    from guirl.rl.hooks import HookInputs, RLHooks

__all__ = [
    "COORDINATOR_ROLE",
    "TRACKER_ROLE",
    "CESTask",
    "FrozenPolicy",
    "executor_prompting",
    "role_policy_budget",
    "coordinator_tasks",
    "tracker_tasks",
    "coordinator_hooks",
    "state_tracker_hooks",
]

COORDINATOR_ROLE = "ces.coordinator"
TRACKER_ROLE = "ces.state_tracker"


def _same(a: str | None, b: str | None) -> bool:
    return " ".join((a or "").lower().split()) == " ".join((b or "").lower().split())


def executor_prompting(cfg: RunConfig, history: str) -> ExecutorPrompting:
    """How the run's frozen Executor is prompted (``ces.executor_prompt``): App. C's prompt, or the
    run's own prompt setting at ``history`` (e.g. ``"1AO"``) with the step instruction on
    (``sft.output_format``, ``sft.system_prompt``: 01's Low executor on the tiny profile)."""
    from guirl.prompts import prompt_spec

    m = cfg.model
    if ces_section(cfg).executor_prompt == "ces_executor":
        return ExecutorPrompting("ces_executor", m.min_pixels, m.max_pixels)
    spec = dataclasses.replace(prompt_spec(cfg, history), use_step_instruction=True)
    return ExecutorPrompting("step_instruction", m.min_pixels, m.max_pixels, spec)


def role_policy_budget(cfg: RunConfig, role: str) -> int:
    """Generation budget of a role in the loop: the Executor's ``eval.max_new_tokens``, the
    Coordinator's / State Tracker's ``max_new_tokens`` (CES Table 4's max_response_length)."""
    sec = ces_section(cfg)
    return {
        "executor": cfg.eval.max_new_tokens,
        "coordinator": sec.coordinator.max_new_tokens,
        "state_tracker": sec.state_tracker.max_new_tokens,
    }[role]


class FrozenPolicy:
    """A :class:`~guirl.rollout.Policy` around a frozen model folder (full weights or a LoRA
    adapter, :func:`guirl.models.load_folder`), loaded on first use on this process's device
    (``runtime.device``; a rank's own GPU under ``accelerate launch``), greedy unless asked, its
    parameters never requiring gradients."""

    def __init__(self, folder: str | Path, cfg: RunConfig, *, max_new_tokens: int, desc: str = "frozen") -> None:
        self.folder, self.cfg, self.max_new_tokens, self.desc = Path(folder), cfg, int(max_new_tokens), desc
        self._policy: Any = None

    def __repr__(self) -> str:
        return f"FrozenPolicy({self.folder.name}, loaded={self._policy is not None})"

    @property
    def model(self) -> Any:
        return self.load().model

    def load(self) -> Any:
        if self._policy is None:
            from guirl.models import load_folder
            from guirl.rollout import HFPolicy

            m, rt = self.cfg.model, self.cfg.runtime
            device = "cpu" if rt.device == "cpu" else f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
            model, processor = load_folder(
                self.folder, min_pixels=m.min_pixels, max_pixels=m.max_pixels, dtype=m.torch_dtype, device=device
            )
            model.requires_grad_(False).eval()
            self._policy = HFPolicy(
                model,
                processor,
                max_new_tokens=self.max_new_tokens,
                batch_size=self.cfg.eval.batch_size,
                desc=self.desc,
            )
        return self._policy

    def complete(self, prompts, **kwargs):
        return self.load().complete(prompts, **kwargs)


@dataclass(frozen=True)
class CESTask:
    """One RL task: the trained role's ``prompt``, the step it scores (``episode``, ``t``; the
    screenshot under ``image_root``), the gt columns the reward reads (``row``) and the annotated
    history the Executor's prompt shows (``history``: ``(action text, screenshot)`` pairs)."""

    prompt: tuple[list[dict[str, Any]], list[Any]]
    episode: Any
    t: int
    image_root: Path
    row: Mapping[str, Any]
    history: tuple[tuple[str, str], ...] = field(default=())

    @property
    def screenshot(self) -> str:
        return str(self.image_root / self.episode.steps[self.t].screenshot)

    @property
    def screen_size(self) -> tuple[int, int]:
        return tuple(self.episode.steps[self.t].screen_size)  # type: ignore[return-value]


def _row(ep: Episode, t: int, index: int) -> dict[str, Any]:
    import json

    step = ep.steps[t]
    return {
        "gt_action": json.dumps(step.action.to_dict()),
        "gt_box": list(step.target_box) if step.target_box else None,
        "candidate_boxes": [list(b) for b in step.candidate_boxes],
        "screen_size": list(step.screen_size),
        "episode_id": ep.episode_id,
        "step_id": step.step_id,
        "task_index": index,
    }


def _history(ep: Episode, t: int, image_root: Path, prompting: ExecutorPrompting) -> tuple[tuple[str, str], ...]:
    return tuple(
        (prompting.write(ep.steps[k].action, tuple(ep.steps[k].screen_size)), str(image_root / ep.steps[k].screenshot))
        for k in range(t)
    )


def coordinator_tasks(
    episodes: Sequence[Episode], image_root: Path, prompting: ExecutorPrompting, *, n: int, seed: int
) -> list[CESTask]:
    """Stage 1's tasks: ``n`` steps drawn from ``episodes`` (module doc), each with the
    Coordinator's prompt on the ground-truth state."""
    out = []
    for i, (ep, t) in enumerate(sample_steps(episodes, n, seed=seed)):
        shot = str(Path(image_root) / ep.steps[t].screenshot)
        out.append(
            CESTask(
                coordinator_prompt(ep.instruction, state_before(ep, t), shot),
                ep,
                t,
                Path(image_root),
                _row(ep, t, i),
                _history(ep, t, Path(image_root), prompting),
            )
        )
    return out


def tracker_tasks(
    episodes: Sequence[Episode],
    image_root: Path,
    prompting: ExecutorPrompting,
    *,
    n: int,
    seed: int,
    with_instruction: bool,
) -> list[CESTask]:
    """Stage 2's tasks: ``n`` steps ``t >= 1`` drawn from ``episodes`` (module doc), each with the
    State Tracker's prompt on ``(q, m_gt^{t-2}, u_gt^{t-1})``; ``row["gt_state"]`` is the annotated
    state it should produce (``m_gt^{t-1}``)."""
    out = []
    for i, (ep, t) in enumerate(sample_steps(episodes, n, seed=seed, keep=lambda e, k: k >= 1)):
        prev = ep.steps[t - 1]
        u = executor_report(
            prompting.write(prev.action, tuple(prev.screen_size)),
            prev.low_level_instruction,
            with_instruction=with_instruction,
        )
        row = {**_row(ep, t, i), "gt_state": state_after(ep, t - 1)}
        out.append(
            CESTask(
                tracker_prompt(ep.instruction, state_before(ep, t - 1), u),
                ep,
                t,
                Path(image_root),
                row,
                _history(ep, t, Path(image_root), prompting),
            )
        )
    return out


def _execute(
    executor: Any, prompting: ExecutorPrompting, tasks: Sequence[CESTask], instructions: Sequence[str]
) -> tuple[list[str], int]:
    """The frozen Executor's greedy output for each ``(task, instruction)``, one batched call over
    the distinct pairs; returns the outputs and how many prompts ran."""
    keys = [(id(task), instr) for task, instr in zip(tasks, instructions)]
    first: dict[tuple[int, str], int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    order = list(first.values())
    prompts = [
        prompting.prompt(
            tasks[i].episode.instruction, tasks[i].history, tasks[i].screenshot, tasks[i].screen_size, instructions[i]
        )
        for i in order
    ]
    outs = executor.complete(prompts) if prompts else []
    text = {keys[i]: o[0].text for i, o in zip(order, outs)}
    return [text[k] for k in keys], len(prompts)


def _score(
    samples: Sequence[Any], tasks: Sequence[CESTask], outputs: Sequence[str], prompting: ExecutorPrompting, rcfg: Any
) -> list[Any]:
    """The execution-feedback reward of each sample: the Executor's parsed action against the
    step's ground truth, the format term on the sample's own text (eq. 11 / 18, 22)."""
    from guirl.actions.formats import get_format
    from guirl.prompts import format_context
    from guirl.rewards.base import GroundTruth

    fmt = get_format(prompting.output_format)
    out = []
    for s, task, text in zip(samples, tasks, outputs):
        ctx = format_context(task.screen_size, prompting.min_pixels, prompting.max_pixels)
        parsed = fmt.parse(text, ctx)
        r = ces_reward(parsed, GroundTruth.from_row(s.row), agent_output=s.text, cfg=rcfg)
        s.info["executor"] = text[:200]
        s.info["executor_parsed"] = bool(parsed.ok)
        out.append(r)
    return out


def _mean_metric(name: str) -> Callable[[Sequence[Mapping[str, Any]], Mapping[str, Any]], dict[str, float]]:
    def metrics(infos: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> dict[str, float]:
        vals = [float(i[name]) for i in infos if name in i]
        calls = [float(i["executor_calls"]) for i in infos if "executor_calls" in i]
        return {
            name: sum(vals) / len(vals) if vals else float("nan"),
            "executor_calls": max(calls) if calls else float("nan"),
        }

    return metrics


def _train_split(inputs: HookInputs):
    from guirl.data.splits import train_split

    return train_split(inputs.data_dir)


def _hooks(cfg: RunConfig, tasks: list[CESTask], reward: Callable, metric: str) -> RLHooks:
    from guirl.rl.hooks import RLHooks, single_turn_rollout
    from guirl.rl.samples import TaskStream, dapo_keep_hook, group_advantage_hook

    rl = cfg.rl
    if not tasks:
        raise ValueError("CES RL: no task in the pool (empty train split, or no step with a state)")
    return RLHooks(
        tasks=TaskStream(tasks, seed=cfg.seed),
        rollout=single_turn_rollout(lambda t: t.prompt, lambda t: t.row),
        reward=reward,
        advantage=group_advantage_hook(rl.advantage, eps=rl.adv_eps),
        keep=None if rl.dapo_std_threshold is None else dapo_keep_hook(rl.dapo_std_threshold),
        metrics=_mean_metric(metric),
    )


def coordinator_hooks(cfg: RunConfig, inputs: HookInputs) -> RLHooks:
    """Stage 1 (role ``ces.coordinator``, module doc); needs the stage input ``executor``."""
    sec = ces_section(cfg)
    train = _train_split(inputs)
    prompting = executor_prompting(cfg, cfg.rl.histories[0])
    executor = FrozenPolicy(
        inputs.input("executor", COORDINATOR_ROLE),
        cfg,
        max_new_tokens=role_policy_budget(cfg, "executor"),
        desc="executor",
    )
    tasks = coordinator_tasks(train.episodes, train.image_root, prompting, n=sec.rl_pool, seed=cfg.seed)
    rcfg = sec.reward_config()

    def reward(samples):
        ts = [tasks[s.row["task_index"]] for s in samples]
        instructions = [instruction_of(s.text) for s in samples]
        outputs, calls = _execute(executor, prompting, ts, instructions)
        for s, task, instr in zip(samples, ts, instructions):
            s.info.update(
                instruction=instr,
                instruction_match=float(_same(instr, task.episode.steps[task.t].low_level_instruction)),
                executor_calls=calls,
            )
        return _score(samples, ts, outputs, prompting, rcfg)

    return _hooks(cfg, tasks, reward, "instruction_match")


def state_tracker_hooks(cfg: RunConfig, inputs: HookInputs) -> RLHooks:
    """Stage 2 (role ``ces.state_tracker``, module doc); needs the stage inputs ``coordinator`` (the
    stage-1 model, frozen) and ``executor``."""
    sec = ces_section(cfg)
    train = _train_split(inputs)
    prompting = executor_prompting(cfg, cfg.rl.histories[0])
    executor = FrozenPolicy(
        inputs.input("executor", TRACKER_ROLE), cfg, max_new_tokens=role_policy_budget(cfg, "executor"), desc="executor"
    )
    coordinator = FrozenPolicy(
        inputs.input("coordinator", TRACKER_ROLE),
        cfg,
        max_new_tokens=role_policy_budget(cfg, "coordinator"),
        desc="coordinator",
    )
    with_instruction = sec.tracker_input == "instruction_and_output"
    tasks = tracker_tasks(
        train.episodes, train.image_root, prompting, n=sec.rl_pool, seed=cfg.seed, with_instruction=with_instruction
    )
    rcfg = sec.reward_config()

    def reward(samples):
        ts = [tasks[s.row["task_index"]] for s in samples]
        states = [state_of(s.text, state_before(t.episode, t.t - 1)) for s, t in zip(samples, ts)]
        keys = [(id(t), m) for t, m in zip(ts, states)]
        first: dict[tuple[int, str], int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        order = list(first.values())
        outs = coordinator.complete(
            [coordinator_prompt(ts[i].episode.instruction, states[i], ts[i].screenshot) for i in order]
        )
        instr = {keys[i]: instruction_of(o[0].text) for i, o in zip(order, outs)}
        instructions = [instr[k] for k in keys]
        outputs, calls = _execute(executor, prompting, ts, instructions)
        for s, t, m, instr in zip(samples, ts, states, instructions):
            s.info.update(
                state=m, instruction=instr, state_match=float(_same(m, t.row["gt_state"])), executor_calls=calls
            )
        return _score(samples, ts, outputs, prompting, rcfg)

    return _hooks(cfg, tasks, reward, "state_match")


#: ``Method.hooks`` of CES: its two trained roles.
HOOKS: dict[str, Callable[..., Any]] = {
    COORDINATOR_ROLE: coordinator_hooks,
    TRACKER_ROLE: state_tracker_hooks,
}
