"""Training stages as records, trained in the caller or as subprocesses, results read back.

A :class:`Stage` says everything a stage needs: its name, the entry module that trains it
(:data:`SFT_ENTRY` for grounding and SFT, :data:`guirl.train.rl.RL_ENTRY` for every RL role), the
run config it trains with, its input folders (``"data"``: the prepared dataset; other named
inputs such as a frozen executor's checkpoint), the model it starts from and its output folder.
Studies build lists of stages; :func:`run_stages` runs them (side by side where independent),
:func:`run_stage` one; a killed run is resumed by calling again.

How a stage starts (:func:`launch_mode`, ``runtime.stage_launcher``): a stage of several processes
(GPUs, DeepSpeed ZeRO-2 for the paper profiles) goes through ``accelerate launch``, so a notebook
kernel never hosts DeepSpeed. A single-process CPU stage (the tiny profile) that runs alone is
trained inside the caller (no interpreter start-up and no imports per stage: about 15 s each on 2
cores), with the arguments, environment variables and torch threads that ``accelerate launch``
would give its subprocess (:func:`simple_launch`) and the caller's random states restored
afterwards; one beside other stages starts as exactly that subprocess, without the launcher's own
interpreter. Every path trains the same bytes (``tests/test_train_launch.py``).

A subprocess runs in a process group of its own that never outlives the caller
(:mod:`guirl.train.procs`): it is stopped when :func:`run_stage` fails or is interrupted, and when
the caller dies, however it dies; a stage in the caller stops with it. ``<output_dir>.lock`` holds
the caller's pid while the stage runs: a second run on the same folder is refused with a one-line
:class:`~guirl.train.procs.LockedError` naming it, and a lock left by a dead process is taken over.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from guirl import timing
from guirl.configbase import RunConfig
from guirl.contenthash import StateFileError, read_json_state
from guirl.paths import resolve_repo_path, restore_environ
from guirl.train.procs import FileLock, forget, start_group, stop_all, stop_group
from guirl.train.sft import RESULT_FILE
from guirl.train.stagestate import (
    FINGERPRINT_FILE,  # noqa: F401 (re-exported: the file a stage folder's fingerprint is in)
    discard_stale,
    stage_fingerprint,  # noqa: F401 (re-exported)
    undeclared_reads,
    write_fingerprint,
)

#: The entry module of supervised stages (grounding, sft).
SFT_ENTRY = "guirl.stages.sft"
#: The input every stage has: the prepared dataset folder (``--data-dir``).
DATA_INPUT = "data"


@dataclass(frozen=True)
class Stage:
    """One training stage.

    ``name``: what the entry trains and the label in logs (``"grounding"`` / ``"sft"`` for
    :data:`SFT_ENTRY`; any label for RL, e.g. ``"ccpo_3AO"``, whose role comes from
    ``cfg.rl.role``); ``entry``: the module ``accelerate launch -m`` runs; ``cfg``: the run config
    it trains with (derive one with ``Config.replace``); ``inputs``: named folders it reads,
    :data:`DATA_INPUT` (the prepared dataset) required, the others passed as ``--input
    NAME=FOLDER``; ``base_model``: the checkpoint folder it starts from; ``output_dir``: where its
    checkpoints and ``result.json`` go. Every input and the base model enter the stage's
    fingerprint (:func:`stage_fingerprint`)."""

    name: str
    entry: str
    cfg: RunConfig
    inputs: Mapping[str, Path]
    base_model: Path
    output_dir: Path

    def __post_init__(self) -> None:
        if DATA_INPUT not in self.inputs:
            raise ValueError(
                f"stage {self.name!r}: inputs need {DATA_INPUT!r} (the dataset folder); got {sorted(self.inputs)}"
            )
        bad = [k for k in self.inputs if not k.isidentifier()]
        if bad:
            raise ValueError(f"stage {self.name!r}: input names must be identifiers, got {bad}")
        object.__setattr__(self, "inputs", MappingProxyType({k: Path(v) for k, v in self.inputs.items()}))
        object.__setattr__(self, "base_model", Path(self.base_model))
        object.__setattr__(self, "output_dir", Path(self.output_dir))

    @property
    def data_dir(self) -> Path:
        """The dataset folder (``inputs["data"]``)."""
        return self.inputs[DATA_INPUT]

    @property
    def other_inputs(self) -> dict[str, Path]:
        """The inputs besides the dataset folder, by name."""
        return {k: v for k, v in self.inputs.items() if k != DATA_INPUT}


def _finished(done: Path, echo: bool) -> dict[str, Any] | None:
    """The ``result.json`` of a finished stage, ``None`` when there is none; a torn or corrupt one
    (not JSON, not an object) is named and moved aside (``result.json.corrupt``), and the stage
    resumes from its last checkpoint."""
    if not done.exists():
        return None
    try:
        return read_json_state(done, "the stage result", "")
    except StateFileError as err:
        aside = done.with_name(done.name + ".corrupt")
        os.replace(done, aside)
        if echo:
            print(
                f"[run_stage] {str(err).rstrip('; ')}; moved to {aside.name}, resuming the stage from its last checkpoint",
                flush=True,
            )
        return None


def _headline(tail: Sequence[str]) -> str:
    """``": <the error>"``: the last ``SomeError: message`` line of a failed stage's output (the
    reason, e.g. a :class:`~guirl.train.stagestate.NonFiniteError`), ``""`` when there is none."""
    import re

    for line in reversed(tail):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt): ", line):
            return ": " + line.strip()
    return ""


def _check_declared(stage: Stage) -> None:
    """Warn when the stage process read config keys its entry does not declare
    (:func:`guirl.train.stagestate.undeclared_reads`)."""
    extra = undeclared_reads(stage)
    if extra:
        import warnings

        warnings.warn(
            f"stage {stage.name!r} ({stage.entry}) read config keys it does not declare: {', '.join(extra)}; "
            "add them to guirl.train.stagestate.ENTRY_READS (or to the method's Method.reads)",
            stacklevel=3,
        )


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


#: What every training process and notebook kernel runs with (:func:`stage_env`, the runner's
#: kernels): MKL's dynamic threading off. MKL's default lets it run a product on fewer threads than
#: torch's on a busy host, so a stage started in a fresh process trained other bytes under load than
#: on an idle host, or than in a process where ``torch.set_num_threads`` had turned it off
#: (``docs/stack.md``, "Threads and reproducibility").
FIXED_THREADS_ENV: dict[str, str] = {"MKL_DYNAMIC": "FALSE"}


def stage_env(cfg: RunConfig, parallel: int = 1) -> dict[str, str]:
    """Environment variables a training subprocess gets from the config: :data:`FIXED_THREADS_ENV`,
    and ``OMP_NUM_THREADS`` (torch's CPU threads) when ``runtime.threads`` is set; else, when
    ``parallel`` stages share the machine, its :func:`available_cores` divided among them (at least
    1); else none (the caller's thread count stands)."""
    if cfg.runtime.threads is not None:
        return {**FIXED_THREADS_ENV, "OMP_NUM_THREADS": str(cfg.runtime.threads)}
    if parallel > 1:
        return {**FIXED_THREADS_ENV, "OMP_NUM_THREADS": str(max(1, available_cores() // parallel))}
    return dict(FIXED_THREADS_ENV)


class TrainingFailed(RuntimeError):
    """The training subprocess exited non-zero; the message holds the end of its output."""


def accelerate_command(stage: Stage, config_path: Path) -> list[str]:
    """The ``accelerate launch`` command line of one stage (a list for ``subprocess``): the stage's
    entry is the module run with ``-m`` (it takes ``--config --stage --data-dir --base-model
    --output-dir`` and one ``--input NAME=FOLDER`` per other input). ``runtime.deepspeed_config``,
    when set, is passed as an absolute ``--deepspeed_config_file``: it is the one source of the
    DeepSpeed file, and the relative path in an accelerate config would be read from the
    subprocess's working directory (a notebook's)."""
    cfg = stage.cfg
    ds = cfg.runtime.deepspeed_config
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(resolve_repo_path(cfg.runtime.accelerate_config)),
        "--num_processes",
        str(cfg.runtime.num_processes),
        *(["--deepspeed_config_file", str(resolve_repo_path(ds))] if ds else []),
        "-m",
        stage.entry,
        "--config",
        str(config_path),
        "--stage",
        stage.name,
        "--data-dir",
        str(stage.data_dir),
        "--base-model",
        str(stage.base_model),
        "--output-dir",
        str(stage.output_dir),
        *(arg for name, path in sorted(stage.other_inputs.items()) for arg in ("--input", f"{name}={path}")),
    ]


def prepare_stage(stage: Stage, *, echo: bool = True) -> list[str]:
    """Get the stage's output folder ready and return its ``accelerate launch`` command: outputs
    of another :func:`stage_fingerprint` are deleted, the fingerprint and the resolved config
    (``config.yaml``, the file the subprocess reads) are written. Reusing a finished result or
    resuming from a checkpoint is then safe; :func:`run_stage` does both."""
    output_dir = stage.output_dir
    fingerprint = stage_fingerprint(stage)
    discard_stale(output_dir, stage, fingerprint, echo)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_fingerprint(output_dir, fingerprint)
    config_path = stage.cfg.save(output_dir / "config.yaml")
    return accelerate_command(stage, config_path)


#: How :func:`run_stage` starts a stage (:func:`launch_mode`).
IN_PROCESS, DIRECT, ACCELERATE = "in process", "direct", "accelerate launch"
#: Environment variables of a launched stage that only a subprocess needs (the in-process path leaves them out).
_SUBPROCESS_ONLY = ("PYTHONUNBUFFERED", timing.LABEL_ENV, timing.LAUNCHED_ENV)
_environ_lock = threading.Lock()


def launch_mode(stage: Stage, parallel: int = 1) -> str:
    """How :func:`run_stage` starts ``stage`` (``runtime.stage_launcher``):

    * :data:`IN_PROCESS`: in the calling process (``auto``, one CPU process without DeepSpeed,
      ``parallel`` 1): the entry's ``main`` with the arguments, environment and torch threads that
      ``accelerate launch`` would give its subprocess, the caller's random states left as they were;
    * :data:`DIRECT`: the subprocess ``accelerate launch`` would start (its command and environment,
      :func:`simple_launch`), started without the launcher's own interpreter (``subprocess``, or
      ``auto`` beside other stages);
    * :data:`ACCELERATE`: ``accelerate launch`` (``accelerate``, and every stage of several
      processes, on a GPU or with DeepSpeed).

    All three train the same weights byte for byte on one host (``tests/test_train_launch.py``)."""
    rt = stage.cfg.runtime
    simple = rt.device == "cpu" and rt.num_processes == 1 and rt.deepspeed_config is None
    if not simple or rt.stage_launcher == "accelerate":
        return ACCELERATE
    return IN_PROCESS if rt.stage_launcher == "auto" and parallel == 1 else DIRECT


def simple_launch(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command and environment that ``accelerate launch`` (``cmd``: :func:`accelerate_command`,
    run with environment ``env``) gives the one process it starts on a CPU: computed by accelerate's
    own argument validation and simple launcher (``OMP_NUM_THREADS`` from ``env`` or the physical
    cores, ``ACCELERATE_USE_CPU``, ``ACCELERATE_MIXED_PRECISION``, ...), so a stage started from them
    is the stage ``accelerate launch`` would have started."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_simple_launcher_cmd_env

    at = list(cmd).index("accelerate.commands.launch")
    args = launch_command_parser().parse_args(list(cmd)[at + 1 :])
    quiet = logging.getLogger("accelerate.commands.launch")  # its "defaults were used" notice, once per stage
    with _environ_lock:  # accelerate reads os.environ: show it ``env`` for the call
        saved, level = dict(os.environ), quiet.level
        try:
            quiet.setLevel(logging.ERROR)
            os.environ.clear()
            os.environ.update(env)
            args, _, _ = _validate_launch_command(args)
            child, child_env = prepare_simple_launcher_cmd_env(args)
        finally:
            os.environ.clear()
            os.environ.update(saved)
            quiet.setLevel(level)
    return child, dict(child_env)


def _train_in_process(stage: Stage, cmd: Sequence[str], env: Mapping[str, str], echo: bool) -> None:
    """Run ``stage``'s entry (``python -m <entry> ARGS`` of ``cmd``) in this process with the
    environment variables of ``env`` that differ from this process's, torch's threads set to
    ``env["OMP_NUM_THREADS"]``, and torch's, Python's and numpy's random states restored afterwards
    (a stage seeds them itself, as in a fresh process). ``echo`` false: the stage's output is
    kept from the console. Raises :class:`TrainingFailed` (chained) when the entry fails."""
    import contextlib
    import gc
    import importlib
    import io
    import random

    import numpy as np
    import torch

    args = list(cmd)[list(cmd).index(stage.entry) + 1 :]
    changed = {k: v for k, v in env.items() if os.environ.get(k) != v and k not in _SUBPROCESS_ONLY}
    threads = int(env.get("OMP_NUM_THREADS", torch.get_num_threads()))
    entry = importlib.import_module(stage.entry)
    saved_env = {k: os.environ.get(k) for k in changed}
    saved_threads = torch.get_num_threads()
    py_state, np_state = random.getstate(), np.random.get_state()
    sink = io.StringIO()
    quiet = (contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink)) if not echo else ()
    try:
        with contextlib.ExitStack() as stack, torch.random.fork_rng(devices=[]):
            for ctx in quiet:
                stack.enter_context(ctx)
            os.environ.update(changed)
            torch.set_num_threads(threads)
            entry.main(args)
    except KeyboardInterrupt:
        raise
    except (Exception, SystemExit) as err:
        if isinstance(err, SystemExit) and err.code in (0, None):
            return
        tail = "".join(sink.getvalue().splitlines(keepends=True)[-60:])
        raise TrainingFailed(
            f"stage {stage.name!r} failed in process ({type(err).__name__}: {err}); "
            f"python -m {stage.entry} {' '.join(args)}" + (f"; last lines:\n{tail}" if tail else "")
        ) from err
    finally:
        restore_environ(saved_env)
        torch.set_num_threads(saved_threads)
        random.setstate(py_state)
        np.random.set_state(np_state)
        gc.collect()


def run_stage(
    stage: Stage,
    *,
    echo: bool = True,
    timeout: float | None = None,
    parallel: int = 1,
    thread_schedule: str | None = None,
) -> dict[str, Any]:
    """Train ``stage`` (resuming from its last checkpoint) and return ``result.json``.

    Every stage launches the same way, whatever its entry (:data:`SFT_ENTRY`, the RL entry): in
    this process, as a subprocess or through ``accelerate launch`` (:func:`launch_mode`).

    The resolved config is saved to ``<output_dir>/config.yaml`` and passed to the entry,
    so the stage trains with exactly the notebook's configuration. A stage whose
    ``result.json`` exists is not run again, and an interrupted one resumes from its last
    checkpoint, but only when the folder was written with the same :func:`stage_fingerprint`
    (config without ``eval``, name, entry, inputs, base model); outputs of another fingerprint are deleted
    first, so a changed config never reuses stale checkpoints. Output is streamed (``echo``) and
    the last 60 lines are kept for the error message. ``parallel``: how many stages share the
    machine (:func:`run_stages`); it sets the thread count (:func:`stage_env`) and, above 1,
    prefixes each echoed line with ``[<output folder name>]``. ``thread_schedule``: the torch
    threads of each step (``"0:1,280:2"``, :mod:`guirl.train.cores`; :func:`run_stages` plans it for
    stages side by side; ignored when ``runtime.threads`` fixes the count).
    """
    return _run_stage(stage, echo, timeout, parallel, thread_schedule)


def stage_lock(output_dir: Path) -> FileLock:
    """The lock of a stage folder: ``<output_dir>.lock`` beside it (the folder itself may be
    replaced when its fingerprint changed)."""
    output_dir = Path(output_dir)
    return FileLock(output_dir.with_name(output_dir.name + ".lock"), f"stage folder {output_dir}")


def _run_stage(
    stage: Stage, echo: bool, timeout: float | None, parallel: int, thread_schedule: str | None
) -> dict[str, Any]:
    cfg, output_dir = stage.cfg, stage.output_dir
    with stage_lock(output_dir) as lock:
        with timing.phase("io", "stage folder"):
            cmd = prepare_stage(stage, echo=echo)
        done = output_dir / RESULT_FILE
        finished = _finished(done, echo)
        if finished is not None:
            return finished
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", **stage_env(cfg, parallel)}
        if thread_schedule is not None and cfg.runtime.threads is None:
            from guirl.train.cores import SCHEDULE_ENV

            env[SCHEDULE_ENV] = thread_schedule
        env[timing.LABEL_ENV] = f"stage-{output_dir.name}"
        mode = launch_mode(stage, parallel)
        if mode != ACCELERATE:
            with timing.phase("startup", "launcher"):
                cmd, env = simple_launch(cmd, env)
        if mode == IN_PROCESS:
            if echo:
                print(f"[run_stage] {stage.name} in this process: {output_dir}", flush=True)
            _train_in_process(stage, cmd, env, echo)
            if not done.exists():
                raise TrainingFailed(f"stage {stage.name!r} ended in process without writing {done}")
            _check_declared(stage)
            return read_json_state(done, "the stage result", f"delete {output_dir} to train the stage again")
        tail: deque[str] = deque(maxlen=60)
        prefix = f"[{output_dir.name}] " if parallel > 1 else ""
        with timing.phase(timing.WAIT, stage.name):
            env[timing.LAUNCHED_ENV] = repr(time.time())
            proc = start_group(cmd, env=env, pass_fds=[lock.fileno()])
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    tail.append(line)
                    if echo:
                        print(prefix + line, end="", flush=True)
                proc.stdout.close()
                rc = proc.wait(timeout=timeout)
                forget(proc)
            except BaseException:  # our failure, a timeout or an interruption: the stage stops with us
                stop_group(proc)
                raise
    if rc != 0 or not done.exists():
        raise TrainingFailed(
            f"stage {stage.name!r} exited with code {rc}{_headline(tail)} ({' '.join(cmd)}); "
            f"last lines:\n{''.join(tail)}"
        )
    _check_declared(stage)
    return read_json_state(done, "the stage result", f"delete {output_dir} to train the stage again")


def run_stages(
    stages: Sequence[Stage], *, parallel: int = 1, echo: bool = True, progress: bool = False
) -> list[dict[str, Any]]:
    """Run stages and return their results in order: one after the other, or, with ``parallel`` >
    1, independent stages ``parallel`` at a time. ``progress``: a progress bar over the stages
    run one after the other.

    With ``parallel`` > 1 the subprocesses run
    side by side, each with its share of the cores (:func:`stage_env`): on 2 cores, the tiny
    model's two SFT agents trained side by side with one thread each take about 0.83x the time of
    training them one after the other with two threads (docs/stack.md). When they all start at
    once and their step counts are known, a stage takes over the cores of a shorter one from that
    one's planned last step on (:func:`guirl.train.cores.thread_schedule`; unless ``runtime.threads``
    fixes the count): the thread count changes the weights, so the switch is at a step fixed in
    advance, never at the moment a sibling happens to end.
    The first failure is raised after every started stage has ended; an interruption stops them all.
    Stages that run side by side must not depend on each other (no stage's base model or input may
    be another's output); one after the other (``parallel`` 1), a later stage may start from an
    earlier one's output."""
    from concurrent.futures import ThreadPoolExecutor

    from guirl.train.cores import format_schedule, thread_schedule

    outputs = [s.output_dir.resolve() for s in stages]
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"run_stages: two stages write the same output folder: {[str(p) for p in outputs]}")
    n = max(1, min(parallel, len(stages)))
    if n == 1:
        from tqdm.auto import tqdm

        results = []
        bar = tqdm(stages, desc="stages", disable=not progress)
        for s in bar:
            bar.set_postfix_str(s.output_dir.name)
            results.append(run_stage(s, echo=echo))
        return results
    for s in stages:
        for read in (s.base_model, *s.inputs.values()):
            read = read.resolve()
            if any(read == out or out in read.parents for out in outputs):
                raise ValueError(
                    f"run_stages: {s.output_dir} reads another stage's output ({read}); run them in order (parallel=1)"
                )
    plans = (
        thread_schedule([planned_steps(s.cfg, s.name, s.entry) for s in stages], available_cores())
        if len(stages) <= n
        else None
    )
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [
            pool.submit(
                run_stage,
                stage,
                echo=echo,
                parallel=n,
                thread_schedule=format_schedule(plans[i]) if plans else None,
            )
            for i, stage in enumerate(stages)
        ]
        try:
            with timing.phase(timing.WAIT, "stages side by side"):
                errors = [f.exception() for f in futures]  # waits for every stage
        except BaseException:  # interrupted while waiting: stop the stages still running, then stop
            for f in futures:
                f.cancel()
            stop_all()
            raise
    for err in errors:
        if err is not None:
            raise err
    return [f.result() for f in futures]


def planned_steps(cfg: RunConfig, stage: str, entry: str = SFT_ENTRY) -> int | None:
    """The optimizer steps a grounding or SFT stage will train (``max_steps``), ``None`` when
    the config does not fix them (epochs) or the stage is not one of :data:`SFT_ENTRY`'s."""
    if entry != SFT_ENTRY:
        return None
    return cfg.grounding.max_steps if stage == "grounding" else cfg.sft.max_steps
