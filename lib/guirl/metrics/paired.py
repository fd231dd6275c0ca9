"""Paired comparisons of two models over seeds and test steps, and the "resolved" mark.

Two models A and B are compared *paired*: both are scored on the same test steps with the
same training seeds, giving two ``(n_seeds, n_steps)`` matrices of per-step outcomes
(0/1 for step success, any finite value for a per-step metric). The difference is

    d = mean(B) - mean(A)                                  (points of the metric, B minus A)

and its ``1 - alpha`` interval comes from a two-way percentile bootstrap that resamples the
seeds (rows) and the test steps (columns) with replacement, **the same indices for A and B**
(pairing), so that both the seed-to-seed spread and the finite test set enter the interval
(the "interval over seeds and test steps" the project reports). With one seed the interval
is over steps only.

A difference is **resolved** only when its interval excludes zero (``lo > 0`` or ``hi < 0``);
conclusions are worded from :func:`resolution` ("B > A", "B < A", "unresolved"), never from
the point estimate. :func:`check_resolved_claims` rejects a table whose ``resolved`` column
claims otherwise; :meth:`guirl.report.Report.table` calls it on every table it writes.

Documented edge cases: identical matrices give ``(0, 0, 0)`` (unresolved); a single seed and
a single step give the point difference as both bounds; non-finite values and mismatched
shapes raise ``ValueError`` naming the argument.

Is a seed-to-seed spread more than the test steps give? :func:`seed_spread_test` asks it of
one model's ``(n_seeds, n_steps)`` matrix with a permutation test: under the null hypothesis
that the training seeds are equally good, the outcomes of each test step are exchangeable
between seeds, so shuffling every column independently draws the seed standard deviation that
a finite test set alone would show.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "PairedDifference",
    "ResolvedClaimError",
    "SeedSpreadTest",
    "check_resolved_claims",
    "difference_row",
    "paired_bootstrap_loop",
    "paired_difference",
    "paired_matrix",
    "resolution",
    "seed_spread_loop",
    "seed_spread_test",
]


@dataclass(frozen=True)
class PairedDifference:
    """``diff = mean(B) - mean(A)`` with its percentile interval ``[lo, hi]`` (same units as the
    inputs; multiply by 100 for points of a rate), ``n_seeds`` x ``n_steps`` paired outcomes."""

    diff: float
    lo: float
    hi: float
    n_seeds: int
    n_steps: int

    @property
    def resolved(self) -> bool:
        """True when the interval excludes zero."""
        return bool(self.lo > 0.0 or self.hi < 0.0)

    @property
    def verdict(self) -> str:
        """``"B > A"``, ``"B < A"`` or ``"unresolved"`` (:func:`resolution`)."""
        return resolution(self.lo, self.hi)


def resolution(lo: float, hi: float) -> str:
    """Word a difference ``B - A`` from its interval: ``"B > A"`` when ``lo > 0``, ``"B < A"``
    when ``hi < 0``, else ``"unresolved"`` (also for ``nan`` bounds)."""
    if lo > 0.0:
        return "B > A"
    if hi < 0.0:
        return "B < A"
    return "unresolved"


def _matrix(x: Sequence[Sequence[float]] | np.ndarray, name: str) -> np.ndarray:
    m = np.asarray(x, dtype=np.float64)
    if m.ndim == 1:
        m = m[None, :]
    if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0:
        raise ValueError(f"{name}: expected a non-empty (n_seeds, n_steps) matrix, got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{name}: values must be finite (got nan or inf)")
    return m


def _check_pair(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    ma, mb = _matrix(a, "a"), _matrix(b, "b")
    if ma.shape != mb.shape:
        raise ValueError(f"a and b must be paired (same seeds x same steps): shapes {ma.shape} and {mb.shape} differ")
    return ma, mb


def _indices(n_seeds: int, n_steps: int, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
    cols = rng.integers(0, n_steps, size=(n_boot, n_steps))
    return rows, cols


def _cells(a: Any, b: Any, n_boot: int, alpha: float) -> np.ndarray:
    """Validated per-cell differences ``b - a``, shape ``(n_seeds, n_steps)``."""
    ma, mb = _check_pair(a, b)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return mb - ma


def _result(d: np.ndarray, means: np.ndarray | None, alpha: float) -> PairedDifference:
    """The point difference and the percentile interval of the resample ``means`` (``None``:
    every cell equal, a zero-width interval), widened to contain the point."""
    point = float(d.mean())
    s, t = d.shape
    if means is None:
        return PairedDifference(point, point, point, s, t)
    lo, hi = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return PairedDifference(point, float(min(lo, point)), float(max(hi, point)), s, t)


def paired_difference(
    a: Sequence[Sequence[float]] | np.ndarray,
    b: Sequence[Sequence[float]] | np.ndarray,
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> PairedDifference:
    """``mean(b) - mean(a)`` with a two-way (seeds x steps) paired percentile bootstrap interval.

    ``a``, ``b``: per-step outcomes, shape ``(n_seeds, n_steps)`` (a 1-D array is one seed);
    row ``i`` / column ``j`` of both must be the same training seed / test step. Each of the
    ``n_boot`` resamples draws ``n_seeds`` rows and ``n_steps`` columns with replacement
    (vectorised; equals :func:`paired_bootstrap_loop`). The interval is widened, if needed, to
    contain the point difference. Deterministic in ``seed``.
    """
    d = _cells(a, b, n_boot, alpha)
    if np.all(d == d.flat[0]):
        return _result(d, None, alpha)
    rows, cols = _indices(*d.shape, n_boot, seed)
    sub = d[rows[:, :, None], cols[:, None, :]]  # (n_boot, S, T): the resampled grid of each draw
    return _result(d, sub.mean(axis=(1, 2)), alpha)


def paired_bootstrap_loop(
    a: Sequence[Sequence[float]] | np.ndarray,
    b: Sequence[Sequence[float]] | np.ndarray,
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> PairedDifference:
    """Reference loop implementation of :func:`paired_difference` (same random indices, one
    resample at a time); used by the tests to pin the vectorised version."""
    d = _cells(a, b, n_boot, alpha)
    if np.all(d == d.flat[0]):
        return _result(d, None, alpha)
    s, t = d.shape
    rows, cols = _indices(s, t, n_boot, seed)
    means = []
    for k in range(n_boot):
        total = 0.0
        for i in rows[k]:
            for j in cols[k]:
                total += d[i, j]
        means.append(total / (s * t))
    return _result(d, np.asarray(means), alpha)


def paired_matrix(
    records: Sequence[dict[str, Any]],
    *,
    value: str = "exact",
    seed_key: str = "seed",
    step_keys: tuple[str, ...] = ("split", "episode_id", "step_id"),
    name: str = "records",
) -> tuple[np.ndarray, list[Any], list[tuple[Any, ...]]]:
    """``(matrix, seeds, steps)``: prediction records (:mod:`guirl.metrics.records`) of one
    model as a ``(n_seeds, n_steps)`` matrix of ``value`` (booleans as 0/1), rows in sorted
    seed order, columns in sorted step-key order.

    Raises ``ValueError`` naming ``name`` and the record when a key is missing, a (seed, step)
    cell appears twice, or some seed lacks a step another seed has (the comparison would not be
    paired).
    """
    cells: dict[tuple[Any, tuple[Any, ...]], float] = {}
    for i, r in enumerate(records):
        missing = [k for k in (seed_key, *step_keys, value) if k not in r]
        if missing:
            raise ValueError(f"{name}[{i}]: missing key(s) {missing}")
        key = (r[seed_key], tuple(r[k] for k in step_keys))
        if key in cells:
            raise ValueError(f"{name}[{i}]: duplicate cell seed={key[0]!r} step={key[1]!r}")
        cells[key] = float(r[value])
    seeds = sorted({k[0] for k in cells})
    steps = sorted({k[1] for k in cells})
    m = np.full((len(seeds), len(steps)), np.nan)
    si = {s: i for i, s in enumerate(seeds)}
    ti = {t: j for j, t in enumerate(steps)}
    for (s, t), v in cells.items():
        m[si[s], ti[t]] = v
    if np.isnan(m).any():
        i, j = np.argwhere(np.isnan(m))[0]
        raise ValueError(f"{name}: seed {seeds[i]!r} has no record for step {steps[j]!r}; every seed needs every step")
    return m, seeds, steps


class ResolvedClaimError(ValueError):
    """A table marks a difference resolved (or unresolved) against its own interval."""


def check_resolved_claims(df: pd.DataFrame, *, table: str = "table") -> None:
    """Raise :class:`ResolvedClaimError` when a table's "resolved" mark disagrees with its interval.

    Every column whose name ends in ``resolved`` (``resolved``, ``SR resolved``, ``sr_resolved``)
    is a claim; its interval is the columns with the same prefix and ``lo`` / ``hi`` in place of
    ``resolved`` (``lo``/``hi``, ``SR lo``/``SR hi``, ``sr_lo``/``sr_hi``). A claim column without
    both bounds is an error (a difference is never marked without its interval), and every row
    must have ``resolved == (lo > 0 or hi < 0)``. The error names the table, the column, the row
    and its interval. Tables without a ``resolved`` column pass.
    """
    for col in [c for c in df.columns if isinstance(c, str) and c.endswith("resolved")]:
        prefix = col[: -len("resolved")]
        lo, hi = f"{prefix}lo", f"{prefix}hi"
        missing = [c for c in (lo, hi) if c not in df.columns]
        if missing:
            raise ResolvedClaimError(f"{table}: column {col!r} marks differences but the table has no {missing}")
        for idx, row in df.iterrows():
            want = bool(row[lo] > 0.0 or row[hi] < 0.0)
            if bool(row[col]) != want:
                raise ResolvedClaimError(
                    f"{table}: row {idx!r} says {col}={bool(row[col])} but its interval "
                    f"[{row[lo]}, {row[hi]}] {'excludes' if want else 'includes'} zero"
                )


def difference_row(d: PairedDifference, *, scale: float = 100.0, prefix: str = "") -> dict[str, Any]:
    """Table cells for one paired difference: ``<prefix>diff``, ``<prefix>lo``, ``<prefix>hi``
    (times ``scale``: points for a rate), ``<prefix>resolved`` and ``<prefix>verdict``, plus the
    ``n_seeds`` / ``n_steps`` it rests on; :func:`check_resolved_claims` accepts it by construction."""
    return {
        f"{prefix}diff": scale * d.diff,
        f"{prefix}lo": scale * d.lo,
        f"{prefix}hi": scale * d.hi,
        f"{prefix}resolved": d.resolved,
        f"{prefix}verdict": d.verdict,
        "n_seeds": d.n_seeds,
        "n_steps": d.n_steps,
    }


@dataclass(frozen=True)
class SeedSpreadTest:
    """A seed-to-seed spread against the spread of test-step noise alone (:func:`seed_spread_test`).

    ``std``: the sample standard deviation (``ddof=1``) of the per-seed means of the matrix
    (the inputs' units; times 100 for points of a rate). ``null_mean`` / ``null_hi``: the mean and
    the ``1 - alpha`` quantile of that std over the permutation draws (what the test steps alone
    give when the seeds are equally good). ``p_value``: ``(1 + #{draws with std >= std}) / (1 +
    n_perm)``, never 0. ``real`` is ``p_value < alpha``: the seeds differ by more than the steps
    explain. With one seed every field but the counts is ``nan`` and ``real`` is False."""

    std: float
    null_mean: float
    null_hi: float
    p_value: float
    alpha: float
    n_perm: int
    n_seeds: int
    n_steps: int

    @property
    def real(self) -> bool:
        """True when the spread is above the permutation null at level ``alpha``."""
        return bool(self.p_value < self.alpha)


def _seed_std(means: np.ndarray) -> np.ndarray:
    """Sample std (``ddof=1``) over the last axis of per-seed means, shape ``(..., n_seeds)``."""
    return np.std(means, axis=-1, ddof=1)


def _spread_perms(n_seeds: int, n_steps: int, n_perm: int, seed: int) -> np.ndarray:
    """Row orders of every column in every draw, shape ``(n_perm, n_seeds, n_steps)``: column
    ``j`` of draw ``k`` takes its seeds in the order ``perms[k, :, j]`` (a uniform permutation)."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((n_perm, n_seeds, n_steps)), axis=1, kind="stable")


def _spread_result(m: np.ndarray, null: np.ndarray | None, alpha: float, n_perm: int) -> SeedSpreadTest:
    s, t = m.shape
    if null is None:
        nan = math.nan
        return SeedSpreadTest(nan, nan, nan, nan, alpha, n_perm, s, t)
    observed = float(_seed_std(m.mean(axis=1)))
    tol = 1e-12 * max(1.0, abs(observed))  # a draw equal to the observed spread counts as "as large"
    p = (1.0 + float(np.sum(null >= observed - tol))) / (1.0 + n_perm)
    return SeedSpreadTest(observed, float(null.mean()), float(np.quantile(null, 1.0 - alpha)), p, alpha, n_perm, s, t)


def _spread_args(m: Any, n_perm: int, alpha: float) -> np.ndarray:
    mm = _matrix(m, "m")
    if n_perm < 1:
        raise ValueError(f"n_perm must be >= 1, got {n_perm}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return mm


def seed_spread_test(
    m: Sequence[Sequence[float]] | np.ndarray,
    *,
    n_perm: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
    chunk: int = 256,
) -> SeedSpreadTest:
    """Is the seed-to-seed std of one model more than its test steps give? A permutation test.

    ``m``: per-step outcomes, shape ``(n_seeds, n_steps)`` (row = training seed, column = test
    step, the same steps for every seed; :func:`paired_matrix`). Each of the ``n_perm`` draws
    shuffles every column independently across the seeds (the null: at each step the seeds'
    outcomes are exchangeable) and takes the std (``ddof=1``) of the per-seed means; the p-value
    is the share of draws at least as spread as ``m`` (add-one, so never 0). Vectorised over
    draws in blocks of ``chunk`` (memory ``chunk * n_seeds * n_steps`` floats); equals
    :func:`seed_spread_loop`. Deterministic in ``seed``. A matrix whose columns are each constant
    has std 0 in every draw and ``p_value`` 1."""
    mm = _spread_args(m, n_perm, alpha)
    s, t = mm.shape
    if s < 2:
        return _spread_result(mm, None, alpha, n_perm)
    perms = _spread_perms(s, t, n_perm, seed)
    null = np.empty(n_perm)
    for start in range(0, n_perm, max(1, int(chunk))):
        block = perms[start : start + max(1, int(chunk))]
        shuffled = np.take_along_axis(np.broadcast_to(mm, (len(block), s, t)), block, axis=1)
        null[start : start + len(block)] = _seed_std(shuffled.mean(axis=2))
    return _spread_result(mm, null, alpha, n_perm)


def seed_spread_loop(
    m: Sequence[Sequence[float]] | np.ndarray, *, n_perm: int = 2000, alpha: float = 0.05, seed: int = 0
) -> SeedSpreadTest:
    """Reference loop implementation of :func:`seed_spread_test` (the same permutations, one
    draw, seed and step at a time); used by the tests to pin the vectorised version."""
    mm = _spread_args(m, n_perm, alpha)
    s, t = mm.shape
    if s < 2:
        return _spread_result(mm, None, alpha, n_perm)
    perms = _spread_perms(s, t, n_perm, seed)
    null = []
    for k in range(n_perm):
        means = []
        for i in range(s):
            means.append(sum(mm[perms[k, i, j], j] for j in range(t)) / t)
        mu = sum(means) / s
        null.append(math.sqrt(sum((x - mu) ** 2 for x in means) / (s - 1)))
    return _spread_result(mm, np.asarray(null), alpha, n_perm)
