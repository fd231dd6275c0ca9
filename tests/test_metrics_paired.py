"""Tests for guirl.metrics.paired: paired two-way bootstrap differences and the "resolved" mark."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guirl.metrics.paired import (
    PairedDifference,
    ResolvedClaimError,
    SeedSpreadTest,
    check_resolved_claims,
    difference_row,
    paired_bootstrap_loop,
    paired_difference,
    paired_matrix,
    resolution,
    seed_spread_loop,
    seed_spread_test,
)


# ----------------------------------------------------------------------------- resolution
@pytest.mark.parametrize(
    "lo, hi, verdict",
    [
        (0.01, 0.2, "B > A"),  # interval above zero
        (-0.3, -0.001, "B < A"),  # interval below zero
        (-0.1, 0.1, "unresolved"),  # straddles zero
        (0.0, 0.2, "unresolved"),  # touches zero: not excluded
        (-0.2, 0.0, "unresolved"),  # touches zero from below
        (math.nan, math.nan, "unresolved"),  # nothing measured
    ],
)
def test_resolution(lo: float, hi: float, verdict: str) -> None:
    assert resolution(lo, hi) == verdict
    assert PairedDifference(0.0, lo, hi, 1, 1).resolved is (verdict != "unresolved")


# ----------------------------------------------------------------------------- paired_difference
def test_identical_models_are_unresolved_with_zero_width() -> None:
    a = np.array([[1, 0, 1, 1], [0, 0, 1, 0]])
    d = paired_difference(a, a.copy())
    assert (d.diff, d.lo, d.hi, d.resolved, d.verdict) == (0.0, 0.0, 0.0, False, "unresolved")


def test_clear_improvement_is_resolved_and_the_flip_is_its_mirror() -> None:
    rng = np.random.default_rng(0)
    a = (rng.random((3, 400)) < 0.4).astype(float)
    b = np.maximum(a, (rng.random((3, 400)) < 0.3).astype(float))  # B right wherever A is, and more
    up, down = paired_difference(a, b, seed=1), paired_difference(b, a, seed=1)
    assert up.resolved and up.verdict == "B > A" and up.lo > 0
    assert down.verdict == "B < A"
    assert (
        down.diff == pytest.approx(-up.diff) and down.lo == pytest.approx(-up.hi) and down.hi == pytest.approx(-up.lo)
    )


def test_pairing_narrows_the_interval_versus_shuffled_steps() -> None:
    """Same per-step difficulty for both models: the paired interval is much narrower than the
    interval after breaking the pairing (B's steps shuffled)."""
    rng = np.random.default_rng(3)
    easy = rng.random(400) < 0.5
    a = (easy & (rng.random(400) < 0.9)).astype(float)[None, :]
    b = (easy & (rng.random(400) < 0.95)).astype(float)[None, :]
    paired = paired_difference(a, b, seed=0)
    unpaired = paired_difference(a, b[:, rng.permutation(400)], seed=0)
    assert paired.diff == pytest.approx(unpaired.diff)
    assert (paired.hi - paired.lo) < 0.6 * (unpaired.hi - unpaired.lo)


def test_seed_spread_widens_the_interval() -> None:
    """Three seeds that disagree (one much better) give a wider interval than three copies of the
    average seed: the interval is over seeds as well as steps."""
    rng = np.random.default_rng(5)
    a = (rng.random((3, 300)) < 0.5).astype(float)
    b_spread = a.copy()
    b_spread[0] = 1.0  # seed 0 of B solves everything, seeds 1-2 equal A
    d_spread = paired_difference(a, b_spread, seed=0)
    one_seed = paired_difference(a[:1], b_spread[:1], seed=0)
    assert d_spread.n_seeds == 3 and one_seed.n_seeds == 1
    assert (d_spread.hi - d_spread.lo) > 2 * (one_seed.hi - one_seed.lo) / math.sqrt(3)


def draw_outcomes(data, seeds: int, steps: int) -> np.ndarray:
    """A hypothesis-drawn 0/1 outcome matrix of shape ``(seeds, steps)``."""
    cells = st.lists(st.integers(0, 1), min_size=seeds * steps, max_size=seeds * steps)
    return np.array(data.draw(cells), dtype=float).reshape(seeds, steps)


@settings(max_examples=40, deadline=None)
@given(
    seeds=st.integers(1, 3),
    steps=st.integers(1, 12),
    n_boot=st.integers(1, 30),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_vectorised_equals_loop(seeds: int, steps: int, n_boot: int, seed: int, data) -> None:
    a, b = draw_outcomes(data, seeds, steps), draw_outcomes(data, seeds, steps)
    v = paired_difference(a, b, n_boot=n_boot, seed=seed)
    lp = paired_bootstrap_loop(a, b, n_boot=n_boot, seed=seed)
    assert v.diff == pytest.approx(lp.diff) and v.lo == pytest.approx(lp.lo) and v.hi == pytest.approx(lp.hi)
    assert v.lo <= v.diff <= v.hi  # the interval contains the point difference
    assert v.diff == pytest.approx(b.mean() - a.mean())


@pytest.mark.parametrize(
    "a, b, match",
    [
        (np.zeros((2, 3)), np.zeros((3, 3)), "paired"),  # different numbers of seeds
        (np.zeros((1, 3)), np.zeros((1, 4)), "paired"),  # different test steps
        (np.zeros((0, 3)), np.zeros((0, 3)), "non-empty"),  # nothing to compare
        (np.array([[0.0, np.nan]]), np.zeros((1, 2)), "a: values must be finite"),  # a nan outcome
    ],
)
def test_bad_input_names_the_problem(a, b, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        paired_difference(a, b)


# ----------------------------------------------------------------------------- paired_matrix
def rec(seed: int, ep: str, step: int, exact: bool) -> dict:
    return {"seed": seed, "split": "test", "episode_id": ep, "step_id": step, "exact": exact}


def test_paired_matrix_orders_seeds_and_steps() -> None:
    recs = [rec(1, "e", 1, True), rec(0, "e", 1, False), rec(1, "e", 0, False), rec(0, "e", 0, True)]
    m, seeds, steps = paired_matrix(recs)
    assert seeds == [0, 1] and steps == [("test", "e", 0), ("test", "e", 1)]
    assert m.tolist() == [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize(
    "recs, match",
    [
        ([rec(0, "e", 0, True), rec(1, "e", 1, True)], "seed 0 has no record for step"),  # unpaired cells
        ([rec(0, "e", 0, True), rec(0, "e", 0, False)], r"runs\[1\]: duplicate cell"),  # one step twice
        ([{"seed": 0, "split": "t", "episode_id": "e", "exact": True}], r"runs\[0\]: missing key"),  # no step_id
    ],
)
def test_paired_matrix_refuses_unpaired_records(recs, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        paired_matrix(recs, name="runs")


# ----------------------------------------------------------------------------- claims
@pytest.mark.parametrize(
    "frame, ok",
    [
        (pd.DataFrame({"lo": [0.5], "hi": [2.0], "resolved": [True]}), True),  # honest resolved
        (pd.DataFrame({"lo": [-0.5], "hi": [2.0], "resolved": [False]}), True),  # honest unresolved
        (pd.DataFrame({"lo": [-0.5], "hi": [2.0], "resolved": [True]}), False),  # claims resolved across zero
        (pd.DataFrame({"lo": [0.1], "hi": [2.0], "resolved": [False]}), False),  # hides a resolved difference
        (pd.DataFrame({"SR lo": [-1.0], "SR hi": [1.0], "SR resolved": [True]}), False),  # prefixed columns
        (pd.DataFrame({"SR resolved": [False]}), False),  # a mark without its interval
        (pd.DataFrame({"SR": [40.0], "SR_lo": [35.0], "SR_hi": [45.0]}), True),  # no claim column at all
    ],
)
def test_check_resolved_claims(frame: pd.DataFrame, ok: bool) -> None:
    if ok:
        check_resolved_claims(frame, table="t")
    else:
        with pytest.raises(ResolvedClaimError, match="t: "):
            check_resolved_claims(frame, table="t")


def test_difference_row_passes_its_own_check() -> None:
    a = np.array([[0, 0, 1, 1, 0, 1]] * 2, dtype=float)
    b = np.array([[1, 1, 1, 1, 0, 1]] * 2, dtype=float)
    row = difference_row(paired_difference(a, b), prefix="SR ")
    assert row["SR diff"] == pytest.approx(100 * 2 / 6) and row["n_seeds"] == 2 and row["n_steps"] == 6
    check_resolved_claims(pd.DataFrame([row]))


# ----------------------------------------------------------------------------- seed_spread_test
_SEPARATED = np.array([[1.0] * 20, [0.0] * 20, [0.0] * 20])  # seed 0 right everywhere, seeds 1-2 nowhere


@pytest.mark.parametrize(
    "m, std, p, real",
    [
        (np.array([[1, 0, 1, 0, 1]] * 3, dtype=float), 0.0, 1.0, False),  # identical seeds: no spread, every draw ties
        (np.array([[1, 1, 0, 0], [1, 1, 0, 0]], dtype=float), 0.0, 1.0, False),  # constant columns: nothing to shuffle
        (_SEPARATED, float(np.std([1.0, 0.0, 0.0], ddof=1)), 1 / 201, True),  # the widest spread there is
        (np.array([[1, 0, 1, 0], [0, 1, 0, 1]], dtype=float), 0.0, 1.0, False),  # equal means, different steps
    ],
)
def test_seed_spread_cases(m: np.ndarray, std: float, p: float, real: bool) -> None:
    t = seed_spread_test(m, n_perm=200, seed=0)
    assert t.std == pytest.approx(std) and t.p_value == pytest.approx(p) and t.real is real
    assert (t.n_seeds, t.n_steps, t.n_perm) == (*m.shape, 200)
    assert 0.0 <= t.null_mean <= t.null_hi + 1e-12


def test_seed_spread_of_one_seed_is_not_measured() -> None:
    t = seed_spread_test(np.array([1.0, 0.0, 1.0]), n_perm=50)  # a 1-D array is one seed
    assert math.isnan(t.std) and math.isnan(t.p_value) and not t.real and t.n_seeds == 1


def test_seed_spread_is_calibrated_when_seeds_are_equally_good() -> None:
    # 300 models whose 3 seeds draw every step from one success rate: p < 0.05 about 5% of the time
    rng = np.random.default_rng(7)
    ps = [seed_spread_test((rng.random((3, 100)) < 0.45).astype(float), n_perm=199, seed=k).p_value for k in range(300)]
    share = float(np.mean(np.asarray(ps) < 0.05))
    assert 0.01 <= share <= 0.10, share
    # ... and a real gap between seeds (0.35 / 0.45 / 0.55) is found nearly every time at 400 steps
    found = [
        seed_spread_test((rng.random((3, 400)) < np.array([[0.35], [0.45], [0.55]])).astype(float), n_perm=199).real
        for _ in range(30)
    ]
    assert sum(found) >= 27


@settings(max_examples=40, deadline=None)
@given(
    seeds=st.integers(2, 4),
    steps=st.integers(1, 10),
    n_perm=st.integers(1, 25),
    seed=st.integers(0, 2**16),
    chunk=st.integers(1, 30),
    data=st.data(),
)
def test_seed_spread_vectorised_equals_loop(seeds: int, steps: int, n_perm: int, seed: int, chunk: int, data) -> None:
    m = draw_outcomes(data, seeds, steps)
    v = seed_spread_test(m, n_perm=n_perm, seed=seed, chunk=chunk)
    lp = seed_spread_loop(m, n_perm=n_perm, seed=seed)
    assert v.std == pytest.approx(lp.std) and v.null_mean == pytest.approx(lp.null_mean)
    assert v.null_hi == pytest.approx(lp.null_hi) and v.p_value == pytest.approx(lp.p_value)
    assert 1.0 / (1 + n_perm) <= v.p_value <= 1.0  # add-one: never 0
    # per-seed means lie in [0, 1], whose widest sample std is half zeros, half ones: 0.5 * sqrt(n / (n - 1))
    assert v.null_hi <= 0.5 * math.sqrt(seeds / (seeds - 1)) + 1e-12
    assert isinstance(v, SeedSpreadTest)


@pytest.mark.parametrize(
    "m, kwargs, match",
    [
        (np.zeros((2, 3)), {"n_perm": 0}, "n_perm"),  # no draw
        (np.zeros((2, 3)), {"alpha": 1.0}, "alpha"),  # not a level
        (np.array([[0.0, np.inf], [1.0, 0.0]]), {}, "m: values must be finite"),  # a broken outcome
        (np.zeros((0, 3)), {}, "non-empty"),  # nothing to test
    ],
)
def test_seed_spread_bad_input_names_the_problem(m: np.ndarray, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        seed_spread_test(m, **kwargs)
