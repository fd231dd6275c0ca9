"""Run notebooks through papermill with a validated configuration.

Command line::

    python -m guirl.runner notebooks/00_data_prep.ipynb --profile tiny \\
        [-p KEY VALUE ...] [--override dotted.key=value ...] [--experiment NAME] [--dry-run]
    python -m guirl.runner --all --profile tiny

For each notebook the runner

1. loads and validates the configuration (``guirl.config.load_config``) *before* anything
   runs; a bad configuration prints a one-line error, writes nothing and exits with status 2;
2. executes the notebook with papermill on the project kernel (``guirl``), injecting the
   parameters ``profile``, ``experiment``, ``seed``, ``overrides`` (a list of ``key=value``
   strings) and any ``-p KEY VALUE`` (values parsed as YAML scalars, e.g. ``-p smoke true``);
3. writes the executed copy to ``runs/<profile>/<notebook>.ipynb`` (never over the source) and
   the resolved configuration next to it (``<notebook>.config.yaml``), and prints the wall time.

The experiment defaults to ``configs/experiments/<notebook stem>.yaml`` when that file exists.

Notebook contract: exactly one cell tagged ``parameters`` that assigns flat literals, at least
``profile``, ``experiment``, ``seed``, ``overrides`` and ``smoke``, and a first code cell after
it that calls ``cfg = load_config(profile, experiment, overrides)``. ``smoke=True`` asks the
notebook to shrink its budgets (tests use it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guirl.config import (
    Config,
    ConfigError,
    flatten,
    format_override,
    load_config,
    parse_override,
    parse_scalar,
)
from guirl.paths import configs_dir, notebooks_dir, repo_root, runs_dir

__all__ = [
    "KERNEL_NAME",
    "NOTEBOOK_GLOB",
    "RESERVED_PARAMETERS",
    "RunnerError",
    "RunResult",
    "list_notebooks",
    "default_experiment",
    "plan_run",
    "run_notebook",
    "main",
]

KERNEL_NAME = "guirl"
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
RESERVED_PARAMETERS = ("profile", "experiment", "seed", "overrides")


class RunnerError(RuntimeError):
    """A run that cannot start (missing notebook, unsafe output path, no kernel)."""


@dataclass(frozen=True)
class RunPlan:
    """Everything decided before a notebook runs; building it writes nothing."""

    notebook: Path
    output: Path
    config_path: Path
    config: Config
    parameters: dict[str, Any]


@dataclass(frozen=True)
class RunResult:
    """What a finished run wrote and how long it took (seconds)."""

    notebook: Path
    output: Path
    config_path: Path
    config_hash: str
    profile: str
    wall_time_s: float


def list_notebooks(folder: Path | None = None) -> list[Path]:
    """The numbered notebooks ``NN_*.ipynb`` of ``folder`` (default ``notebooks/``), in order."""
    folder = folder if folder is not None else notebooks_dir()
    return sorted(p for p in folder.glob(NOTEBOOK_GLOB) if p.is_file())


def default_experiment(notebook: Path) -> str | None:
    """``notebook``'s stem when ``configs/experiments/<stem>.yaml`` exists, else ``None``."""
    return notebook.stem if (configs_dir() / "experiments" / f"{notebook.stem}.yaml").is_file() else None


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


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


def plan_run(
    notebook: str | Path,
    profile: str = "tiny",
    *,
    experiment: str | None = None,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    parameters: Mapping[str, Any] | None = None,
    output_path: str | Path | None = None,
) -> RunPlan:
    """Validate a run without writing anything: the notebook exists, the configuration is
    valid (raises :class:`ConfigError`), the output is not the source notebook."""
    nb = Path(notebook)
    if not nb.is_file() and not nb.is_absolute() and (repo_root() / nb).is_file():
        nb = repo_root() / nb
    if not nb.is_file() or nb.suffix != ".ipynb":
        raise RunnerError(f"{notebook}: notebook not found (expected an existing .ipynb file)")
    nb = nb.resolve()
    params = dict(parameters or {})
    override_list = _override_list(overrides)
    for key in ("profile", "overrides", "experiment"):
        if key in params:
            raise RunnerError(f"-p {key}: reserved parameter; use --{key} instead")
    if "seed" in params:  # `-p seed 3` is a config override, so the saved config agrees
        override_list.append(format_override("seed", params.pop("seed")))
    if experiment is None:
        experiment = default_experiment(nb)
    cfg = load_config(profile, experiment, override_list)
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
    injected = {
        "profile": str(profile),
        "experiment": experiment,
        "seed": cfg.seed,
        "overrides": override_list,
        **params,
    }
    return RunPlan(nb, output, output.with_suffix(".config.yaml"), cfg, injected)


