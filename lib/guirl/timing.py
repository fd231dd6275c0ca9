"""Where a notebook's wall-clock time goes: phases by category, written by every process of a run.

Code marks what it is doing with :func:`phase` (a context manager)::

    with timing.phase("generation", "eval"):
        ids = model.generate(...)

Phases nest; time is charged to the innermost open phase only (exclusive time), per thread, to the
pair ``(category, label)``. :data:`CATEGORIES` lists the categories. Time in no phase is not
recorded here: the runner counts a notebook's unattributed time as ``other``.

When the environment names a folder (:data:`DIR_ENV`, which :mod:`guirl.runner` sets for the
notebook's kernel; training subprocesses inherit it), each process writes what it measured to
``<folder>/<label>-<pid>.json`` (:func:`flush`: after every outermost phase and at exit; written to a
temporary name and renamed). :func:`read_folder` reads them back and :func:`breakdown` sums them into
one notebook's breakdown (``runs/<profile>/<notebook>.timing.json``); :mod:`guirl.breakdown` prints
the top items of a whole ``make reproduce``.

A training stage started as a subprocess gets the launch time in :data:`LAUNCHED_ENV`; its entry calls
:func:`launched`, which charges the time from the launch to that moment (the launcher, the
interpreter, the imports) to ``startup``. The caller's own wait for the subprocess is the category
``wait``: it is left out of the sums (the subprocess's own phases count instead), so stages trained
side by side each count their seconds.

Only the standard library is used; a phase costs two ``perf_counter`` calls.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "CATEGORIES",
    "DIR_ENV",
    "LABEL_ENV",
    "LAUNCHED_ENV",
    "WAIT",
    "breakdown",
    "flush",
    "launched",
    "phase",
    "read_folder",
    "reset",
    "set_label",
    "snapshot",
    "timed",
]

#: The categories of :func:`phase` and what each covers.
CATEGORIES: dict[str, str] = {
    "startup": "a training stage's start-up: launcher, interpreter, imports, trainer construction",
    "io": "loading and saving models, processors, checkpoints and result files",
    "data": "building training records, datasets and task pools",
    "images": "reading screenshots, resizing, the image processor (prompts, training batches)",
    "training": "optimizer steps: forward, backward, update (SFT; RL updates with reference / old log-probs)",
    "generation": "model.generate in evaluation and rollouts (prefill + decoding, token decoding)",
    "scoring": "parsing and scoring predictions, rewards, metrics",
    "env": "MiniGUI simulation and rendering",
    "profiling": "timed model steps that a notebook measures on purpose (05's sweeps)",
}
#: The caller's wait for a training subprocess (left out of the sums; the subprocess reports its own).
WAIT = "wait"
#: Environment variable naming the folder every process writes its phases to.
DIR_ENV = "GUIRL_TIMING_DIR"
#: Environment variable holding the ``time.time()`` at which a training subprocess was launched.
LAUNCHED_ENV = "GUIRL_TIMING_LAUNCHED"

_lock = threading.Lock()
_local = threading.local()
_totals: dict[tuple[str, str], float] = {}
_counts: dict[tuple[str, str], int] = {}
_main_accounted = 0.0
#: Environment variable naming the processes that inherit it (the runner sets ``kernel``).
LABEL_ENV = "GUIRL_TIMING_LABEL"
_label = os.environ.get(LABEL_ENV, "process")
_started = time.time()
_clock = time.perf_counter  # the phase clock (a test replaces it)


def _stack() -> list[list[Any]]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _charge(key: tuple[str, str], seconds: float) -> None:
    with _lock:
        _totals[key] = _totals.get(key, 0.0) + seconds


@contextlib.contextmanager
def phase(category: str, label: str = "") -> Iterator[None]:
    """Charge the time inside the block to ``(category, label)``, less the time of phases opened
    inside it (they are charged to their own). ``category``: one of :data:`CATEGORIES` or
    :data:`WAIT`; ``label``: a short free name (a stage, a model), ``""`` for none."""
    if category not in CATEGORIES and category != WAIT:
        raise ValueError(f"timing.phase: unknown category {category!r}; known: {', '.join(CATEGORIES)}, {WAIT}")
    stack = _stack()
    now = _clock()
    if stack:  # the enclosing phase's own time ends here
        top = stack[-1]
        _charge(top[0], now - top[1])
    key = (category, label)
    stack.append([key, now, now])
    try:
        yield
    finally:
        end = _clock()
        _, since, opened = stack.pop()
        _charge(key, end - since)
        with _lock:
            _counts[key] = _counts.get(key, 0) + 1
        if stack:
            stack[-1][1] = end  # the enclosing phase resumes
        else:
            if threading.current_thread() is threading.main_thread():
                global _main_accounted
                with _lock:
                    _main_accounted += end - opened
            flush()


def timed(category: str, label: str = "") -> Callable[[F], F]:
    """A decorator charging every call of the function to ``(category, label)`` (:func:`phase`)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            with phase(category, label):
                return fn(*args, **kwargs)

        return inner  # type: ignore[return-value]

    return wrap


