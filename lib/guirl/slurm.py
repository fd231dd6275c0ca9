"""Submit the notebook DAG to SLURM: one ``sbatch`` job per stale notebook, chained by ``afterok``.

Command line (the runner's ``--slurm``; ``make reproduce SLURM=1``)::

    python -m guirl.runner --all --slurm [--slurm-config gpu] --profile paper-3b [...]
    python -m guirl.runner notebooks/01_sft.ipynb --dag --slurm --slurm-config local
    python -m guirl.runner --all --slurm --dry-run        # print the job scripts, submit nothing

What is submitted is what ``--all`` (or ``NB --dag``) would run here: the notebooks whose stamp
does not match their current fingerprint, the readers of those, and the ``--force``d ones
(:func:`guirl.runner.stale_notebooks` decides, from the DAG's dry run). Each becomes one job whose script
runs the runner's own single-notebook path on the compute node,
``python -m guirl.runner notebooks/NN.ipynb --profile P [--experiment ..] [--overlay ..]
[--override ..] [-p ..] --output runs/P/NN.ipynb --log-output``, with the same Python, the same
output folders (``GUIRL_RUNS`` / ``GUIRL_FIGURES`` / ``GUIRL_DATA`` / ``GUIRL_CACHE``, exported
as absolute paths) and the same ``PYTHONPATH`` as the submitting shell. A job depends
(``--dependency=afterok:<ids>``) on the jobs of the notebooks it reads (``metadata.guirl.reads``)
that are submitted with it or still queued from an earlier submission, and is cancelled when one
of them fails (``--kill-on-invalid-dep=yes``: state ``CANCELLED``, reason
``DependencyNeverSatisfied``). A notebook whose earlier job is still pending or running is not
submitted again; its readers wait for that job.

Stamps keep their meaning: the job writes ``runs/<profile>/<notebook>.stamp.json`` only when the
notebook finished (it also records the job id, ``slurm_job_id``); a failed job leaves none, so the
next submission submits that notebook and its readers again, and an up-to-date notebook is never
submitted. Job scripts, logs and the submission records live in ``runs/<profile>/slurm/``:
``<notebook>.sbatch``, ``<notebook>-<jobid>.log`` and ``jobs.jsonl`` (one JSON record per
submitted job: notebook, job id, dependencies, script, log, executed copy, stamp, time).

Resources come from ``configs/slurm/<name>.yaml`` (:class:`SlurmConfig`; ``gpu.yaml`` is a
template for 8-GPU nodes, ``local.yaml`` the single-node cluster of the tests). The jobs run the
checkout as it is when they start: edit nothing between submitting and the last job's start, or
the stamps will say the notebooks ran on the edited code (they will, correctly, be stale).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, field_validator

from guirl.config import ConfigError, _display, _layer_path, _names_in, _read_yaml, _to_config_error, format_override
from guirl.configbase import Section
from guirl.dag import RESERVED_PARAMETERS
from guirl.paths import cache_dir, data_dir, figures_dir, repo_root, runs_dir

__all__ = [
    "SLURM_SUBDIR",
    "JOBS_FILE",
    "Resources",
    "NotebookResources",
    "SlurmConfig",
    "known_slurm_configs",
    "load_slurm_config",
    "Job",
    "SubmittedJob",
    "job_command",
    "job_script",
    "plan_jobs",
    "sbatch_command",
    "parse_job_id",
    "live_jobs",
    "read_records",
    "submit",
    "run_cli",
]

#: Job scripts, logs and ``jobs.jsonl`` of a profile: ``runs/<profile>/slurm/``.
SLURM_SUBDIR = "slurm"
JOBS_FILE = "jobs.jsonl"
#: ``--time``: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
#: days-hours:minutes:seconds (sbatch's accepted forms).
_TIME_RE = re.compile(
    r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d{1,2}|\d+-\d{1,2}:\d{1,2}|\d+-\d{1,2}:\d{1,2}:\d{1,2})$"
)
#: ``squeue`` states of a job that has not ended yet.
_LIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT"}
)


# --------------------------------------------------------------------------------------------
# the configuration
def _check_time(value: str) -> str:
    if not _TIME_RE.match(value):
        raise ValueError(
            f"{value!r} is not a SLURM time -- write minutes, HH:MM:SS or D-HH:MM:SS, e.g. '02:00:00' or '2-00:00:00'"
        )
    return value


#: A wall-clock limit in one of sbatch's forms (``_TIME_RE``).
SlurmTime = Annotated[str, AfterValidator(_check_time)]


def _check_word(value: str) -> str:
    """An sbatch option value goes into one ``#SBATCH --name=value`` line of the job script: a
    newline (or any control character) would add a line of its own, so none is allowed, nor white
    space (one word)."""
    bad = next((c for c in value if c.isspace() or unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise ValueError(f"{value!r} holds a control character or white space ({bad!r}) -- write one word, e.g. 'gpu'")
    return value


def _check_line(value: str) -> str:
    """A ``setup`` entry is one line of the job script: no newline or other control character."""
    bad = next((c for c in value if unicodedata.category(c) == "Cc" and c != "\t"), None)
    if bad is not None:
        raise ValueError(
            f"{value!r} holds a control character ({bad!r}) -- write each shell command as its own list item"
        )
    return value


#: An sbatch option value (partition, account, ...): one word, no control character.
SlurmWord = Annotated[str, AfterValidator(_check_word)]
#: A shell line of ``setup``.
ShellLine = Annotated[str, AfterValidator(_check_line)]


class NotebookResources(Section):
    """Per-notebook changes to :class:`Resources` (``notebooks: {00_data_prep: {gpus: 0}}``);
    a key left out keeps the file's value."""

    gpus: int | None = Field(default=None, ge=0)
    gpu_type: SlurmWord | None = None
    cpus_per_task: int | None = Field(default=None, ge=1)
    mem_gb: int | None = Field(default=None, ge=1)
    time: SlurmTime | None = None
    partition: SlurmWord | None = None


