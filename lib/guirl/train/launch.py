"""Start a training stage as an ``accelerate launch`` subprocess and read back its result.

Notebooks call :func:`run_stage`; the model is trained in a separate process (one CPU process
for the tiny profile, ``num_processes`` GPUs with DeepSpeed ZeRO-2 for the paper profiles), so
a notebook kernel never hosts DeepSpeed and a killed run can be resumed by calling again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guirl.paths import resolve_repo_path
from guirl.train.sft import RESULT_FILE

if TYPE_CHECKING:  # the resolved run config (top layer); only its attributes are read here
    from guirl.config import Config

#: The entry module of supervised stages (grounding, sft).
SFT_ENTRY = "guirl.stages.sft"


class TrainingFailed(RuntimeError):
    """The training subprocess exited non-zero; the message holds the end of its output."""


def accelerate_command(
    cfg: Config,
    config_path: Path,
    stage: str,
    data_dir: Path,
    base_model: Path,
    output_dir: Path,
    *,
    entry: str = SFT_ENTRY,
) -> list[str]:
    """The ``accelerate launch`` command line of one stage (a list for ``subprocess``): ``entry``
    is the module run with ``-m`` (it takes ``--config --stage --data-dir --base-model
    --output-dir``)."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(resolve_repo_path(cfg.runtime.accelerate_config)),
        "--num_processes",
        str(cfg.runtime.num_processes),
        "-m",
        entry,
        "--config",
        str(config_path),
        "--stage",
        stage,
        "--data-dir",
        str(data_dir),
        "--base-model",
        str(base_model),
        "--output-dir",
        str(output_dir),
    ]


def run_stage(
    cfg: Config,
    stage: str,
    *,
    data_dir: Path,
    base_model: Path,
    output_dir: Path,
    entry: str = SFT_ENTRY,
    echo: bool = True,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Train ``stage`` in a subprocess (resuming from its last checkpoint) and return ``result.json``.

    ``entry`` is the stage's command-line module (:data:`SFT_ENTRY` for grounding and SFT; an RL
    method passes its own), so every stage launches the same way.

    The resolved config is saved to ``<output_dir>/config.yaml`` and passed to the subprocess,
    so the subprocess trains with exactly the notebook's configuration. A stage whose
    ``result.json`` exists is not run again. Output is streamed (``echo``) and the last 60
    lines are kept for the error message.
    """
    output_dir = Path(output_dir)
    done = output_dir / RESULT_FILE
    if done.exists():
        return json.loads(done.read_text())
    output_dir.mkdir(parents=True, exist_ok=True)
    config_path = cfg.save(output_dir / "config.yaml")
    cmd = accelerate_command(cfg, config_path, stage, Path(data_dir), Path(base_model), output_dir, entry=entry)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    tail: deque[str] = deque(maxlen=60)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line)
            if echo:
                print(line, end="", flush=True)
        rc = proc.wait(timeout=timeout)
    if rc != 0 or not done.exists():
        raise TrainingFailed(f"stage {stage!r} exited with code {rc} ({' '.join(cmd)}); last lines:\n{''.join(tail)}")
    return json.loads(done.read_text())
