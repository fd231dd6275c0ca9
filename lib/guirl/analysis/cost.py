"""One cost model of a training or generation step: seconds as a polynomial in the prompt length.

``t(n) = c0 + c1 n + c2 n^2``: a fixed cost, a cost linear in the tokens (MLP, projections, the
vision tower) and a quadratic one (attention), fitted by least squares with every coefficient
``>= 0`` (a step cannot get cheaper with more tokens; plain least squares on a few noisy points
can bend a quadratic below zero). Notebook 02 fits it to the RL steps it measured (seconds per
generated sample against the mean prompt length) and notebook 05 to the forward + backward steps
it profiled; both read speedups off the same :class:`CostFit` (:func:`ceiling_speedup`: the
speedup the token counts alone predict).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CostFit", "fit_cost", "fit_cost_models", "ceiling_speedup"]


@dataclass(frozen=True)
class CostFit:
    """``t(n) = sum_k coef[k] n^k`` of seconds on tokens: ``degree`` (0 constant, 1 linear, 2
    quadratic), ``coef`` (s, s/token, s/token^2), ``r2`` (coefficient of determination on the
    points fitted) and ``n_points``."""

    degree: int
    coef: tuple[float, ...]
    r2: float
    n_points: int

    def predict(self, tokens: float | Sequence[float] | np.ndarray) -> np.ndarray | float:
        """Predicted seconds at ``tokens`` (a scalar gives a float)."""
        n = np.asarray(tokens, dtype=float)
        out = sum(c * n**k for k, c in enumerate(self.coef))
        return float(out) if n.ndim == 0 else np.asarray(out)

    @property
    def name(self) -> str:
        return {0: "constant", 1: "linear", 2: "quadratic"}.get(self.degree, f"degree-{self.degree}")


def fit_cost(
    tokens: Sequence[float], seconds: Sequence[float], degree: int = 2, *, nonnegative: bool = True
) -> CostFit:
    """Least-squares :class:`CostFit` of ``degree`` (needs ``degree + 1`` distinct token counts).

    ``nonnegative`` (default): every coefficient ``>= 0``, solved exactly by enumerating the
    supports (``2^(degree+1)`` small least-squares problems; the optimum is the unconstrained fit
    on its own support). ``False``: ordinary least squares."""
    n = np.asarray(tokens, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if n.shape != t.shape or n.ndim != 1:
        raise ValueError(f"tokens and seconds must be 1-D of equal length, got {n.shape} and {t.shape}")
    if degree < 0:
        raise ValueError(f"degree must be >= 0, got {degree}")
    distinct = len(np.unique(n))
    if distinct < degree + 1:
        raise ValueError(f"a degree-{degree} fit needs at least {degree + 1} distinct token counts, got {distinct}")
    scale = float(np.max(np.abs(n))) or 1.0  # condition the Vandermonde matrix
    design = np.vander(n / scale, degree + 1, increasing=True)
    if nonnegative:
        best, best_sse = np.zeros(degree + 1), float(np.sum(t**2))
        for k in range(1, degree + 2):
            for support in itertools.combinations(range(degree + 1), k):
                sol, *_ = np.linalg.lstsq(design[:, support], t, rcond=None)
                if np.any(sol < 0):
                    continue
                coef = np.zeros(degree + 1)
                coef[list(support)] = sol
                sse = float(np.sum((t - design @ coef) ** 2))
                if sse < best_sse * (1.0 - 1e-9):  # relative: ties keep the smaller support
                    best, best_sse = coef, sse
    else:
        best, *_ = np.linalg.lstsq(design, t, rcond=None)
        best_sse = float(np.sum((t - design @ best) ** 2))
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - best_sse / ss_tot if ss_tot > 0 else 1.0
    return CostFit(degree, tuple(float(c) / scale**k for k, c in enumerate(best)), r2, len(n))


def fit_cost_models(tokens: Sequence[float], seconds: Sequence[float]) -> dict[str, CostFit]:
    """``{"linear": ..., "quadratic": ...}``: both non-negative fits of the same points."""
    return {"linear": fit_cost(tokens, seconds, 1), "quadratic": fit_cost(tokens, seconds, 2)}


def ceiling_speedup(fit: CostFit, tokens_full: float, tokens_compressed: float) -> float:
    """``t(tokens_full) / t(tokens_compressed)`` under ``fit``: the speedup that the token ratio
    alone predicts (report measured speedup / ceiling)."""
    t_full, t_comp = fit.predict(tokens_full), fit.predict(tokens_compressed)
    if t_comp <= 0:
        raise ValueError(f"the fit predicts {t_comp:.3g} s at {tokens_compressed} tokens; cannot form a ratio")
    return float(t_full) / float(t_comp)
