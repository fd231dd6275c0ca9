"""Run notebooks through papermill with a configuration resolved once.

Command line::

    python -m guirl.runner notebooks/00_data_prep.ipynb --profile tiny \\
        [--override dotted.key=value ...] [--experiment NAME] [--smoke | --overlay NAME ...] \\
        [-p NAME VALUE ...] [--dry-run]
    python -m guirl.runner --all --profile tiny [--force]        # make reproduce
    python -m guirl.runner notebooks/01_sft.ipynb --dag [--force] # make nb-01_sft
    python -m guirl.runner --all --slurm [--slurm-config gpu]   # make reproduce SLURM=1

For each notebook the runner

1. resolves and validates the configuration (``guirl.config.load_config``: profile <
   experiment < overlays < overrides) *before* anything runs; a bad configuration prints a
   one-line error naming the file and key, writes nothing and exits with status 2;
2. saves it to ``runs/<profile>/<notebook>.config.yaml`` and executes the notebook with
   papermill on the project kernel (``guirl``), injecting ``profile``, ``experiment``,
   ``overrides`` and ``config_path`` (the saved file, which the notebook loads with
   ``guirl.config.load_run_config``: the config it runs with is the one saved) and any
   ``-p NAME VALUE`` for the notebook's own parameters (never a config key);
3. writes the executed copy to ``runs/<profile>/<notebook>.ipynb`` (never over the source),
   and after a successful run the stamp ``runs/<profile>/<notebook>.stamp.json``
   (:mod:`guirl.dag`), and prints the wall time;
4. writes the run's time breakdown ``runs/<profile>/<notebook>.timing.json`` (also after a
   failure): seconds by category (training, generation, images, I/O, stage start-up, ...) that
   the kernel and its training subprocesses measured (:mod:`guirl.timing`);
   ``python -m guirl.breakdown`` (``make profile``) prints the top items over all notebooks.

While a notebook runs, ``runs/<profile>/<notebook>.lock`` holds the runner's pid: a second run
of the same notebook and profile is refused with a one-line error naming it (exit 2). SIGTERM
and SIGHUP stop a run like Ctrl-C (exit 130): the notebook's kernel is shut down, and the
training stages it started stop with it (:mod:`guirl.train.procs`).

Before anything runs (a plain run, ``--slurm`` or ``--dry-run``), the model, data, accelerate and
DeepSpeed paths the runs would read must exist (:func:`guirl.config.missing_inputs`; exit 2
naming them). A notebook that declares the config sections it reads (``metadata.guirl.config``)
gets a config that refuses the others (:func:`guirl.config.load_run_config`).

``--all`` and ``--dag`` treat the notebooks as a DAG (their ``metadata.guirl.reads``): they run,
in number order, only the notebooks whose source, declared config sections, library code or inputs changed
since their last successful run, or one of whose outputs under ``figures/<profile>/<notebook>/``
or ``runs/<profile>/<notebook>/`` (stage results, final models) is missing (``--all``: every notebook; ``NB --dag``: NB and what it reads,
directly or not). ``--force`` reruns the named ones (all of them with ``--all``). A failed or
interrupted run leaves no stamp, so the next run resumes there.

``--slurm`` submits the notebooks that would run as SLURM jobs instead (:mod:`guirl.slurm`).

The experiment defaults to the notebook's own file: ``configs/experiments/<notebook stem>.<profile>.yaml``
(sizes for one profile alone) when it exists, else ``configs/experiments/<notebook stem>.yaml``.
The notebook contract is in ``docs/architecture.md`` and ``notebooks/README.md``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guirl import dag, timing
from guirl.config import (
    Config,
    ConfigError,
    flatten,
    format_override,
    known_experiments,
    load_config,
    missing_inputs,
    parse_override,
    parse_scalar,
    sections_header,
)
from guirl.dag import RESERVED_PARAMETERS
from guirl.paths import configs_dir, figures_dir, notebooks_dir, repo_root, restore_environ, runs_dir
from guirl.train.procs import FileLock, LockedError

__all__ = [
    "KERNEL_NAME",
    "NOTEBOOK_GLOB",
    "RESERVED_PARAMETERS",
    "RunnerError",
    "RunPlan",
    "RunResult",
    "DagStep",
    "list_notebooks",
    "DataSourceError",
    "default_experiment",
    "notebook_parameters",
    "plan_run",
    "execute",
    "run_notebook",
    "run_dag",
    "DagStopped",
    "current_fingerprint",
    "timing_path",
    "main",
]

KERNEL_NAME = "guirl"
#: Suffix of a run's time breakdown beside its executed copy (``runs/<profile>/<notebook>.timing.json``).
TIMING_SUFFIX = ".timing.json"
#: Folder under ``runs/<profile>/`` of the greedy generations every notebook reuses (guirl.rollout.generation_cache).
GENERATION_CACHE = "generation_cache"
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"


class RunnerError(RuntimeError):
    """A run that cannot start (missing notebook, unsafe output path, bad parameter, no kernel)."""


class DataSourceError(RunnerError):
    """A notebook that cannot run on the config's ``data.source`` (``metadata.guirl.data_sources``);
    a DAG run leaves it out, a run of that notebook alone stops naming the fix."""


@dataclass(frozen=True)
class RunPlan:
    """Everything decided before a notebook runs; building it writes nothing."""

    notebook: Path
    output: Path
    config_path: Path
    config: Config
    parameters: dict[str, Any]
    experiment: str | None
    overlays: tuple[str, ...]
    overrides: tuple[str, ...]
    reads: tuple[str, ...]
    config_sections: tuple[str, ...] | None = None  # metadata.guirl.config; None: every section

    @property
    def stem(self) -> str:
        return self.notebook.stem

    @property
    def stamp_path(self) -> Path:
        """``runs/<profile>/<notebook>.stamp.json`` (next to the executed copy)."""
        return self.output.with_suffix(dag.STAMP_SUFFIX)


@dataclass(frozen=True)
class RunResult:
    """What a finished run wrote and how long it took (seconds)."""

    notebook: Path
    output: Path
    config_path: Path
    config_hash: str
    profile: str
    wall_time_s: float


@dataclass(frozen=True)
class DagStep:
    """One notebook's fate in :func:`run_dag`: ``action`` is ``"ran"``, ``"skipped"`` (up to
    date), ``"would run"`` (dry run), ``"failed"`` or ``"not reached"`` (after a failure)."""

    stem: str
    action: str
    reasons: tuple[str, ...] = ()


def list_notebooks(folder: Path | None = None) -> list[Path]:
    """The numbered notebooks ``NN_*.ipynb`` of ``folder`` (default ``notebooks/``), in order."""
    folder = folder if folder is not None else notebooks_dir()
    return sorted(p for p in folder.glob(NOTEBOOK_GLOB) if p.is_file())


def default_experiment(notebook: Path, profile: str | None = None) -> str | None:
    """``notebook``'s own experiment: ``<stem>.<profile>`` when ``configs/experiments/<stem>.<profile>.yaml``
    exists (values for that profile alone, such as 07's CPU-sized online evaluation on ``tiny``),
    else ``<stem>`` when ``configs/experiments/<stem>.yaml`` exists (every profile), else ``None``."""
    folder = configs_dir() / "experiments"
    for name in ([f"{notebook.stem}.{profile}"] if profile else []) + [notebook.stem]:
        if (folder / f"{name}.yaml").is_file():
            return name
    return None


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def notebook_parameters(nb: Mapping[str, Any]) -> list[str]:
    """The names the notebook's ``parameters`` cell assigns, in order (``[]`` without one)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            src = cell.get("source", "")
            try:
                tree = ast.parse("".join(src) if isinstance(src, list) else src)
            except SyntaxError:
                return []
            return [
                t.id
                for stmt in tree.body
                if isinstance(stmt, ast.Assign)
                for t in stmt.targets
                if isinstance(t, ast.Name)
            ]
    return []


def _override_list(overrides: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    if overrides is None:
        return []
    if isinstance(overrides, str):
        overrides = [overrides]
    if isinstance(overrides, Mapping):
        return [format_override(k, v) for k, v in flatten({str(k): v for k, v in overrides.items()}).items()]
    out = []
    for item in overrides:
        parse_override(item)  # raises ConfigError on malformed items
        out.append(item)
    return out


def _check_parameters(nb_path: Path, declared: list[str], params: Mapping[str, Any], cfg: Config) -> None:
    """``-p NAME VALUE`` may set only the notebook's own parameters, never a config key (a
    top-level key, a section or a dotted key); a name the notebook does not declare that ends a
    dotted key is refused with that key's ``--override``."""
    flat = cfg.to_flat()
    for name, value in params.items():
        if name in RESERVED_PARAMETERS:
            flag = "--override KEY=VALUE" if name == "overrides" else f"--{name.replace('_', '-')}"
            raise RunnerError(f"-p {name}: set by the runner; use {flag} instead")
        exact = [k for k in flat if k == name or k.startswith(f"{name}.")] + [
            k for k in type(cfg).model_fields if k == name and k not in flat
        ]
        if name in declared and not exact:
            # the notebook's own parameter; a deeper config key ending in the same word
            # (androidlong.rl.n_samples for 00's n_samples) is another thing
            continue
        dotted = exact or [k for k in flat if k.endswith(f".{name}")]
        if dotted:
            raise RunnerError(
                f"-p {name}: {name!r} is a config key; set it with --override {dotted[0]}={value}"
                " so that the saved config is the one the notebook uses"
            )
        own = [p for p in declared if p not in RESERVED_PARAMETERS]
        raise RunnerError(
            f"-p {name}: not a parameter of {_rel(nb_path)} (its own parameters: {', '.join(own) or 'none'}); "
            "config keys are set with --override dotted.key=value"
        )


def plan_run(
    notebook: str | Path,
    profile: str = "tiny",
    *,
    experiment: str | None = None,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    overlays: Sequence[str] = (),
    parameters: Mapping[str, Any] | None = None,
    output_path: str | Path | None = None,
) -> RunPlan:
    """Validate a run without writing anything: the notebook exists and declares what it reads,
    the configuration is valid (raises :class:`ConfigError`), every ``-p`` parameter is one of
    the notebook's own, the output is not the source notebook."""
    nb = Path(notebook)
    if not nb.is_file() and not nb.is_absolute() and (repo_root() / nb).is_file():
        nb = repo_root() / nb
    if not nb.is_file() or nb.suffix != ".ipynb":
        raise RunnerError(f"{notebook}: notebook not found (expected an existing .ipynb file)")
    nb = nb.resolve()
    content = dag.load_notebook(nb)
    try:
        reads = dag.notebook_reads(_rel(nb), content)
        sections = dag.notebook_config(_rel(nb), content)
        profiles = dag.notebook_profiles(_rel(nb), content)
        sources = dag.notebook_data_sources(_rel(nb), content)
    except dag.DagError as err:
        raise RunnerError(str(err)) from None
    if profiles is not None and profile not in profiles:
        raise RunnerError(
            f"{_rel(nb)}: runs on profile(s) {', '.join(profiles)} only (metadata.guirl.profiles), not {profile!r}; "
            f"pass --profile {profiles[0]}"
        )
    params = dict(parameters or {})
    override_list = _override_list(overrides)
    if experiment is None:
        experiment = default_experiment(nb, profile)
    cfg = load_config(profile, experiment, override_list, overlays=overlays, notebook=nb.stem)
    if sources is not None and cfg.data.source not in sources:
        fix = next((s for s in sources if s in known_experiments()), None)
        raise DataSourceError(
            f"{_rel(nb)}: runs on data.source {', '.join(sources)} only (metadata.guirl.data_sources), not "
            f"{cfg.data.source!r}" + (f"; pass --experiment {fix}" if fix else "")
        )
    _check_parameters(nb, notebook_parameters(content), params, cfg)
    _check_sections(nb, sections, cfg)
    output = Path(output_path) if output_path is not None else runs_dir(cfg.profile) / nb.name
    output = output.resolve()
    if output == nb:
        raise RunnerError(f"{_rel(nb)}: refusing to write the executed notebook over its source")
    if output.suffix != ".ipynb":
        raise RunnerError(f"{output}: the executed copy must be an .ipynb file")
    if output.is_relative_to(notebooks_dir().resolve()):
        raise RunnerError(
            f"{_rel(output)}: refusing to write executed copies into notebooks/ (sources only); "
            "leave --output unset to write under runs/<profile>/"
        )
    config_path = output.with_suffix(".config.yaml")
    injected = {
        "profile": cfg.profile,
        "experiment": experiment,
        "overrides": override_list,
        "config_path": str(config_path),
        **params,
    }
    return RunPlan(
        nb,
        output,
        config_path,
        cfg,
        injected,
        experiment,
        tuple(map(str, overlays)),
        tuple(override_list),
        reads,
        sections,
    )


def _check_sections(nb_path: Path, sections: Sequence[str] | None, cfg: Config) -> None:
    """Every section a notebook declares it reads (``metadata.guirl.config``) is a top-level key
    of the config."""
    known = list(type(cfg).model_fields)
    for name in sections or ():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise RunnerError(
                f"{_rel(nb_path)}: metadata.{dag.META_KEY}.config: {name!r} is not a config section; "
                f"{hint}sections: {', '.join(known)}"
            )


def _missing_paths(plans: Sequence[RunPlan]) -> str:
    """One line naming every file and folder the runs of ``plans`` would read that does not exist
    (:func:`guirl.config.missing_inputs`: the model, the data set, the accelerate and DeepSpeed
    files) and the fix; ``""`` when all are there. The same check for a plain run, ``--slurm``
    and ``--dry-run``, before anything starts."""
    missing = list(dict.fromkeys(m for plan in plans for m in missing_inputs(plan.config)))
    if not missing:
        return ""
    return (
        f"the run would read {len(missing)} path(s) that do not exist: {'; '.join(missing)}; "
        "create them or point the config at them (--override KEY=PATH)"
    )


def _check_kernel(kernel_name: str) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        raise RunnerError(
            f"Jupyter kernel {kernel_name!r} is not installed; run `make setup` (it runs "
            f"`python -m ipykernel install --prefix .venv --name {kernel_name}`)"
        ) from None


def _upstream_stamp(plan: RunPlan, stem: str) -> Path:
    return plan.stamp_path.with_name(f"{stem}{dag.STAMP_SUFFIX}")


def current_fingerprint(plan: RunPlan, library: str | None = None) -> dict[str, Any]:
    """The fingerprint a run of ``plan`` would have now (:func:`guirl.dag.fingerprint`)."""
    config: str | dict[str, str] = (
        plan.config.hash()
        if plan.config_sections is None
        else dag.config_digest(plan.config.to_dict(), plan.config_sections)
    )
    return dag.fingerprint(
        source=dag.source_digest(dag.load_notebook(plan.notebook)),
        config=config,
        library=library if library is not None else dag.library_digest(),
        inputs={up: dag.stamp_digest(_upstream_stamp(plan, up)) for up in plan.reads},
    )


def _header(plan: RunPlan) -> list[str]:
    from guirl.config import overlay_keys_not_applied

    lines = [
        f"resolved by guirl.runner for {_rel(plan.notebook)}: the notebook loads this file (config_path)",
        f"profile {plan.config.profile}; experiment {plan.experiment or '-'}; "
        f"overlays {', '.join(plan.overlays) or '-'}; overrides {' '.join(plan.overrides) or '-'}",
    ]
    if plan.config_sections is not None:  # load_run_config refuses the other sections
        lines.append(sections_header(plan.stem, plan.config_sections))
    unused = overlay_keys_not_applied(plan.notebook.stem, plan.overlays)
    if unused:
        lines.append(
            "set per stage by this notebook, so the overlay's value does not reach a stage: " + "; ".join(unused)
        )
    return lines


def _papermill(plan: RunPlan, *, kernel_name: str, log_output: bool) -> None:
    """Execute ``plan.notebook`` into ``plan.output`` with papermill, injecting the parameters; the
    kernel starts with :data:`guirl.train.launch.FIXED_THREADS_ENV` in its environment."""
    _check_kernel(kernel_name)
    import papermill as pm  # slow import: only when something runs

    from guirl.train.launch import FIXED_THREADS_ENV

    saved = {k: os.environ.get(k) for k in FIXED_THREADS_ENV}
    os.environ.update(FIXED_THREADS_ENV)  # the kernel starts with them (and its stages inherit them)
    try:
        pm.execute_notebook(
            str(plan.notebook),
            str(plan.output),
            parameters=plan.parameters,
            kernel_name=kernel_name,
            cwd=str(plan.notebook.parent),
            log_output=log_output,
            progress_bar=False,
        )
    finally:
        restore_environ(saved)


def timing_path(plan: RunPlan) -> Path:
    """``runs/<profile>/<notebook>.timing.json``: the run's time breakdown (:func:`guirl.timing.breakdown`)."""
    return plan.output.with_suffix(TIMING_SUFFIX)


@contextlib.contextmanager
def _timed(plan: RunPlan) -> Iterator[Callable[[], float]]:
    """Run the block with :data:`guirl.timing.DIR_ENV` pointing at a fresh folder beside the executed
    copy, :data:`guirl.timing.LABEL_ENV` = ``kernel`` and the generation cache
    (:data:`guirl.rollout.generation_cache.CACHE_ENV`, unless set already) at
    ``runs/<profile>/generation_cache`` (the notebook's kernel and its training subprocesses
    inherit them), then write :func:`timing_path` from the processes' files, also when the notebook
    failed, and delete the folder. Yields a function returning the block's seconds."""
    from guirl.rollout.generation_cache import CACHE_ENV

    folder = plan.output.with_suffix(".timing.d")
    shutil.rmtree(folder, ignore_errors=True)
    saved = {var: os.environ.get(var) for var in (timing.DIR_ENV, timing.LABEL_ENV, CACHE_ENV)}
    os.environ[timing.DIR_ENV] = str(folder)
    os.environ[timing.LABEL_ENV] = "kernel"
    os.environ.setdefault(CACHE_ENV, str(plan.output.parent / GENERATION_CACHE))
    start = time.perf_counter()
    wall: list[float] = []

    def elapsed() -> float:
        return wall[0] if wall else time.perf_counter() - start

    try:
        yield elapsed
    finally:
        wall.append(time.perf_counter() - start)
        restore_environ(saved)
        report = timing.breakdown(timing.read_folder(folder) if folder.is_dir() else [], wall[0])
        report = {"notebook": plan.stem, "profile": plan.config.profile, **report}
        tmp = timing_path(plan).with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(timing_path(plan))
        shutil.rmtree(folder, ignore_errors=True)


def execute(
    plan: RunPlan,
    *,
    kernel_name: str = KERNEL_NAME,
    log_output: bool = False,
    quiet: bool = False,
    library: str | None = None,
    engine: Callable[..., None] | None = None,
) -> RunResult:
    """Run a validated :class:`RunPlan` (see :func:`run_notebook`): remove its old stamp, save
    the resolved config to ``plan.config_path`` (with a header saying how it was resolved), run
    the notebook, and on success write the stamp with the fingerprint taken before the run.

    ``engine(plan, kernel_name=..., log_output=...)`` executes the notebook (default: papermill;
    tests pass a stand-in). ``library``: the library digest when the caller has it already."""
    fp = current_fingerprint(plan, library)
    plan.output.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(plan.output.with_suffix(".lock"), f"notebook {plan.stem} (profile {plan.config.profile})")
    try:
        lock.acquire()
    except LockedError as err:
        raise RunnerError(str(err)) from None
    try:
        plan.stamp_path.unlink(missing_ok=True)
        plan.config.save(plan.config_path, header=_header(plan))
        started = time.time() - 1.0  # a second of slack for coarse mtimes
        with _timed(plan) as elapsed:
            (engine or _papermill)(plan, kernel_name=kernel_name, log_output=log_output)
        wall = elapsed()
        figures = figures_dir(plan.config.profile)
        outputs = dag.written_since(figures / plan.stem, started, figures)
        runs = runs_dir(plan.config.profile)
        dag.write_stamp(
            plan.stamp_path,
            fp,
            notebook=plan.stem,
            wall_time_s=wall,
            outputs=outputs,
            run_outputs=dag.run_outputs(runs / plan.stem, runs),
        )
    finally:
        lock.release()
    result = RunResult(plan.notebook, plan.output, plan.config_path, plan.config.hash(), plan.config.profile, wall)
    if not quiet:
        print(
            f"[guirl.runner] {_rel(plan.notebook)} -> {_rel(plan.output)} "
            f"(profile {plan.config.profile}, config {result.config_hash}): {wall:.1f} s",
            flush=True,
        )
    return result


def run_notebook(
    notebook: str | Path,
    profile: str = "tiny",
    *,
    experiment: str | None = None,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    overlays: Sequence[str] = (),
    parameters: Mapping[str, Any] | None = None,
    output_path: str | Path | None = None,
    kernel_name: str = KERNEL_NAME,
    log_output: bool = False,
    quiet: bool = False,
) -> RunResult:
    """Validate, then execute ``notebook`` with papermill; returns what was written.

    Raises :class:`ConfigError` or :class:`RunnerError` before writing anything (a path the run
    would read that does not exist included), and
    ``papermill.PapermillExecutionError`` when a cell fails (the executed copy, with the
    traceback, is then at ``runs/<profile>/<notebook>.ipynb``).
    """
    plan = plan_run(
        notebook,
        profile,
        experiment=experiment,
        overrides=overrides,
        overlays=overlays,
        parameters=parameters,
        output_path=output_path,
    )
    missing = _missing_paths([plan])
    if missing:
        raise RunnerError(missing)
    return execute(plan, kernel_name=kernel_name, log_output=log_output, quiet=quiet)


def stale_notebooks(
    plans: Sequence[Any], *, force: Sequence[str] = (), use_dag: bool = True
) -> dict[str, tuple[str, ...]]:
    """``{stem: reasons}`` of the notebooks of ``plans`` that would run (:func:`run_dag`'s dry run:
    stale or ``force``d); without ``use_dag`` every plan, "run as asked"."""
    if not use_dag:
        return {p.stem: ("run as asked",) for p in plans}
    steps = run_dag(plans, force=force, dry_run=True, log=lambda line: None)
    return {s.stem: tuple(s.reasons) for s in steps if s.action == "would run"}


def run_dag(
    plans: Sequence[RunPlan],
    *,
    force: Sequence[str] = (),
    dry_run: bool = False,
    log: Callable[[str], None] = print,
    **execute_kw: Any,
) -> list[DagStep]:
    """Run the stale notebooks of ``plans`` (in number order, upstream first) and skip the rest.

    A notebook runs when its stamp does not match its current fingerprint
    (:func:`guirl.dag.stale_reasons`), when one of the notebooks it reads ran in this call, or
    when its stem is in ``force``. ``dry_run``: decide and report only. The first failure (or
    Ctrl-C) stops the walk with :class:`DagStopped`; the failed notebook keeps no stamp, so the
    next call reruns it and what follows. ``execute_kw`` go to :func:`execute`. Returns one
    :class:`DagStep` per plan.
    """
    dag.check_reads({p.stem: p.reads for p in plans})
    library = dag.library_digest()
    steps: list[DagStep] = []
    ran: set[str] = set()
    for i, plan in enumerate(plans):
        reasons = ["forced"] if plan.stem in force else []
        stamp = dag.read_stamp(plan.stamp_path)
        reasons += dag.stale_reasons(stamp, current_fingerprint(plan, library))
        reasons += dag.missing_outputs(stamp, figures_dir(plan.config.profile))[:3]
        reasons += dag.missing_outputs(stamp, runs_dir(plan.config.profile), "run_outputs")[:3]
        if dry_run:  # upstream runs are only planned: their stamps have not changed yet
            reasons += [f"input {up} would rerun" for up in plan.reads if up in ran]
        if not reasons:
            log(f"[guirl.runner] {plan.stem}: up to date, skipped")
            steps.append(DagStep(plan.stem, "skipped"))
            continue
        why = tuple(dict.fromkeys(reasons))
        if dry_run:
            log(f"[guirl.runner] {plan.stem}: would run ({'; '.join(why)})")
            steps.append(DagStep(plan.stem, "would run", why))
            ran.add(plan.stem)
            continue
        log(f"[guirl.runner] {plan.stem}: runs ({'; '.join(why)})")
        try:
            execute(plan, library=library, **execute_kw)
        except BaseException as err:  # a failure or Ctrl-C: stop here, report what happened
            steps.append(DagStep(plan.stem, "failed", why))
            steps += [DagStep(p.stem, "not reached") for p in plans[i + 1 :]]
            raise DagStopped(steps, plan, err) from err
        ran.add(plan.stem)
        steps.append(DagStep(plan.stem, "ran", why))
    return steps


class DagStopped(Exception):
    """A notebook of :func:`run_dag` failed or was interrupted: ``steps`` says what happened to
    every plan, ``plan`` is the one that failed and ``error`` the original exception."""

    def __init__(self, steps: list[DagStep], plan: RunPlan, error: BaseException) -> None:
        super().__init__(f"{plan.stem} failed: {_error_line(error)}")
        self.steps, self.plan, self.error = steps, plan, error


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m guirl.runner",
        description="Execute notebooks with papermill under a validated guirl configuration.",
    )
    ap.add_argument("notebook", nargs="?", help="path of the notebook (e.g. notebooks/00_data_prep.ipynb)")
    ap.add_argument(
        "--all", action="store_true", help=f"every notebooks/{NOTEBOOK_GLOB} whose inputs changed, in order"
    )
    ap.add_argument(
        "--dag",
        action="store_true",
        help="NOTEBOOK and the notebooks it reads: run only the stale ones, upstream first",
    )
    ap.add_argument("--force", action="store_true", help="with --all or --dag: rerun even when up to date")
    ap.add_argument("--profile", default="tiny", help="configs/profiles/<PROFILE>.yaml (default: tiny)")
    ap.add_argument(
        "--experiment",
        default=None,
        help="configs/experiments/<NAME>.yaml or a path (default: the notebook's own, if any)",
    )
    ap.add_argument(
        "--overlay",
        action="append",
        default=[],
        metavar="NAME",
        help="configs/overlays/<NAME>.yaml or a path, applied after the experiment (repeatable)",
    )
    ap.add_argument("--smoke", action="store_true", help="shorthand for --overlay smoke (seconds-sized budgets)")
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override with a dotted key (e.g. --override data.source=aitz), applied last",
    )
    ap.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="one of the notebook's own parameters (never a config key); VALUE is parsed as YAML",
    )
    ap.add_argument("--output", default=None, help="executed copy (default: runs/<profile>/<notebook>.ipynb)")
    ap.add_argument("--kernel", default=KERNEL_NAME, help=f"Jupyter kernel (default: {KERNEL_NAME})")
    ap.add_argument("--log-output", action="store_true", help="stream cell outputs to the terminal")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="validate and print the resolved configuration (and, with --all/--dag, what would run); write nothing",
    )
    ap.add_argument(
        "--slurm",
        action="store_true",
        help="submit one sbatch job per notebook that would run, chained by afterok (guirl.slurm); "
        "with --dry-run: print the job scripts",
    )
    ap.add_argument(
        "--slurm-config",
        default=None,
        metavar="NAME",
        help="with --slurm: configs/slurm/<NAME>.yaml or a path (job resources; default: gpu)",
    )
    return ap


