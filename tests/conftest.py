"""Shared fixtures: every test writes runs/figures/data/cache under tmp folders.

``isolated_outputs`` is autouse: it points ``GUIRL_RUNS``, ``GUIRL_FIGURES`` and ``GUIRL_DATA``
at fresh tmp folders of each test, and ``GUIRL_CACHE`` at one tmp folder shared by the session
(rebuildable caches such as the tiny model are built once, outside the checkout). No test
writes into the checkout's runs/, figures/, data/ or .cache/. Subprocesses (the runner CLI,
papermill kernels) inherit the variables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]

# Under pytest-xdist (`make test`: 2 processes) each test process, and the notebook kernels and
# training subprocesses it starts, gets its share of the cores as torch's thread count: with torch's
# default (one thread per core) in each process, the cores are oversubscribed and OpenMP threads
# waiting at barriers lose their turns (notebook 03's smoke run: 283 s alone, over 900 s beside the
# other smoke chain). An OMP_NUM_THREADS already set wins.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if _WORKERS > 1 and "OMP_NUM_THREADS" not in os.environ:
    from guirl.train.launch import available_cores  # imports no torch: the variable is read at torch's import

    os.environ["OMP_NUM_THREADS"] = str(max(1, available_cores() // _WORKERS))

# CI (the CI variable is set) draws the same hypothesis examples on every run, so a CI result is
# reproducible; local runs keep exploring new examples. GUIRL_HYPOTHESIS_PROFILE overrides.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("GUIRL_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
OUTPUT_VARS = ("GUIRL_RUNS", "GUIRL_FIGURES", "GUIRL_DATA", "GUIRL_CACHE")


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``GUIRL_CACHE`` for the whole session."""
    return tmp_path_factory.mktemp("guirl-cache")


@pytest.fixture(autouse=True)
def isolated_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session_cache: Path) -> dict[str, Path]:
    """Output roots of one test: ``{"GUIRL_RUNS": <tmp>/outputs/runs, "GUIRL_FIGURES": ...,
    "GUIRL_DATA": ..., "GUIRL_CACHE": <session cache>}``."""
    roots = {}
    for var in OUTPUT_VARS:
        if var == "GUIRL_CACHE":
            folder = session_cache
        else:
            folder = tmp_path / "outputs" / var.removeprefix("GUIRL_").lower()
            folder.mkdir(parents=True)
        monkeypatch.setenv(var, str(folder))
        roots[var] = folder
    return roots


#: The longest modules, started first: the notebook smoke chains, then the paper-path chain.
LONG_MODULES = ("test_notebooks_smoke_", "test_notebooks_paper_path")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The notebook smoke chains (tests/test_notebooks_smoke_*.py) and the paper-path chain
    (tests/test_notebooks_paper_path.py) first, in their order: they are the longest modules, and
    ``make test`` (``--dist loadscope --no-loadscope-reorder``) hands modules to its processes in
    this order, so the chains start first, each on one process."""
    items.sort(key=lambda it: not it.path.name.startswith(LONG_MODULES))  # stable: order kept within each


@pytest.fixture(scope="module")
def smoke_roots(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The output folders of one notebook smoke chain (its module): ``{"GUIRL_RUNS": <tmp>/runs, ...}``."""
    base = tmp_path_factory.mktemp(f"notebook-smoke-{request.module.__name__.rsplit('_', 1)[-1]}")
    return {var: base / var.removeprefix("GUIRL_").lower() for var in OUTPUT_VARS}


@pytest.fixture(scope="module")
def smoke_state() -> dict[str, Any]:
    """What the earlier smoke runs of a chain leave for its later checks (e.g. the MiniGUI build of 00)."""
    return {}


@pytest.fixture(autouse=True)
def parser_errors_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    """An internal error of an action parser (anything but a reading failure) fails the test
    instead of becoming a parse failure (``guirl.actions.formats._base.RAISE_INTERNAL_ERRORS``)."""
    from guirl.actions.formats import _base

    monkeypatch.setattr(_base, "RAISE_INTERNAL_ERRORS", True)


