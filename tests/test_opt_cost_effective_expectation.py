"""Expected time and energy of uniform K-of-N sampling: Luo et al. (INFOCOM 2021), Lemma 1 (eq. 10) and
Lemma 2 (eqs. 12-13), against full enumeration, Monte Carlo and exact rational arithmetic."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizers.cost_effective import (
    expected_round_time_s,
    expected_total_energy_j,
    expected_total_time_s,
    straggler_probabilities,
)
from optimizers.errors import OptimizerInputError


@st.composite
def fleets(draw, n_max: int = 10):
    n = draw(st.integers(1, n_max))
    times = draw(st.lists(st.floats(0.0, 100.0), min_size=n, max_size=n))
    k = draw(st.integers(1, n))
    return np.array(times), k


@settings(max_examples=200, deadline=None)
@given(fleet=fleets())
def test_lemma_2_equals_full_enumeration(fleet):
    times, k = fleet
    subsets = itertools.combinations(range(times.size), k)
    enumerated = float(np.mean([max(times[list(s)]) for s in subsets]))  # eq. (4) averaged over all C(N, K)
    assert expected_round_time_s(times, k) == pytest.approx(enumerated, rel=1e-12, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(
    fleet=fleets(),
    t_p=st.floats(0.0, 1.0),
    e=st.integers(1, 50),
    rounds=st.integers(0, 1000),
)
def test_lemma_2_total_time_uses_eq_3(fleet, t_p, e, rounds):
    t_m, k = fleet
    t_p_s = np.full(t_m.size, t_p) * np.linspace(0.5, 1.5, t_m.size)
    subsets = itertools.combinations(range(t_m.size), k)
    enumerated = np.mean([max(t_p_s[list(s)] * e + t_m[list(s)]) for s in subsets]) * rounds
    assert expected_total_time_s(t_p_s, t_m, k=k, e=e, rounds=rounds) == pytest.approx(enumerated, rel=1e-12, abs=1e-9)


def test_lemma_2_monte_carlo_n_1000():
    rng = np.random.default_rng(20210510)
    n, k, rounds = 1000, 37, 20_000
    times = rng.gamma(shape=2.0, scale=1.5, size=n)  # heterogeneous per-round times [s]
    maxima = np.empty(rounds)
    for start in range(0, rounds, 2_000):  # uniform K-of-N samples without replacement, in chunks
        keys = rng.random((2_000, n))
        chosen = np.argpartition(keys, k, axis=1)[:, :k]
        maxima[start : start + 2_000] = times[chosen].max(axis=1)
    standard_error = maxima.std(ddof=1) / math.sqrt(rounds)
    assert abs(maxima.mean() - expected_round_time_s(times, k)) <= 3 * standard_error


def test_lemma_2_exact_rational_reference_n_2000():
    # math.comb and Fraction give the exact value of eq. (13) for integer times.
    rng = np.random.default_rng(7)
    n = 2000
    times = rng.integers(1, 10_000, size=n)
    t_sorted = sorted(int(t) for t in times)
    for k in (1, 2, 50, 999, 1000, 1999, 2000):
        numerator = sum(math.comb(i - 1, k - 1) * t_sorted[i - 1] for i in range(k, n + 1))
        exact = Fraction(numerator, math.comb(n, k))
        assert expected_round_time_s(times, k) == pytest.approx(float(exact), rel=1e-11)


def test_lemma_2_exact_rational_reference_n_10000():
    rng = np.random.default_rng(8)
    n = 10_000
    times = rng.integers(1, 10_000, size=n)
    t_sorted = sorted(int(t) for t in times)
    for k in (3, 9_998):
        numerator = sum(math.comb(i - 1, k - 1) * t_sorted[i - 1] for i in range(k, n + 1))
        exact = Fraction(numerator, math.comb(n, k))
        assert expected_round_time_s(times, k) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 10, 100, 2_500, 5_000, 9_999, 10_000])
def test_straggler_probabilities_stable_at_n_10000(k):
    w = straggler_probabilities(10_000, k)
    assert np.all(np.isfinite(w)) and np.all(w >= 0)
    assert w.sum() == pytest.approx(1.0, rel=1e-10)
    assert np.all(w[: k - 1] == 0)
    assert w[-1] == pytest.approx(k / 10_000, rel=1e-10)  # P(slowest device is sampled) = K/N


def test_lemma_2_special_cases_n_10000():
    rng = np.random.default_rng(3)
    times = rng.uniform(0.5, 3.0, size=10_000)
    assert expected_round_time_s(times, 1) == pytest.approx(times.mean(), rel=1e-12)  # Case 2 of Sec. IV-A
    assert expected_round_time_s(times, 10_000) == pytest.approx(times.max(), rel=1e-12)
    assert expected_round_time_s(np.full(10_000, 2.5), 4_321) == pytest.approx(2.5, rel=1e-12)  # Case 1
    # more clients per round can only wait longer for the straggler
    values = [expected_round_time_s(times, k) for k in (1, 10, 100, 1000, 10_000)]
    assert values == sorted(values)


@settings(max_examples=100, deadline=None)
@given(
    fleet=fleets(),
    e=st.integers(1, 50),
    rounds=st.integers(0, 1000),
    data=st.data(),
)
def test_lemma_1_equals_full_enumeration(fleet, e, rounds, data):
    e_m, k = fleet
    e_p = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=e_m.size, max_size=e_m.size)))
    subsets = itertools.combinations(range(e_m.size), k)
    enumerated = np.mean([np.sum(e_p[list(s)] * e + e_m[list(s)]) for s in subsets]) * rounds  # eq. (7)
    assert expected_total_energy_j(e_p, e_m, k=k, e=e, rounds=rounds) == pytest.approx(enumerated, rel=1e-12, abs=1e-9)


def test_lemma_1_hand_value():
    # K (e_p E + e_m) R with averages e_p = 2e-3 J, e_m = 3e-2 J: 5 * (2e-3 * 10 + 3e-2) * 100 = 25 J
    e_p = np.array([1e-3, 3e-3])
    e_m = np.array([2e-2, 4e-2])
    assert expected_total_energy_j(e_p, e_m, k=2, e=10, rounds=100) == pytest.approx(2 * 0.05 * 100)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: expected_round_time_s([1.0, 2.0], 3), r"k=3: must be in \[1, n=2\]"),
        (lambda: expected_round_time_s([1.0, 2.0], 0), r"k=0: must be >= 1"),
        (lambda: expected_round_time_s([1.0, -2.0], 1), r"round_times_s\[1\]=-2.0: must be >= 0"),
        (lambda: expected_round_time_s([], 1), r"round_times_s: shape \(0,\)"),
        (lambda: expected_total_time_s([1.0], [1.0, 2.0], k=1, e=1, rounds=1), r"t_m_s: length 2"),
        (lambda: expected_total_time_s([1.0], [1.0], k=1, e=0.5, rounds=1), r"e=0.5: must be >= 1"),
        (lambda: expected_total_energy_j([1.0], [1.0], k=1, e=1, rounds=-1), r"rounds=-1.0: must be >= 0"),
        (lambda: straggler_probabilities(0, 1), r"n=0: must be >= 1"),
    ],
)
def test_validation(call, match):
    with pytest.raises(OptimizerInputError, match=match):
        call()