def _error_line(err: BaseException) -> str:
    if hasattr(err, "ename"):
        return f"{err.ename}: {err.evalue} (cell {getattr(err, 'exec_count', '?')})"
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def _stop_like_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM / SIGHUP: stop as Ctrl-C does (papermill shuts the kernel down, finally blocks run)."""
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 a notebook failed, 2 bad
    configuration or usage or a notebook already running, 130 interrupted or terminated)."""
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    before = {sig: signal.signal(sig, _stop_like_ctrl_c) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _main(argv)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.all == (args.notebook is not None):
        print("error: give one NOTEBOOK or --all", file=sys.stderr)
        return 2
    if args.all and (args.output or args.dag):
        print("error: --output and --dag need a single NOTEBOOK (--all already runs the DAG)", file=sys.stderr)
        return 2
    use_dag = args.all or args.dag
    if args.slurm_config is not None and not args.slurm:
        print("error: --slurm-config needs --slurm", file=sys.stderr)
        return 2
    if args.force and not use_dag:
        print("error: --force needs --all or --dag (a single NOTEBOOK always runs)", file=sys.stderr)
        return 2
    overlays = [*(["smoke"] if args.smoke else []), *args.overlay]
    parameters = {key: parse_scalar(value) for key, value in args.parameter}
    all_notebooks = list_notebooks()
    if args.all:
        notebooks = all_notebooks
    elif args.dag:
        target = Path(args.notebook).resolve()
        try:
            reads = {p.stem: dag.notebook_reads(_rel(p)) for p in all_notebooks}
            dag.check_reads(reads)
            stems = dag.with_upstream([target.stem], reads)
        except dag.DagError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        notebooks = [p for p in all_notebooks if p.stem in stems]
    else:
        notebooks = [Path(args.notebook)]
    if use_dag:  # a DAG run leaves out the notebooks that do not run on this profile (09: tiny only)
        kept = []
        for p in notebooks:
            try:
                profiles = dag.notebook_profiles(_rel(p))
            except dag.DagError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            if profiles is None or args.profile in profiles or (args.dag and p.resolve() == target):
                kept.append(p)
            else:
                print(f"[guirl.runner] {p.stem}: not on profile {args.profile} (runs on {', '.join(profiles)})")
        notebooks = kept
    if not notebooks:
        print(f"[guirl.runner] no notebooks match notebooks/{NOTEBOOK_GLOB}; nothing to run")
        return 0
    try:  # validate every run before executing any
        plans = []
        for nb in notebooks:
            try:
                plans.append(
                    plan_run(
                        nb,
                        args.profile,
                        experiment=args.experiment,
                        overrides=args.override,
                        overlays=overlays,
                        # -p parameters belong to the named notebook, not to its upstream
                        parameters=parameters if (not args.dag or nb.stem == Path(args.notebook).stem) else None,
                        output_path=args.output,
                    )
                )
            except DataSourceError as err:  # a DAG run leaves out a notebook for other data sets (04)
                if not use_dag or (args.dag and nb.resolve() == target):
                    raise
                print(f"[guirl.runner] {nb.stem}: left out: {str(err).split(': ', 1)[1]}")
        if use_dag:
            dag.check_reads({p.stem: p.reads for p in plans})
    except (ConfigError, RunnerError, dag.DagError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    missing = _missing_paths(plans)
    if missing and not args.dry_run:  # fail fast: before submitting or starting anything
        print(f"error: {missing}", file=sys.stderr)
        return 2
    if args.slurm:
        if missing:  # --slurm --dry-run: the scripts would run notebooks that fail at once
            print(f"error: {missing}", file=sys.stderr)
            return 2
        from guirl import slurm

        force = ([p.stem for p in plans] if args.all else [Path(args.notebook).stem]) if args.force else ()
        return slurm.run_cli(
            plans,
            config_name=args.slurm_config or "gpu",
            stale=stale_notebooks(plans, force=force, use_dag=use_dag),
            dry_run=args.dry_run,
            kernel=args.kernel if args.kernel != KERNEL_NAME else None,
            notebooks=[p.stem for p in all_notebooks],
        )
    if args.dry_run:
        for plan in plans:
            print(f"# {_rel(plan.notebook)} -> {_rel(plan.output)}; parameters {plan.parameters}")
            print(plan.config.to_yaml(), end="")
        if use_dag:
            run_dag(plans, dry_run=True)
        if missing:
            print(f"error: {missing}", file=sys.stderr)
            return 2
        return 0
    total = time.perf_counter()
    execute_kw = {"kernel_name": args.kernel, "log_output": args.log_output}
    try:
        if use_dag:
            force = [p.stem for p in plans] if args.all else [Path(args.notebook).stem]
            steps = run_dag(plans, force=force if args.force else (), **execute_kw)
            ran = [s.stem for s in steps if s.action == "ran"]
            print(
                f"[guirl.runner] {len(ran)} ran ({', '.join(ran) or 'none'}), "
                f"{len(steps) - len(ran)} up to date: {time.perf_counter() - total:.1f} s"
            )
        else:
            execute(plans[0], **execute_kw)
    except DagStopped as stop:
        return _report_failure(stop.error, stop.plan)
    except RunnerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the notebook that was running keeps no stamp; run again to resume", file=sys.stderr)
        return 130
    except Exception as err:  # papermill.PapermillExecutionError and kernel failures
        return _report_failure(err, plans[0])
    return 0


def _report_failure(err: BaseException, failed: RunPlan) -> int:
    if isinstance(err, KeyboardInterrupt):
        print(f"interrupted in {failed.stem}: it keeps no stamp; run again to resume there", file=sys.stderr)
        return 130
    if isinstance(err, RunnerError):
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"error: {_rel(failed.notebook)} failed: {_error_line(err)}; the executed copy with the "
        f"traceback is {_rel(failed.output)}",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