def set_label(label: str) -> None:
    """Name this process in its file (e.g. ``kernel``, ``stage-sft``)."""
    global _label
    _label = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:80] or "process"


def launched(label: str | None = None) -> float:
    """In a training subprocess: charge the time since its launch (:data:`LAUNCHED_ENV`) to
    ``startup`` and return it (0.0 when the variable is not set). ``label`` names the process."""
    if label is not None:
        set_label(label)
    value = os.environ.get(LAUNCHED_ENV)
    if not value:
        return 0.0
    seconds = max(0.0, time.time() - float(value))
    _charge(("startup", "launch"), seconds)
    with _lock:
        _counts[("startup", "launch")] = _counts.get(("startup", "launch"), 0) + 1
        global _main_accounted
        _main_accounted += seconds
    return seconds


def snapshot() -> dict[str, Any]:
    """What this process measured so far: ``{"label", "pid", "wall_s", "accounted_s", "items":
    [{"category", "label", "seconds", "count"}, ...]}`` (``accounted_s``: the main thread's time in
    phases; ``wall_s``: since this module was imported, or since launch in a subprocess)."""
    launched_at = os.environ.get(LAUNCHED_ENV)
    start = float(launched_at) if launched_at else _started
    with _lock:
        items = [
            {"category": c, "label": lab, "seconds": round(s, 4), "count": _counts.get((c, lab), 0)}
            for (c, lab), s in sorted(_totals.items())
        ]
        accounted = _main_accounted
    return {
        "label": _label,
        "pid": os.getpid(),
        "wall_s": round(time.time() - start, 3),
        "accounted_s": round(accounted, 3),
        "items": items,
    }


def flush() -> Path | None:
    """Write :func:`snapshot` to ``<DIR_ENV folder>/<label>-<pid>.json``; ``None`` when the
    variable is unset. Never raises (a timing file must not fail a run)."""
    folder = os.environ.get(DIR_ENV)
    if not folder:
        return None
    try:
        path = Path(folder) / f"{_label}-{os.getpid()}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(snapshot()))
        tmp.replace(path)
        return path
    except OSError:
        return None


def reset() -> None:
    """Forget everything measured in this process (tests; the runner's own process)."""
    global _main_accounted, _started
    with _lock:
        _totals.clear()
        _counts.clear()
        _main_accounted = 0.0
        _started = time.time()


atexit.register(flush)


# ---------------------------------------------------------------------------------- reading back
def read_folder(folder: str | Path) -> list[dict[str, Any]]:
    """The process files of a timing folder (:func:`flush`), sorted by label and pid; a file
    that does not parse is skipped (a process killed while writing leaves a ``.tmp`` only)."""
    out = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "items" in data:
            out.append(data)
    return sorted(out, key=lambda d: (str(d.get("label")), int(d.get("pid", 0))))


def breakdown(processes: list[Mapping[str, Any]], wall_s: float, kernel_label: str = "kernel") -> dict[str, Any]:
    """One notebook's breakdown from its processes' files.

    ``categories``: seconds per category summed over the processes, :data:`WAIT` left out, plus
    ``other``: the notebook's ``wall_s`` less the kernel's (``kernel_label``) time in phases (kernel
    start-up, notebook code in no phase: tables, bootstraps, plots). Stages trained side by side each
    count, so the sum can exceed ``wall_s``; ``sum_s`` says by how much. ``items``: every
    ``(category, label)`` with its seconds, summed over processes, largest first. ``processes``: per
    process its label, wall time and seconds per category."""
    cats: dict[str, float] = {}
    items: dict[tuple[str, str], list[float]] = {}
    procs = []
    kernel_accounted = 0.0
    for p in processes:
        mine: dict[str, float] = {}
        for it in p.get("items", []):
            c, lab, s = str(it["category"]), str(it.get("label", "")), float(it["seconds"])
            acc = items.setdefault((c, lab), [0.0, 0])
            acc[0] += s
            acc[1] += int(it.get("count", 0))
            if c != WAIT:
                mine[c] = mine.get(c, 0.0) + s
                cats[c] = cats.get(c, 0.0) + s
        if p.get("label") == kernel_label:
            kernel_accounted += float(p.get("accounted_s", 0.0))
        procs.append(
            {
                "label": p.get("label"),
                "pid": p.get("pid"),
                "wall_s": p.get("wall_s"),
                "categories": {k: round(v, 2) for k, v in sorted(mine.items(), key=lambda kv: -kv[1])},
            }
        )
    cats["other"] = max(0.0, wall_s - kernel_accounted)
    order = [*CATEGORIES, "other"]
    return {
        "wall_s": round(wall_s, 2),
        "sum_s": round(sum(cats.values()), 2),
        "categories": {k: round(cats[k], 2) for k in order if k in cats},
        "items": [
            {"category": c, "label": lab, "seconds": round(s, 2), "count": int(n)}
            for (c, lab), (s, n) in sorted(items.items(), key=lambda kv: -kv[1][0])
            if c != WAIT
        ],
        "processes": procs,
    }
