"""Percentile bootstrap confidence intervals for rates and means (vectorised numpy).

For ``n`` per-item values ``v`` (0/1 for a rate), draw ``n_boot`` resamples of size ``n``
with replacement (one ``(n_boot, n)`` index matrix from ``numpy.random.default_rng(seed)``),
take each resample's mean, and report the ``alpha/2`` and ``1 - alpha/2`` quantiles
(``numpy.quantile``, linear interpolation) of those means (Efron & Tibshirani 1993,
Ch. 13). Deterministic for a given seed.

Documented edge cases:

* ``n == 0`` -> ``(nan, nan, nan)``.
* ``n == 1`` or all values equal -> ``(v, v, v)`` (every resample has the same mean).
* The percentile interval is widened, if needed, to contain the point estimate
  (``lo <= mean <= hi`` always holds); for the usual alpha this never changes anything.
* Non-finite values raise ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _as_values(values: Sequence[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(v)):
        raise ValueError("bootstrap values must be finite (got nan or inf); drop or impute them first")
    return v


def bootstrap_means(values: Sequence[float] | np.ndarray, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """Means of ``n_boot`` resamples with replacement, shape ``(n_boot,)``.

    Raises ``ValueError`` for no values or ``n_boot < 1``.
    """
    v = _as_values(values)
    if v.size == 0:
        raise ValueError("bootstrap_means needs at least one value")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, v.size, size=(n_boot, v.size))
    return v[idx].mean(axis=1)


def mean_with_ci(
    values: Sequence[float] | np.ndarray, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: sample mean and its ``1 - alpha`` percentile bootstrap interval."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    v = _as_values(values)
    if v.size == 0:
        nan = float("nan")
        return nan, nan, nan
    m = float(v.mean())
    if np.all(v == v[0]):
        return m, m, m
    means = bootstrap_means(v, n_boot=n_boot, seed=seed)
    lo, hi = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return m, float(min(lo, m)), float(max(hi, m))


def rate_with_ci(
    values: Sequence[bool] | Sequence[float] | np.ndarray, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """``(rate, lo, hi)`` for 0/1 outcomes (booleans accepted); all three lie in ``[0, 1]``.

    Raises ``ValueError`` when a value is not 0 or 1.
    """
    v = _as_values(values)
    if v.size and not np.all((v == 0.0) | (v == 1.0)):
        raise ValueError("rate_with_ci takes 0/1 (or bool) values; use mean_with_ci for other values")
    return mean_with_ci(v, n_boot=n_boot, alpha=alpha, seed=seed)
