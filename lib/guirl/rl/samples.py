"""Training samples of the RL engine and the small pure pieces its hooks are built from.

A :class:`Sample` is one prompt and one completion the policy generated for it, with the group
it is compared in (the ``group_size`` rollouts of one task), the task's columns (ground truth,
screen size, ...), what the rollout recorded (step index, trajectory id, whether the action
matched, ...), its reward with components, and, once computed, its advantage.

Pieces here (no model, no I/O; ``tests/test_rl.py``):

* :class:`TaskStream`: the data source / step sampler: an endless, per-epoch shuffled stream of
  tasks with a resumable cursor.
* :func:`group_advantage_hook`: GRPO / Dr. GRPO advantages over the samples' groups.
* :func:`dapo_keep_hook`: DAPO dynamic-sampling filter (whole groups).
* :func:`take_groups`: keep the first ``n`` groups in draw order (the batch is full).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import torch

from guirl.rl.advantages import dapo_keep_mask, get_advantage_estimator

__all__ = [
    "Sample",
    "RolloutArgs",
    "TaskStream",
    "group_tensor",
    "reward_tensor",
    "group_advantage_hook",
    "dapo_keep_hook",
    "take_groups",
    "renumber_groups",
]

T = TypeVar("T")


@dataclass
class Sample:
    """One prompt + one generated completion (module doc).

    ``prompt``: ``(messages, images)``. ``completion_ids``: generated ids (EOS included when
    generated). ``group``: integer id shared by the samples compared with each other.
    ``row``: the task's columns (e.g. ``gt_action``, ``screen_size``). ``info``: rollout facts
    for reward / advantage hooks. ``reward`` is NaN until scored.
    """

    prompt: tuple[list[dict[str, Any]], list[Any]]
    completion_ids: tuple[int, ...]
    text: str
    group: int
    row: Mapping[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    reward: float = math.nan
    components: dict[str, float] = field(default_factory=dict)
    advantage: float = 0.0


@dataclass(frozen=True)
class RolloutArgs:
    """How a rollout hook samples: ``group_size`` completions per task, sampling settings, and the
    seed of this (step, draw, rank), so a resumed run regenerates the same completions."""

    group_size: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    step: int = 0
    draw: int = 0


class TaskStream(Generic[T]):
    """An endless stream over ``items``, reshuffled every epoch (``seed`` + epoch), with a cursor.

    ``next(n)`` returns the next ``n`` items (crossing epoch boundaries); the cursor is the number
    of items handed out so far, so ``state_dict()`` / ``load_state_dict()`` resume the stream
    exactly. ``shuffle=False`` keeps the given order. Every data-parallel rank builds the same
    stream and takes its own share of each draw.
    """

    def __init__(self, items: Sequence[T], *, seed: int = 0, shuffle: bool = True) -> None:
        if not items:
            raise ValueError("TaskStream needs at least one task (the training data is empty)")
        self.items = list(items)
        self.seed = seed
        self.shuffle = shuffle
        self.cursor = 0
        self._epoch = -1
        self._order: list[int] = []

    def _order_of(self, epoch: int) -> list[int]:
        if epoch != self._epoch:
            order = list(range(len(self.items)))
            if self.shuffle:
                random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
            self._epoch, self._order = epoch, order
        return self._order

    def next(self, n: int) -> list[T]:
        """The next ``n`` items."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        out = []
        for _ in range(n):
            epoch, i = divmod(self.cursor, len(self.items))
            out.append(self.items[self._order_of(epoch)[i]])
            self.cursor += 1
        return out

    @property
    def epoch(self) -> float:
        """Items handed out / dataset size."""
        return self.cursor / len(self.items)

    def state_dict(self) -> dict[str, int]:
        return {"cursor": self.cursor, "n_items": len(self.items), "seed": self.seed}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        if int(state["n_items"]) != len(self.items):
            raise ValueError(
                f"resuming a task stream of {state['n_items']} tasks with {len(self.items)} tasks: "
                "the training data changed since the checkpoint"
            )
        self.cursor = int(state["cursor"])


def group_tensor(samples: Sequence[Sample]) -> torch.Tensor:
    """``(N,)`` long tensor of the samples' group ids."""
    return torch.tensor([s.group for s in samples], dtype=torch.long)


def reward_tensor(samples: Sequence[Sample]) -> torch.Tensor:
    """``(N,)`` float64 tensor of the samples' rewards (NaN = not scored / not applicable)."""
    return torch.tensor([s.reward for s in samples], dtype=torch.float64)


def group_advantage_hook(estimator: str = "grpo", *, eps: float = 1e-6) -> Callable[[Sequence[Sample]], torch.Tensor]:
    """Advantage hook: :data:`guirl.rl.advantages.ADVANTAGE_ESTIMATORS` ``estimator`` over groups."""
    fn = get_advantage_estimator(estimator)

    def advantage(samples: Sequence[Sample]) -> torch.Tensor:
        if not samples:
            return torch.zeros(0, dtype=torch.float64)
        return fn(reward_tensor(samples), group_tensor(samples), eps=eps)

    advantage.__name__ = f"{estimator}_advantage"
    return advantage


def dapo_keep_hook(std_threshold: float = 0.0) -> Callable[[Sequence[Sample]], list[bool]]:
    """Data-filter hook: DAPO dynamic sampling (:func:`guirl.rl.advantages.dapo_keep_groups`):
    keep the samples of groups whose rewards vary (std above ``std_threshold``)."""

    def keep(samples: Sequence[Sample]) -> list[bool]:
        if not samples:
            return []
        return dapo_keep_mask(reward_tensor(samples), group_tensor(samples), std_threshold=std_threshold).tolist()

    keep.__name__ = f"dapo_keep_std_gt_{std_threshold:g}"
    return keep


def renumber_groups(samples: Sequence[Sample], offset: int) -> int:
    """Give the samples' groups consecutive ids from ``offset`` in order of first appearance (in
    place); returns the next free id. Makes ids unique across the draws of one step."""
    mapping: dict[int, int] = {}
    for s in samples:
        if s.group not in mapping:
            mapping[s.group] = offset + len(mapping)
        s.group = mapping[s.group]
    return offset + len(mapping)


def take_groups(samples: Sequence[Sample], n_groups: int) -> list[Sample]:
    """The samples of the first ``n_groups`` groups in order of first appearance (draw order);
    DAPO keeps the batch at its configured size once enough groups were accumulated."""
    if n_groups < 0:
        raise ValueError(f"n_groups must be >= 0, got {n_groups}")
    chosen: list[int] = []
    for s in samples:
        if s.group not in chosen:
            if len(chosen) == n_groups:
                continue
            chosen.append(s.group)
    keep = set(chosen)
    return [s for s in samples if s.group in keep]