class Resources(Section):
    """What one job asks for, on one node (units: GPUs, CPU cores, GiB of memory)."""

    gpus: int = Field(ge=0)
    gpu_type: SlurmWord | None = None  # --gres=gpu:<type>:<n>, e.g. h100; null: any GPU
    cpus_per_task: int = Field(ge=1)
    mem_gb: int | None = Field(ge=1)  # null: the partition's default memory
    time: SlurmTime  # wall-clock limit, e.g. 2-00:00:00
    partition: SlurmWord | None = None  # null: the cluster's default partition
    account: SlurmWord | None = None  # null: the user's default account
    qos: SlurmWord | None = None
    constraint: SlurmWord | None = None  # node features, e.g. h100|a100
    sbatch_args: list[str] = Field(default_factory=list)  # more options, each '--name=value'

    @field_validator("sbatch_args")
    @classmethod
    def _long_options(cls, args: list[str]) -> list[str]:
        for arg in args:
            if not arg.startswith("--") or any(c.isspace() or unicodedata.category(c) == "Cc" for c in arg):
                raise ValueError(
                    f"{arg!r} is not one sbatch option (no white space or control character) -- write each as "
                    "'--name=value', e.g. '--exclusive'"
                )
            if arg.split("=", 1)[0] in ("--dependency", "--output", "--error", "--job-name", "--kill-on-invalid-dep"):
                raise ValueError(f"{arg!r} is set by guirl.slurm -- remove it from sbatch_args")
        return args

    def sbatch_options(self) -> list[str]:
        """The ``--name=value`` options these resources give (one node, one task)."""
        out = ["--nodes=1", "--ntasks=1", f"--cpus-per-task={self.cpus_per_task}", f"--time={self.time}"]
        if self.gpus:
            out.append(f"--gres=gpu:{self.gpu_type + ':' if self.gpu_type else ''}{self.gpus}")
        if self.mem_gb is not None:
            out.append(f"--mem={self.mem_gb}G")
        for key in ("partition", "account", "qos", "constraint"):
            value = getattr(self, key)
            if value is not None:
                out.append(f"--{key}={value}")
        return out + list(self.sbatch_args)


class SlurmConfig(Resources):
    """A ``configs/slurm/<name>.yaml`` file: the :class:`Resources` of every job, per-notebook
    changes (``notebooks``), shell lines the job runs before the runner (``setup``, e.g.
    ``module load cuda``) and the job-name prefix."""

    notebooks: dict[str, NotebookResources] = Field(default_factory=dict)
    setup: list[ShellLine] = Field(default_factory=list)
    job_name_prefix: str = Field(default="guirl", pattern=r"^[A-Za-z0-9_.-]+$")

    def for_notebook(self, stem: str) -> Resources:
        """The resources of ``stem``'s job: the file's, with its ``notebooks`` entry applied."""
        base = {k: getattr(self, k) for k in Resources.model_fields}
        change = self.notebooks.get(stem)
        if change is not None:
            base.update(change.model_dump(exclude_none=True))
        return Resources(**base)


