"""What a method plugs into the RL engine (:mod:`guirl.train.rl`): the :class:`RLHooks` record, the
inputs a hook builder gets (:class:`HookInputs`), and the generic single-turn GRPO hooks.

A **role** is one trainable part of a method (CCPO's policy, CES's Coordinator or State
Tracker, Co-EPG's planner). Its hook builder, ``builder(cfg, inputs) -> RLHooks``, is registered
in the method's record (``Method.hooks``, :mod:`guirl.methods.registry`); the stage entry
(``python -m guirl.stages.rl``) picks it by ``rl.role``. :func:`single_turn_hooks` is the
role-independent case: single-turn GRPO on recorded steps with the ground-truth history and any
reward function (AgentCPM-GUI's RFT is these hooks with its {-1, 0, 1} reward, Sec. 2.5.1).

The pieces, each usable alone:

* :class:`StepTask` / :func:`step_tasks`: recorded steps as single-turn tasks (prompt + the
  columns a reward reads);
* :func:`single_turn_rollout`: ``group_size`` sampled completions per task, one group each;
* :func:`format_reward_hook`: parse each completion with an output format in the coordinate
  space the model saw, then score it with a :mod:`guirl.rewards`-style ``fn(parsed, gt)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from guirl.configbase import RunConfig
from guirl.rewards.base import RewardResult, RewardSpec
from guirl.rl.samples import RolloutArgs, Sample

__all__ = [
    "TaskSource",
    "RLHooks",
    "HookInputs",
    "HookBuilder",
    "single_turn_rollout",
    "StepTask",
    "step_tasks",
    "format_reward_hook",
    "single_turn_hooks",
]


class TaskSource(Protocol):
    """The data source: the next ``n`` tasks, and a resumable state."""

    def next(self, n: int) -> list[Any]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True)
class RLHooks:
    """What a method plugs into the engine (module doc)."""

    tasks: TaskSource
    rollout: Callable[[Any, Sequence[Any], RolloutArgs], list[Sample]]
    reward: Callable[[Sequence[Sample]], Sequence[RewardResult]]
    advantage: Callable[[Sequence[Sample]], torch.Tensor]
    keep: Callable[[Sequence[Sample]], Sequence[bool]] | None = None
    select: Callable[[Sequence[Sample], int], list[Sample]] | None = None
    metrics: Callable[[Sequence[Mapping[str, Any]], Mapping[str, Any]], Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class HookInputs:
    """What a hook builder gets besides the run config: ``data_dir`` (the prepared dataset
    folder; its ``train`` split is what RL trains on), ``reward`` (the registry entry of
    ``rl.reward``; ``None``: the role's own reward) and ``inputs`` (other named folders of the
    stage, e.g. a frozen executor's checkpoint: ``{"executor": Path(...)}``; a role that needs one
    names it in its error)."""

    data_dir: Path
    reward: RewardSpec | None = None
    inputs: Mapping[str, Path] = field(default_factory=dict)

    def input(self, name: str, role: str) -> Path:
        """The stage input ``name``; a ``KeyError`` naming the role and the inputs it has."""
        if name not in self.inputs:
            raise KeyError(
                f"role {role!r} needs the stage input {name!r} (a folder, Stage.inputs[{name!r}]); "
                f"this stage has: {', '.join(sorted(self.inputs)) or '(none)'}"
            )
        return Path(self.inputs[name])


#: ``builder(cfg, inputs) -> RLHooks``: a role's hook builder (``Method.hooks`` values).
HookBuilder = Callable[[RunConfig, HookInputs], RLHooks]


def single_turn_rollout(
    build_prompt: Callable[[Any], tuple[list[dict[str, Any]], list[Any]]],
    row_of: Callable[[Any], Mapping[str, Any]] = lambda task: task,
) -> Callable[[Any, Sequence[Any], RolloutArgs], list[Sample]]:
    """Rollout hook of single-turn methods: one prompt per task (``build_prompt(task)``, the
    history builder), ``args.group_size`` sampled completions each, one group per task;
    ``row_of(task)`` gives the columns the reward reads."""

    def rollout(policy: Any, tasks: Sequence[Any], args: RolloutArgs) -> list[Sample]:
        prompts = [build_prompt(t) for t in tasks]
        outs = policy.complete(
            prompts, n=args.group_size, do_sample=True, temperature=args.temperature, top_p=args.top_p, seed=args.seed
        )
        if len(outs) != len(prompts):
            raise ValueError(f"policy returned {len(outs)} completion lists for {len(prompts)} prompts")
        samples = []
        for g, (task, prompt, comps) in enumerate(zip(tasks, prompts, outs, strict=True)):
            if len(comps) != args.group_size:
                raise ValueError(f"policy returned {len(comps)} completions for a group of {args.group_size}")
            row = row_of(task)
            for c in comps:
                samples.append(Sample(prompt=prompt, completion_ids=tuple(c.token_ids), text=c.text, group=g, row=row))
        return samples

    return rollout


@dataclass(frozen=True)
class StepTask:
    """One recorded step as a single-turn task: its prompt (with the ground-truth history) and the
    columns its reward reads (``gt_action`` JSON, ``gt_box``, ``candidate_boxes``,
    ``screen_size``, plus ``episode_id``, ``step_id``, ``history``)."""

    prompt: tuple[list[dict[str, Any]], list[Any]]
    row: Mapping[str, Any]


def step_tasks(
    episodes: Sequence[Any],
    specs: Sequence[Any],
    *,
    image_root: str | Path,
    min_pixels: int,
    max_pixels: int,
) -> list[StepTask]:
    """One :class:`StepTask` per (episode step, prompt spec), in episode order and spec order per
    step; the prompt is :func:`guirl.rollout.step_prompts`'s (ground-truth history, as SFT)."""
    from guirl.rollout import step_prompts

    per_spec = [
        step_prompts(episodes, spec, min_pixels=min_pixels, max_pixels=max_pixels, image_root=image_root)
        for spec in specs
    ]
    out = []
    for items in zip(*per_spec, strict=True):
        for spec, sp in zip(specs, items, strict=True):
            step = sp.episode.steps[sp.t]
            row = {
                "gt_action": json.dumps(step.action.to_dict()),
                "gt_box": list(step.target_box) if step.target_box else None,
                "candidate_boxes": [list(b) for b in step.candidate_boxes],
                "screen_size": list(step.screen_size),
                "episode_id": sp.episode.episode_id,
                "step_id": step.step_id,
                "history": spec.tag,
            }
            out.append(StepTask(prompt=sp.prompt, row=row))
    return out


