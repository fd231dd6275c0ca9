"""CES's cross-data-set evaluation (CES Sec. 5.1, App. B.1, Table 1).

CES trains its Coordinator and State Tracker on GUI-Odyssey alone (App. B.1: 1K warm-up samples
and a 3K task pool from GUI-Odyssey's training set) and reports Type / GR / SR on three long-horizon
benchmarks: AITZ, AMEX and GUI-Odyssey (Table 1; Tables 2-3 on AMEX and GUI-Odyssey). The run's
own data set (``data.source: guiodyssey``) gives the GUI-Odyssey columns; :func:`benchmark_splits`
adds the test splits of the other benchmarks, each converted for the same profile by notebook 00
(``make nb-00_data_prep ARGS='--experiment aitz'``: AITZ's official ``test`` folder; AMEX ships no
split and is ``test`` whole, :mod:`guirl.data.loaders._splits`). Their splits are named
``<source>/<split>`` (``aitz/test``, ``amex/test``) so that the table layouts give each benchmark
its own columns; none of their episodes is trained on (training reads the run's ``train`` split).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from guirl.data.splits import Split, is_test_split, load_splits

__all__ = ["TRAIN_SOURCE", "CROSS_SOURCES", "benchmark_splits", "check_train_source"]

#: CES App. B.1: the data set both roles are trained on.
TRAIN_SOURCE = "guiodyssey"
#: CES Table 1: the benchmarks evaluated beside GUI-Odyssey (Tables 2-3: AMEX).
CROSS_SOURCES: tuple[str, ...] = ("aitz", "amex")


def check_train_source(source: str) -> None:
    """Raise a ``ValueError`` with the fix when the run trains on another data set than CES's
    (App. B.1: GUI-Odyssey), since the cross-data-set columns then do not measure CES's setting."""
    if source != TRAIN_SOURCE:
        raise ValueError(
            f"CES trains on {TRAIN_SOURCE} (App. B.1) and tests on {', '.join(CROSS_SOURCES)} (Table 1); this run's "
            f"data.source is {source!r}: run it with --experiment {TRAIN_SOURCE}"
        )


def benchmark_splits(data_root: str | Path, sources: Sequence[str] = CROSS_SOURCES) -> dict[str, Split]:
    """The test splits (every split but ``train`` and ``validation``) of each converted data set
    ``data_root/<source>`` (``guirl.paths.data_dir(profile)`` is the run's ``data_root``), named
    ``<source>/<split>``, in ``sources`` order. A data set that has not been converted is a
    ``FileNotFoundError`` naming the folder and the command that converts it."""
    out: dict[str, Split] = {}
    for source in sources:
        folder = Path(data_root) / source
        if not (folder / "episodes.jsonl").is_file():
            raise FileNotFoundError(
                f"{folder}/episodes.jsonl: {source} has not been converted for this profile; run "
                f"make nb-00_data_prep ARGS='--experiment {source}' (data.path: the local copy of {source})"
            )
        for name, sp in load_splits(folder).items():
            if is_test_split(name):
                out[f"{source}/{name}"] = replace(sp, name=f"{source}/{name}")
    return out