def known_slurm_configs() -> list[str]:
    """The stems of ``configs/slurm/*.yaml``, sorted."""
    return _names_in("slurm")


def load_slurm_config(name: str | Path, notebooks: Sequence[str] | None = None) -> SlurmConfig:
    """Read and validate ``configs/slurm/<name>.yaml`` (or the yaml file at a path).

    ``notebooks``: the known notebook stems; a ``notebooks`` key naming another one is an error.
    Raises :class:`guirl.config.ConfigError` (one line: file, key, problem, fix)."""
    path = _layer_path("slurm", name)
    shown = _display(path)
    known = ", ".join(known_slurm_configs()) or "(none)"
    data = _read_yaml(path, "--slurm-config", f"known SLURM configs: {known}; or pass a path to a yaml file")
    try:
        cfg = SlurmConfig(**data)
    except ValidationError as err:
        bad = _to_config_error(err, {}, shown, SlurmConfig)
        if bad.problem.startswith("missing required key"):  # the generic fix names the profile yaml
            bad = ConfigError(bad.file, bad.key, bad.problem, f"add `{bad.key}: VALUE` to {shown}")
        raise bad from None
    for stem in cfg.notebooks if notebooks is not None else ():
        if stem not in notebooks:
            close = difflib.get_close_matches(stem, notebooks, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(shown, f"notebooks.{stem}", "not a notebook", f"{hint}notebooks: {', '.join(notebooks)}")
    return cfg


# --------------------------------------------------------------------------------------------
# jobs
@dataclass(frozen=True)
class Job:
    """One notebook's job, decided before anything is submitted.

    ``after``: the stems of the notebooks it waits for (submitted with it, or still queued as
    ``queued_ids[stem]``); ``reasons``: why it runs (:func:`guirl.dag.stale_reasons`)."""

    stem: str
    script: str
    script_path: Path
    log_pattern: Path  # the log file with %j for the job id
    output: Path
    stamp: Path
    after: tuple[str, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class SubmittedJob:
    """A job ``sbatch`` accepted: its id, the ids it waits for, and where it writes."""

    job: Job
    job_id: str
    after_ids: tuple[str, ...]

    @property
    def log(self) -> Path:
        return Path(str(self.job.log_pattern).replace("%j", self.job_id))


def _repo_rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def job_command(plan: Any, *, python: str = sys.executable, kernel: str | None = None) -> list[str]:
    """The runner call that executes ``plan`` (a :class:`guirl.runner.RunPlan`) in a job: the same
    profile, experiment, overlays, overrides and own parameters, the executed copy at the planned
    place, cell output streamed to the job log. Run from the repository root."""
    cmd = [python, "-m", "guirl.runner", _repo_rel(plan.notebook), "--profile", plan.config.profile]
    if plan.experiment is not None:
        cmd += ["--experiment", str(plan.experiment)]
    for overlay in plan.overlays:
        cmd += ["--overlay", overlay]
    for item in plan.overrides:
        cmd += ["--override", item]
    for name, value in plan.parameters.items():
        if name not in RESERVED_PARAMETERS:
            cmd += ["-p", name, format_override("v", value).removeprefix("v=")]
    cmd += ["--output", str(plan.output)]
    if kernel is not None:
        cmd += ["--kernel", kernel]
    return [*cmd, "--log-output"]


def _output_env(profile: str) -> dict[str, str]:
    """The output roots the submitting runner uses for ``profile``, as absolute paths (the job
    writes there), and its ``PYTHONPATH`` when set."""
    env = {
        "GUIRL_RUNS": str(runs_dir(profile).parent),
        "GUIRL_FIGURES": str(figures_dir(profile).parent),
        "GUIRL_DATA": str(data_dir(profile).parent),
        "GUIRL_CACHE": str(cache_dir()),
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def job_script(
    plan: Any,
    resources: Resources,
    *,
    job_name: str,
    log_pattern: Path,
    command: Sequence[str],
    env: Mapping[str, str],
    setup: Sequence[str] = (),
) -> str:
    """The batch script of one notebook's job: ``#SBATCH`` lines for ``resources``, the job name
    and the log, then ``cd`` to the repository, the ``env`` exports, the ``setup`` lines and
    ``exec`` of ``command`` (:func:`job_command`). Dependencies are given to ``sbatch`` on its
    command line (:func:`sbatch_command`), since they are job ids known only at submission."""
    lines = [
        "#!/bin/bash",
        f"# {_repo_rel(plan.notebook)} for profile {plan.config.profile} (config {plan.config.hash()}), "
        "written by `python -m guirl.runner --slurm`",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --output={log_pattern}",
        *(f"#SBATCH {opt}" for opt in resources.sbatch_options()),
        "set -euo pipefail",
        f"cd {shlex.quote(str(repo_root()))}",
        *(f"export {key}={shlex.quote(value)}" for key, value in env.items()),
        *setup,
        'echo "[guirl.slurm] job ${SLURM_JOB_ID:-?} on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)"',
        "exec " + shlex.join(command),
    ]
    return "\n".join(lines) + "\n"


def plan_jobs(
    plans: Sequence[Any],
    cfg: SlurmConfig,
    *,
    stale: Mapping[str, Sequence[str]],
    queued: Mapping[str, str] | None = None,
    kernel: str | None = None,
    python: str = sys.executable,
) -> tuple[list[Job], list[str]]:
    """``(jobs, up_to_date)``: the jobs to submit, in run order, and the stems left alone.

    ``stale``: stem -> reasons of the notebooks that would run (the runner decides it:
    :func:`guirl.runner.stale_notebooks`); the others are left alone. ``queued``: stem ->
    id of a job still pending or running from an earlier submission: that notebook is not
    submitted again and its readers depend on that job."""
    queued = dict(queued or {})
    jobs, skipped, submitted = [], [], set()
    for plan in plans:
        if plan.stem not in stale or plan.stem in queued:
            skipped.append(plan.stem)
            continue
        folder = plan.output.parent / SLURM_SUBDIR
        log_pattern = folder / f"{plan.stem}-%j.log"
        script = job_script(
            plan,
            cfg.for_notebook(plan.stem),
            job_name=f"{cfg.job_name_prefix}-{plan.config.profile}-{plan.stem}",
            log_pattern=log_pattern,
            command=job_command(plan, python=python, kernel=kernel),
            env=_output_env(plan.config.profile),
            setup=cfg.setup,
        )
        after = tuple(up for up in plan.reads if up in submitted or up in queued)
        jobs.append(
            Job(
                plan.stem,
                script,
                folder / f"{plan.stem}.sbatch",
                log_pattern,
                plan.output,
                plan.stamp_path,
                after,
                stale[plan.stem],
            )
        )
        submitted.add(plan.stem)
    return jobs, skipped


def sbatch_command(script_path: Path, after_ids: Sequence[str], *, sbatch: str = "sbatch") -> list[str]:
    """``sbatch --parsable [--dependency=afterok:ID:ID --kill-on-invalid-dep=yes] SCRIPT``."""
    cmd = [sbatch, "--parsable"]
    if after_ids:
        cmd += [f"--dependency=afterok:{':'.join(after_ids)}", "--kill-on-invalid-dep=yes"]
    return [*cmd, str(script_path)]


def parse_job_id(stdout: str) -> str:
    """The job id of ``sbatch --parsable`` output (``ID`` or ``ID;CLUSTER``)."""
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    if not job_id.isdigit():
        raise RuntimeError(f"sbatch printed no job id (got {stdout.strip()!r})")
    return job_id


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a ``jobs.jsonl`` file, oldest first (``[]`` when there is none); lines
    that do not parse are skipped."""
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "notebook" in rec and "job_id" in rec:
            out.append(rec)
    return out


def live_jobs(records: Sequence[Mapping[str, Any]], *, squeue: str = "squeue") -> dict[str, str]:
    """stem -> job id, for the latest recorded job of each notebook that ``squeue`` still lists
    as pending or running (``{}`` without records)."""
    latest = {str(r["notebook"]): str(r["job_id"]) for r in records}
    if not latest:
        return {}
    proc = subprocess.run(
        [squeue, "--noheader", "--me", "--states=all", "--format=%i|%T"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"squeue failed: {proc.stderr.strip() or proc.stdout.strip()}")
    states = dict(line.split("|", 1) for line in proc.stdout.split() if "|" in line)
    return {stem: job_id for stem, job_id in latest.items() if states.get(job_id) in _LIVE_STATES}


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def submit(
    jobs: Sequence[Job],
    *,
    queued: Mapping[str, str] | None = None,
    sbatch: str = "sbatch",
    records_path: Path | None = None,
    config_name: str = "",
    log: Callable[[str], None] = print,
) -> list[SubmittedJob]:
    """Write each job's script and submit it with ``sbatch``, upstream first; record every
    accepted job in ``records_path`` (``jobs.jsonl``) as soon as it is accepted. ``queued``:
    stem -> id of an earlier job still queued (a dependency target). A refused submission raises
    ``RuntimeError`` naming the notebook (the jobs accepted before it stay queued and recorded)."""
    ids = dict(queued or {})
    done = []
    for job in jobs:
        job.script_path.parent.mkdir(parents=True, exist_ok=True)
        job.script_path.write_text(job.script, encoding="utf-8")
        after_ids = tuple(ids[up] for up in job.after)
        cmd = sbatch_command(job.script_path, after_ids, sbatch=sbatch)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{job.stem}: sbatch refused the job ({(proc.stderr or proc.stdout).strip()}); "
                f"script {_repo_rel(job.script_path)}"
            )
        sub = SubmittedJob(job, parse_job_id(proc.stdout), after_ids)
        ids[job.stem] = sub.job_id
        done.append(sub)
        if records_path is not None:
            record = {
                "notebook": job.stem,
                "job_id": sub.job_id,
                "after": list(after_ids),
                "reasons": list(job.reasons),
                "script": str(job.script_path),
                "log": str(sub.log),
                "output": str(job.output),
                "stamp": str(job.stamp),
                "slurm_config": config_name,
                "submitted_utc": _now(),
            }
            records_path.parent.mkdir(parents=True, exist_ok=True)
            with records_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        waits = f" after {', '.join(f'{up} ({ids[up]})' for up in job.after)}" if job.after else ""
        log(
            f"[guirl.slurm] {job.stem}: job {sub.job_id}{waits} ({'; '.join(job.reasons)}) -> "
            f"{_repo_rel(job.output)}; log {_repo_rel(sub.log)}"
        )
    return done


# --------------------------------------------------------------------------------------------
# the runner's --slurm
def _print_dry_run(jobs: Sequence[Job], queued: Mapping[str, str], sbatch: str) -> None:
    placeholders = {**queued, **{j.stem: f"$JOB_{j.stem}" for j in jobs}}
    for job in jobs:
        cmd = sbatch_command(job.script_path, [placeholders[up] for up in job.after], sbatch=sbatch)
        print(f"# {job.stem}: would submit ({'; '.join(job.reasons)}); {_repo_rel(job.script_path)}:")
        print(job.script, end="")
        print(f"# JOB_{job.stem}=$({' '.join(cmd)})\n")


def run_cli(
    plans: Sequence[Any],
    *,
    config_name: str,
    stale: Mapping[str, Sequence[str]],
    dry_run: bool,
    kernel: str | None,
    notebooks: Sequence[str],
) -> int:
    """The runner's ``--slurm`` (:func:`guirl.runner.main` calls it with validated plans): decide
    the jobs, print the scripts (``dry_run``) or submit them. Returns the exit status: 0 ok,
    1 a submission failed, 2 a bad SLURM config or no ``sbatch``."""
    try:
        cfg = load_slurm_config(config_name, notebooks)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sbatch = shutil.which("sbatch")
    if sbatch is None and not dry_run:
        print(
            "error: sbatch not found on PATH; submit from a SLURM login node, print the job scripts with "
            "--dry-run, or see docs/cluster.md for running over plain SSH",
            file=sys.stderr,
        )
        return 2
    records_path = plans[0].output.parent / SLURM_SUBDIR / JOBS_FILE
    try:
        queued = live_jobs(read_records(records_path)) if not dry_run else {}
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        print(f"error: cannot list the queued jobs: {err}", file=sys.stderr)
        return 1
    queued = {stem: i for stem, i in queued.items() if stem in {p.stem for p in plans}}
    jobs, skipped = plan_jobs(plans, cfg, stale=stale, queued=queued, kernel=kernel)
    for stem in skipped:
        state = f"still queued as job {queued[stem]}, not submitted again" if stem in queued else "up to date"
        print(f"[guirl.slurm] {stem}: {state}")
    if dry_run:
        _print_dry_run(jobs, queued, sbatch or "sbatch")
        return 0
    try:
        done = submit(jobs, queued=queued, sbatch=sbatch, records_path=records_path, config_name=config_name)
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    folder = _repo_rel(records_path.parent)
    print(
        f"[guirl.slurm] {len(done)} submitted ({', '.join(f'{s.job.stem} {s.job_id}' for s in done) or 'none'}), "
        f"{len(skipped)} not; scripts, logs and {JOBS_FILE} in {folder}/; watch with `squeue --me`"
    )
    return 0