def files_under(folder: Path) -> list[Path]:
    """Every file below ``folder`` (sorted), for "nothing was written" checks."""
    return sorted(p for p in folder.rglob("*") if p.is_file())


def written_outputs(roots: dict[str, Path]) -> list[Path]:
    """Files under the per-test runs/figures/data roots (the shared cache is not checked)."""
    return [f for var, root in roots.items() if var != "GUIRL_CACHE" for f in files_under(root)]


def make_notebook(
    path: Path, parameters_src: str, body: list[str], reads: list[str] | None = None, markdown: str | None = None
) -> Path:
    """Write a minimal nbformat-4 notebook: a ``parameters`` cell, then ``body`` code cells, with
    ``metadata.guirl.reads`` (default ``[]``) and optionally a markdown cell first."""
    cells = [
        {
            "cell_type": "code",
            "metadata": {"tags": ["parameters"]},
            "source": parameters_src,
            "outputs": [],
            "execution_count": None,
        }
    ]
    cells += [
        {"cell_type": "code", "metadata": {}, "source": src, "outputs": [], "execution_count": None} for src in body
    ]
    if markdown is not None:
        cells.insert(0, {"cell_type": "markdown", "metadata": {}, "source": markdown})
    nb = {
        "cells": cells,
        "metadata": {
            "guirl": {"reads": list(reads or [])},
            "kernelspec": {"name": "guirl", "display_name": "Python (guirl)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    for i, cell in enumerate(nb["cells"]):
        cell["id"] = f"cell-{i}"
    path.write_text(json.dumps(nb, indent=1))
    return path


def runner_env() -> dict[str, str]:
    """The environment for a ``python -m guirl.runner`` subprocess (inherits the tmp roots)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "lib") + os.pathsep + env.get("PYTHONPATH", "")
    return env


PYTHON = sys.executable


@pytest.fixture(scope="module")
def minigui(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small MiniGUI data set (8 tasks, seed 0) exported once per test module (the RL and SFT
    stage tests train on it)."""
    from guirl.env.export import build_minigui_dataset

    out = tmp_path_factory.mktemp("minigui")
    build_minigui_dataset(out, n_tasks=8, seed=0, progress=False)
    return out


def kill_after(cmd: list[str], marker: Path, timeout: float, what: str) -> None:
    """Start a training stage's command (``prepare_stage``) in its own process group, wait until
    ``marker`` (a checkpoint file) exists, then SIGKILL the group: the "killed midway" half of the
    resume tests. Fails if the stage ends first or ``timeout`` seconds pass; ``what`` names the
    checkpoint in the message."""
    import signal
    import subprocess
    import time

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while not marker.exists():
            assert proc.poll() is None, f"the stage ended before its {what}"
            assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_unlocked(lock: Any, timeout: float) -> None:
    """Wait until ``lock`` (a ``guirl.train.procs.FileLock``) can be taken, then let it go; fails
    after ``timeout`` seconds with the holder's message."""
    import time

    from guirl.train.procs import LockedError

    deadline = time.monotonic() + timeout
    while True:
        try:
            with lock:
                return
        except LockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def stage_of(
    cfg: Any,
    name: str,
    *,
    data_dir: Path,
    base_model: Path,
    output_dir: Path,
    entry: str | None = None,
    **inputs: Path,
) -> Any:
    """A :class:`guirl.train.launch.Stage` from keywords (``entry`` default: the SFT entry; more
    keywords are named inputs besides the data folder)."""
    from guirl.train.launch import SFT_ENTRY, Stage

    return Stage(
        name=name,
        entry=entry or SFT_ENTRY,
        cfg=cfg,
        inputs={"data": data_dir, **inputs},
        base_model=base_model,
        output_dir=output_dir,
    )


def stop_group(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session=True``), wait up to
    ``timeout`` seconds, then SIGKILL it."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def make_dry_run(*args: str) -> str:
    """What ``make -n ARGS`` would run in the repository (setup assumed done)."""
    return subprocess.run(
        ["make", "-n", "-o", "setup", "-o", ".stamps/setup", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
