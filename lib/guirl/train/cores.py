"""Stages side by side take over the cores a finished sibling frees.

:func:`guirl.train.launch.run_stages` trains independent stages side by side (``runtime.parallel_stages``),
each subprocess with its share of the cores (``OMP_NUM_THREADS``). When one stage is shorter (the
tiny profile's Low executor trains 280 steps, the High agent 560), its cores sit idle once it ends.
The launcher keeps one marker file per running stage in a shared folder (``GUIRL_PEER_DIR``) and
tells each stage how many cores the group has (``GUIRL_CORES``); :class:`ShareFreedCores`, a
``TrainerCallback``, checks the markers before every optimizer step and sets torch's thread count to
``cores // running stages``.

Thread count does not change the tiny model's trained weights on CPU (docs/stack.md: 1 and 2 threads
train bit-identical weights), so this changes when a stage ends, not what it trains
(``tests/test_train.py`` compares the bytes).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: environment variable naming the folder of running stages' marker files
PEER_DIR_ENV = "GUIRL_PEER_DIR"
#: environment variable with the cores the side-by-side group shares
CORES_ENV = "GUIRL_CORES"


def threads_for(cores: int, running: int) -> int:
    """Threads of one stage when ``running`` stages share ``cores`` cores (at least 1)."""
    return max(1, cores // max(1, running))


def running_stages(peer_dir: Path) -> int:
    """Number of marker files in ``peer_dir`` (0 when the folder is gone)."""
    try:
        return sum(1 for _ in Path(peer_dir).iterdir())
    except FileNotFoundError:
        return 0


def _callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


class ShareFreedCores(_callback_base()):  # type: ignore[misc]
    """Before each optimizer step, use ``cores // running stages`` torch threads.

    ``switches`` records ``(global_step, threads)`` for every change (the stage's log shows them)."""

    def __init__(self, peer_dir: Path, cores: int) -> None:
        self.peer_dir = Path(peer_dir)
        self.cores = int(cores)
        self.switches: list[tuple[int, int]] = []

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import torch

        want = threads_for(self.cores, running_stages(self.peer_dir))
        if want != torch.get_num_threads():
            torch.set_num_threads(want)
            self.switches.append((int(state.global_step), want))
            print(f"[guirl.train.cores] step {state.global_step}: {want} torch threads", flush=True)


def callback_from_env(environ: dict[str, str] | None = None) -> ShareFreedCores | None:
    """The callback for a stage launched in a side-by-side group, else ``None``."""
    env = os.environ if environ is None else environ
    peer_dir, cores = env.get(PEER_DIR_ENV), env.get(CORES_ENV)
    if not peer_dir or not cores:
        return None
    return ShareFreedCores(Path(peer_dir), int(cores))