def _check_kernel(kernel_name: str) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        raise RunnerError(
            f"Jupyter kernel {kernel_name!r} is not installed; run `make setup` (it runs "
            f"`python -m ipykernel install --prefix .venv --name {kernel_name}`)"
        ) from None


def execute(
    plan: RunPlan, *, kernel_name: str = KERNEL_NAME, log_output: bool = False, quiet: bool = False
) -> RunResult:
    """Run a validated :class:`RunPlan` with papermill (see :func:`run_notebook`)."""
    _check_kernel(kernel_name)
    import papermill as pm  # slow import: only when something runs

    plan.output.parent.mkdir(parents=True, exist_ok=True)
    plan.config.save(plan.config_path)
    start = time.perf_counter()
    pm.execute_notebook(
        str(plan.notebook),
        str(plan.output),
        parameters=plan.parameters,
        kernel_name=kernel_name,
        cwd=str(plan.notebook.parent),
        log_output=log_output,
        progress_bar=False,
    )
    wall = time.perf_counter() - start
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
    parameters: Mapping[str, Any] | None = None,
    output_path: str | Path | None = None,
    kernel_name: str = KERNEL_NAME,
    log_output: bool = False,
    quiet: bool = False,
) -> RunResult:
    """Validate, then execute ``notebook`` with papermill; returns what was written.

    Raises :class:`ConfigError` or :class:`RunnerError` before writing anything, and
    ``papermill.PapermillExecutionError`` when a cell fails (the executed copy, with the
    traceback, is then at ``runs/<profile>/<notebook>.ipynb``).
    """
    plan = plan_run(
        notebook, profile, experiment=experiment, overrides=overrides, parameters=parameters, output_path=output_path
    )
    return execute(plan, kernel_name=kernel_name, log_output=log_output, quiet=quiet)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m guirl.runner",
        description="Execute notebooks with papermill under a validated guirl configuration.",
    )
    ap.add_argument("notebook", nargs="?", help="path of the notebook (e.g. notebooks/00_data_prep.ipynb)")
    ap.add_argument("--all", action="store_true", help=f"run every notebooks/{NOTEBOOK_GLOB} in order")
    ap.add_argument("--profile", default="tiny", help="configs/profiles/<PROFILE>.yaml (default: tiny)")
    ap.add_argument(
        "--experiment",
        default=None,
        help="configs/experiments/<NAME>.yaml or a path (default: the notebook's own, if any)",
    )
    ap.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("KEY", "VALUE"),
        help="papermill parameter; VALUE is parsed as YAML (e.g. -p smoke true)",
    )
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override with a dotted key (e.g. --override sft.learning_rate=1e-4)",
    )
    ap.add_argument("--output", default=None, help="executed copy (default: runs/<profile>/<notebook>.ipynb)")
    ap.add_argument("--kernel", default=KERNEL_NAME, help=f"Jupyter kernel (default: {KERNEL_NAME})")
    ap.add_argument("--log-output", action="store_true", help="stream cell outputs to the terminal")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="validate and print the resolved configuration; run nothing, write nothing",
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 a notebook failed, 2 bad
    configuration or usage)."""
    args = _parser().parse_args(argv)
    if args.all == (args.notebook is not None):
        print("error: give one NOTEBOOK or --all", file=sys.stderr)
        return 2
    if args.all and args.output:
        print("error: --output needs a single NOTEBOOK", file=sys.stderr)
        return 2
    parameters = {key: parse_scalar(value) for key, value in args.parameter}
    notebooks = list_notebooks() if args.all else [Path(args.notebook)]
    if not notebooks:
        print(f"[guirl.runner] no notebooks match notebooks/{NOTEBOOK_GLOB}; nothing to run")
        return 0
    try:  # validate every run before executing any
        plans = [
            plan_run(
                nb,
                args.profile,
                experiment=args.experiment,
                overrides=args.override,
                parameters=parameters,
                output_path=args.output,
            )
            for nb in notebooks
        ]
    except (ConfigError, RunnerError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        for plan in plans:
            print(f"# {_rel(plan.notebook)} -> {_rel(plan.output)}; parameters {plan.parameters}")
            print(plan.config.to_yaml(), end="")
        return 0
    total = time.perf_counter()
    for plan in plans:
        try:
            execute(plan, kernel_name=args.kernel, log_output=args.log_output)
        except RunnerError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except Exception as err:  # papermill.PapermillExecutionError and kernel failures
            if hasattr(err, "ename"):
                first = f"{err.ename}: {err.evalue} (cell {getattr(err, 'exec_count', '?')})"
            else:
                first = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
            print(
                f"error: {_rel(plan.notebook)} failed: {first}; the executed copy with the "
                f"traceback is {_rel(plan.output)}",
                file=sys.stderr,
            )
            return 1
    if len(plans) > 1:
        print(f"[guirl.runner] {len(plans)} notebooks: {time.perf_counter() - total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
