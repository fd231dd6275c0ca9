"""guirl.analysis.cost: the one cost model (non-negative polynomial fit of step seconds on prompt
tokens) that notebooks 02 and 05 both fit, its ceiling speedup, and its ordinary least-squares
variant."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from guirl.analysis import cost as C


@pytest.mark.parametrize(
    "coef",
    [
        (0.05, 2e-4, 0.0),  # linear cost (matmuls only)
        (0.05, 2e-4, 3e-8),  # plus an attention-like quadratic term
        (0.0, 1e-3, 1e-7),  # no fixed overhead
    ],
)
def test_quadratic_fit_recovers_known_coefficients(coef) -> None:
    n = np.array([100, 300, 600, 1000, 1500, 2200, 3000], dtype=float)
    rng = np.random.default_rng(0)
    t = coef[0] + coef[1] * n + coef[2] * n**2
    noisy = t * (1 + 1e-4 * rng.standard_normal(len(n)))
    fits = C.fit_cost_models(n, noisy)
    q = fits["quadratic"]
    assert q.degree == 2 and q.name == "quadratic" and q.n_points == len(n)
    assert q.coef[1] == pytest.approx(coef[1], rel=2e-2)
    assert q.coef[2] == pytest.approx(coef[2], abs=2e-9)
    assert q.r2 > 0.9999 and q.predict(1234.0) == pytest.approx(float(np.polyval(coef[::-1], 1234.0)), rel=1e-3)
    if coef[2] == 0.0:  # the linear model fits linear data as well
        assert fits["linear"].coef == pytest.approx(coef[:2], rel=2e-2, abs=1e-3)


@given(
    c0=st.floats(0.0, 1.0),
    c1=st.floats(1e-5, 1e-2),
    full=st.integers(200, 5000),
    ratio=st.floats(0.1, 1.0),
)
def test_ceiling_is_the_cost_ratio_under_the_fit(c0: float, c1: float, full: int, ratio: float) -> None:
    fit = C.CostFit(1, (c0, c1), 1.0, 2)
    comp = full * ratio
    assert C.ceiling_speedup(fit, full, comp) == pytest.approx((c0 + c1 * full) / (c0 + c1 * comp))
    if c0 == 0.0:  # no overhead: the ceiling is the token ratio itself
        assert C.ceiling_speedup(fit, full, comp) == pytest.approx(1 / ratio)


def test_fit_refuses_too_few_points() -> None:
    with pytest.raises(ValueError, match="at least 3 distinct token counts"):
        C.fit_cost([100, 100, 200], [1.0, 1.1, 2.0], degree=2)
    with pytest.raises(ValueError, match="equal length"):
        C.fit_cost([1, 2, 3], [1.0, 2.0])


@pytest.mark.parametrize(
    "tokens, seconds, degree, coef",
    [
        ([100, 200, 300], [1.5, 2.5, 3.5], 1, (0.5, 0.01)),  # exact line: the OLS solution is non-negative
        ([100, 200, 300], [1.0, 2.0, 3.0], 2, (0.0, 0.01, 0.0)),  # through the origin, no curvature
        ([100, 200, 300, 400], [3.0, 2.0, 2.0, 3.0], 1, (2.5, 0.0)),  # OLS slope 0, fine; intercept the mean
        ([100, 200, 300, 400], [1.0, 3.0, 3.5, 3.6], 2, None),  # concave data: OLS c2 < 0, NNLS clamps it
    ],
)
def test_fit_cost_is_nonnegative(tokens, seconds, degree, coef) -> None:
    f = C.fit_cost(tokens, seconds, degree)
    assert all(c >= 0 for c in f.coef) and f.degree == degree
    if coef is not None:
        assert np.allclose(f.coef, coef, atol=1e-9)
    else:
        assert f.coef[2] == 0.0 and f.predict(0.0) > 0  # the fit never predicts a negative step time
    with pytest.raises(ValueError, match="distinct token counts"):
        C.fit_cost([100, 100, 200], [1.0, 1.0, 2.0], 2)


@given(
    coef=st.tuples(st.floats(0.0, 2.0), st.floats(0.0, 1e-2), st.floats(0.0, 1e-6)),
    n=st.lists(st.integers(50, 4000), min_size=4, max_size=9, unique=True),
)
def test_nonnegative_fit_equals_least_squares_when_that_is_nonnegative(coef, n) -> None:
    # exact polynomial data with coefficients >= 0: both fits find the generating polynomial
    x = np.array(sorted(n), dtype=float)
    t = coef[0] + coef[1] * x + coef[2] * x**2
    ols, nn = C.fit_cost(x, t, 2, nonnegative=False), C.fit_cost(x, t, 2)
    assert np.allclose(nn.predict(x), t, rtol=1e-6, atol=1e-9)
    assert np.allclose(nn.predict(x), ols.predict(x), rtol=1e-6, atol=1e-9)


def test_constant_fit_is_the_mean() -> None:
    f = C.fit_cost([120, 120, 120], [1.0, 2.0, 3.0], 0)
    assert f.degree == 0 and f.name == "constant" and f.coef == pytest.approx((2.0,))
