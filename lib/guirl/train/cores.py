"""Stages side by side take over the cores of a shorter sibling at a step fixed in advance.

:func:`guirl.train.launch.run_stages` trains independent stages side by side (``runtime.parallel_stages``),
each subprocess with its share of the cores (``OMP_NUM_THREADS``). When one stage is shorter (the
tiny profile's Low executor trains 280 steps, the High agent 560), its cores would sit idle once it
ends. Torch's thread count changes the float order of a CPU training step, and with it the trained
weights (docs/stack.md), so the hand-over must not depend on when the sibling actually ends (the
host's load): :func:`thread_schedule` plans it from the stages' step counts before they start,
assuming equal step times (each stage uses ``cores // stages not yet at their planned end``
threads from each sibling's planned last step on), and :class:`ShareFreedCores`, a
``TrainerCallback``, follows that plan before every optimizer step (``GUIRL_THREAD_SCHEDULE``).
A stage trains the same bytes whatever the load and whether its sibling is early or late; a
resumed stage follows the same plan from its checkpoint's step.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

#: environment variable holding a stage's thread schedule (:func:`format_schedule`)
SCHEDULE_ENV = "GUIRL_THREAD_SCHEDULE"

#: ``[(from_step, threads), ...]``, from step 0, ascending
Schedule = list[tuple[int, int]]


def threads_for(cores: int, running: int) -> int:
    """Threads of one stage when ``running`` stages share ``cores`` cores (at least 1)."""
    return max(1, cores // max(1, running))


def thread_schedule(steps: Sequence[int | None], cores: int) -> list[Schedule] | None:
    """Per stage of a side-by-side group that starts at once with ``steps`` planned optimizer
    steps each, its threads from each step on: ``cores // (stages whose planned steps exceed
    it)``. ``None`` when a step count is unknown (no hand-over: each stage keeps its share)."""
    if any(s is None for s in steps):
        return None
    planned = [int(s) for s in steps]  # type: ignore[arg-type]
    out = []
    for mine in planned:
        sched: Schedule = []
        for at in sorted({0, *(s for s in planned if s < mine)}):
            threads = threads_for(cores, sum(1 for s in planned if s > at))
            if not sched or sched[-1][1] != threads:
                sched.append((at, threads))
        out.append(sched)
    return out


def format_schedule(schedule: Schedule) -> str:
    """``[(0, 1), (280, 2)]`` -> ``"0:1,280:2"`` (the value of :data:`SCHEDULE_ENV`)."""
    return ",".join(f"{step}:{threads}" for step, threads in schedule)


def parse_schedule(text: str) -> Schedule:
    """Inverse of :func:`format_schedule`; ``ValueError`` naming the text when it is malformed."""
    try:
        sched = [(int(a), int(b)) for a, b in (item.split(":") for item in text.split(","))]
    except ValueError:
        raise ValueError(f"{SCHEDULE_ENV}={text!r}: expected 'step:threads,...', e.g. '0:1,280:2'") from None
    if not sched or sched[0][0] != 0 or any(b[0] <= a[0] for a, b in zip(sched, sched[1:], strict=False)):
        raise ValueError(f"{SCHEDULE_ENV}={text!r}: steps must start at 0 and ascend")
    if any(t < 1 for _, t in sched):
        raise ValueError(f"{SCHEDULE_ENV}={text!r}: thread counts must be >= 1")
    return sched


def _callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


class ShareFreedCores(_callback_base()):  # type: ignore[misc]
    """Before each optimizer step, use the threads ``schedule`` plans for that step.

    ``switches`` records ``(global_step, threads)`` for every change (the stage's result shows them)."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = list(schedule)
        self.switches: list[tuple[int, int]] = []

    def threads_at(self, step: int) -> int:
        """The planned threads at ``step``."""
        return [t for at, t in self.schedule if at <= step][-1]

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import torch

        want = self.threads_at(int(state.global_step))
        if want != torch.get_num_threads():
            torch.set_num_threads(want)
            self.switches.append((int(state.global_step), want))
            print(f"[guirl.train.cores] step {state.global_step}: {want} torch threads", flush=True)


def callback_from_env(environ: dict[str, str] | None = None) -> ShareFreedCores | None:
    """The callback of a stage launched with a thread schedule (:data:`SCHEDULE_ENV`), else ``None``."""
    env = os.environ if environ is None else environ
    text = env.get(SCHEDULE_ENV)
    return ShareFreedCores(parse_schedule(text)) if text else None