def format_reward_hook(
    fn: Callable[..., RewardResult],
    output_format: str,
    *,
    min_pixels: int,
    max_pixels: int,
) -> Callable[[Sequence[Sample]], list[RewardResult]]:
    """Reward hook for a :mod:`guirl.rewards`-style ``fn(parsed, gt) -> RewardResult``: each
    sample's text is parsed with ``output_format`` in the coordinate space the model saw (the
    screenshot ``row["screen_size"]`` resized with ``min_pixels`` / ``max_pixels``) and scored
    against ``GroundTruth.from_row(row)`` (:func:`guirl.rewards.trl.score_completions`)."""
    from guirl.actions.formats import get_format
    from guirl.prompts import format_context
    from guirl.rewards.base import RewardInputError
    from guirl.rewards.trl import score_completions

    fmt = get_format(output_format)

    def parse(text: str, row: Mapping[str, Any]):
        size = row.get("screen_size")
        if size is None or len(size) != 2:
            raise RewardInputError(f"row needs screen_size = [width, height] in pixels; row has {sorted(row)}")
        return fmt.parse(text, format_context((int(size[0]), int(size[1])), min_pixels, max_pixels))

    def reward(samples: Sequence[Sample]) -> list[RewardResult]:
        if not samples:
            return []
        keys = sorted({k for s in samples for k in s.row})
        columns = {k: [s.row.get(k) for s in samples] for k in keys}
        return score_completions(fn, parse, [s.text for s in samples], **columns)

    reward.__name__ = f"{getattr(fn, '__name__', 'reward')}_{output_format}"
    return reward


def single_turn_hooks(cfg: RunConfig, inputs: HookInputs, reward: Callable[..., RewardResult]) -> RLHooks:
    """Single-turn GRPO hooks on the ``train`` split of ``inputs.data_dir``: every recorded step
    with the ground-truth history of each ``rl.histories`` setting is one task (one group of
    ``rl.group_size`` sampled completions), parsed with ``sft.output_format`` and scored with
    ``reward(parsed, gt)``; ``rl.advantage`` group advantages, and DAPO dynamic sampling when
    ``rl.dapo_std_threshold`` is set."""
    from guirl.data.splits import train_split
    from guirl.prompts import prompt_spec
    from guirl.rl.samples import TaskStream, dapo_keep_hook, group_advantage_hook

    rl, m = cfg.rl, cfg.model
    train = train_split(inputs.data_dir)
    specs = [prompt_spec(cfg, tag) for tag in rl.histories]
    tasks = step_tasks(
        train.episodes, specs, image_root=train.image_root, min_pixels=m.min_pixels, max_pixels=m.max_pixels
    )
    return RLHooks(
        tasks=TaskStream(tasks, seed=cfg.seed),
        rollout=single_turn_rollout(lambda t: t.prompt, lambda t: t.row),
        reward=format_reward_hook(reward, cfg.sft.output_format, min_pixels=m.min_pixels, max_pixels=m.max_pixels),
        advantage=group_advantage_hook(rl.advantage, eps=rl.adv_eps),
        keep=None if rl.dapo_std_threshold is None else dapo_keep_hook(rl.dapo_std_threshold),
    )
