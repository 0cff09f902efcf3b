"""Luo et al., "Cost-Effective Federated Learning Design" (INFOCOM 2021): P3 (eq. 20), eqs. (19), (21), (22),
Algorithm 2 (lines 5-13) against the geometric program and a brute-force integer search, Theorems 1-4."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import log_uniform

from optimizers.cost_effective import (
    LuoCostParams,
    cubic_positive_root,
    e_given_k,
    k_given_e,
    p3_objective,
    participation_factor,
    rounds_for_precision,
    solve_acs,
    solve_gp,
)
from optimizers.cost_effective_model import _cardano_positive_root
from optimizers.errors import OptimizerInputError, SolverError

GP_REL_TOL = 1e-6  # issue #4: continuous ACS objective vs GP optimum
INTEGER_REL_TOL = 5e-3  # issue #4: Algorithm 2's integer (K, E) vs brute-force integer minimum



gammas = st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0), log_uniform(1e-4, 1.0))


@st.composite
def instances(draw, n_max: int = 300):
    return LuoCostParams(
        n=draw(st.integers(1, n_max)),
        t_p_s=draw(log_uniform(1e-3, 10.0)),
        t_m_s=draw(log_uniform(1e-3, 10.0)),
        e_p_j=draw(log_uniform(1e-4, 10.0)),
        e_m_j=draw(log_uniform(1e-4, 10.0)),
        gamma=draw(gammas),
        a0_over_b0=draw(log_uniform(1e-2, 1e5)),
    )


# Luo et al. Sec. VI-A simulation system: t_p = 0.1 s, t_m = 2 s, e_p = 1e-3 J, e_m = 2e-2 J, N = 100;
# A0/B0 = 3140 is Table I's Setup 2 estimate.
SETUP2 = dict(n=100, t_p_s=0.1, t_m_s=2.0, e_p_j=1e-3, e_m_j=2e-2, a0_over_b0=3140.0)


def brute_force_minimum(params: LuoCostParams) -> float:
    """Integer minimum of P3 over K in 1..N and E in 1..ceil(sqrt(A0/B0)) + 2.

    For fixed K, P3 is convex in E with its minimiser at the root of eq. (22), which is below
    sqrt(A / F(K)) <= sqrt(A) (F >= 1), so the integer minimiser over E is at most ceil(sqrt(A)).
    """
    e_max = math.ceil(math.sqrt(params.a0_over_b0)) + 2
    k, e = np.meshgrid(np.arange(1, params.n + 1), np.arange(1, e_max + 1), indexing="ij")
    return float(np.min(p3_objective(params, k, e)))


# --- P3 objective, eq. (19), participation factor -------------------------------------------------------------


def test_p3_objective_hand_value():
    # N=3, K=2, E=2, gamma=0.5, t_p=1, t_m=2, e_p=3, e_m=4, A=5: F = 1 + 1/(2*2) = 1.25,
    # per-round cost = 0.5*(2+2) + 0.5*2*(6+4) = 12, bound = 5 + 1.25*4 = 10, objective = 12*10/2 = 60.
    params = LuoCostParams(n=3, t_p_s=1.0, t_m_s=2.0, e_p_j=3.0, e_m_j=4.0, gamma=0.5, a0_over_b0=5.0)
    assert p3_objective(params, 2, 2) == pytest.approx(60.0, rel=1e-15)
    assert p3_objective(params, 2, 2, b0_over_epsilon=10.0) == pytest.approx(600.0, rel=1e-15)


def test_p3_objective_is_vectorised():
    params = LuoCostParams(gamma=0.3, **SETUP2)
    k = np.arange(1, 101)[:, None]
    e = np.arange(1, 60)[None, :]
    grid = p3_objective(params, k, e)
    assert grid.shape == (100, 59)
    assert grid[9, 19] == p3_objective(params, 10, 20)


def test_participation_factor_limits():
    # F(K) = 1 + (N-K)/(K(N-1)): 2 at K = 1 (one client), 1 at K = N (full participation); N = 1 gives 1.
    assert participation_factor(1, 50) == pytest.approx(2.0)
    assert participation_factor(50, 50) == pytest.approx(1.0)
    assert participation_factor(1, 1) == 1.0
    assert participation_factor(4, 10) == pytest.approx(1 + 6 / 36)


def test_rounds_for_precision_hand_value():
    # eq. (19): R = (A0 + B0 F E^2) / (eps E) with F(10; N=100) = 1 + 90/990.
    f = 1 + 90 / 990
    expected = (200.0 + 3.0 * f * 25.0) / (0.01 * 5.0)
    assert rounds_for_precision(10, 5, n=100, a0=200.0, b0=3.0, epsilon=0.01) == pytest.approx(expected, rel=1e-14)


def test_rounds_for_precision_meets_bound_15():
    k, e = np.array([1, 10, 100]), np.array([1, 7, 40])
    r = rounds_for_precision(k, e, n=100, a0=50.0, b0=2.0, epsilon=0.05)
    bound = (50.0 + 2.0 * participation_factor(k, 100) * e**2) / (e * r)  # right side of (15)
    np.testing.assert_allclose(bound, 0.05, rtol=1e-14)


# --- eq. (21) and eq. (22): stationary points ------------------------------------------------------------------


def _derivative(f, x: float, h: float) -> float:
    return (f(x + h) - f(x - h)) / (2 * h)


@settings(max_examples=150, deadline=None)
@given(params=instances(), e=log_uniform(1.0, 300.0))
def test_k_given_e_projected_minimises_over_k(params, e):
    """Eq. (21) projected onto [1, N] (Algorithm 2 line 8) is the minimiser over K; inside, dP3/dK = 0."""
    k = min(float(params.n), max(1.0, k_given_e(params, e)))
    grid = np.linspace(1.0, params.n, 500)
    assert p3_objective(params, k, e) <= np.min(p3_objective(params, grid, e)) * (1 + 1e-12)
    if 1.01 < k < params.n * 0.99:
        slope = _derivative(lambda x: p3_objective(params, x, e), k, 1e-4 * k)
        assert abs(slope) <= 1e-6 * p3_objective(params, k, e) / k


@settings(max_examples=150, deadline=None)
@given(params=instances(), data=st.data())
def test_e_given_k_projected_minimises_over_e(params, data):
    """The positive root of cubic (22), projected onto E >= 1 (line 10), is the minimiser over E;
    when it is above 1, dP3/dE = 0 there."""
    k = data.draw(st.floats(1.0, float(params.n)))
    e = max(1.0, e_given_k(params, k))
    grid = np.linspace(1.0, 3 * math.sqrt(params.a0_over_b0) + 3, 1000)
    assert p3_objective(params, k, e) <= np.min(p3_objective(params, k, grid)) * (1 + 1e-12)
    if e > 1.01:
        slope = _derivative(lambda x: p3_objective(params, k, x), e, 1e-4 * e)
        assert abs(slope) <= 1e-6 * p3_objective(params, k, e) / e


def test_cubic_22_at_gamma_0_matches_corollary_1_eq_28():
    # eq. (28): dC/dE = B0 (2 t_p E + t_m) F - t_m A0 / E^2 = 0 at E* (gamma = 0): the printed eq. (22)
    # leading coefficient t_p/t_m would not satisfy it; the derived 2 t_p / t_m does.
    params = LuoCostParams(gamma=0.0, **SETUP2)
    k = 20.0
    e = e_given_k(params, k)
    f = participation_factor(k, params.n)
    residual = (2 * params.t_p_s * e + params.t_m_s) * f - params.t_m_s * params.a0_over_b0 / e**2
    assert abs(residual) <= 1e-12 * params.t_m_s * params.a0_over_b0 / e**2


@settings(max_examples=200, deadline=None)
@given(a=log_uniform(1e-12, 1e12), c=log_uniform(1e-12, 1e12))
def test_cubic_positive_root_solves_the_cubic(a, c):
    x = cubic_positive_root(a, c)
    assert x > 0
    assert abs((a * x + 1) * x * x - c) <= 1e-12 * ((a * x + 1) * x * x + c)


@pytest.mark.parametrize("a, c", [(0.5, 2.0), (3.0, 100.0), (0.02, 3000.0), (10.0, 1e-3), (1e-3, 1.0)])
def test_cardano_matches_numpy_roots_when_well_conditioned(a, c):
    roots = np.roots([a, 1.0, 0.0, -c])
    positive = roots[(np.abs(roots.imag) < 1e-9) & (roots.real > 0)].real
    assert positive.size == 1
    assert _cardano_positive_root(a, c) == pytest.approx(positive[0], rel=1e-11)
    assert cubic_positive_root(a, c) == pytest.approx(positive[0], rel=1e-11)


@pytest.mark.parametrize(
    "a, c",
    [
        (1e-10, 1.0),  # x << 1/a: Cardano's x = y - 1/(3a) cancels catastrophically (gives -1e10)
        (1e-7, 1.0),  # the same, milder (Cardano is off by 4e-4)
        (1e-4, 1e-6),
        (1e-60, 4.0),  # (1/a)^6 overflows: Cardano gives NaN
    ],
)
def test_cubic_fallback_where_cardano_is_ill_conditioned(a, c):
    # For a sqrt(c) << 1 the root is sqrt(c) (1 - a sqrt(c) / 2 + O((a sqrt(c))^2)).
    expected = math.sqrt(c) * (1 - a * math.sqrt(c) / 2)
    cardano = _cardano_positive_root(a, c)
    assert not (abs(cardano - expected) <= 1e-9 * expected)  # the raw formula fails here (NaN compares False)
    assert cubic_positive_root(a, c) == pytest.approx(expected, rel=1e-12)


# --- Algorithm 2 against the geometric program and brute force --------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(params=instances())
def test_acs_continuous_optimum_matches_gp(params):
    acs = solve_acs(params)
    gp = solve_gp(params)
    assert gp.status == "optimal"
    assert 1 <= acs.k_cont <= params.n and acs.e_cont >= 1
    assert abs(acs.objective_cont - gp.objective) <= GP_REL_TOL * gp.objective


@settings(max_examples=150, deadline=None)
@given(params=instances(n_max=200))
def test_acs_integer_solution_near_brute_force(params):
    acs = solve_acs(params)
    best = brute_force_minimum(params)
    assert isinstance(acs.k, int) and isinstance(acs.e, int)
    assert 1 <= acs.k <= params.n and acs.e >= 1
    assert acs.objective == pytest.approx(float(p3_objective(params, acs.k, acs.e)), rel=1e-15)
    assert best <= acs.objective <= (1 + INTEGER_REL_TOL) * best


def test_acs_rounding_picks_best_of_four_neighbours():
    params = LuoCostParams(gamma=0.5, **SETUP2)
    acs = solve_acs(params)
    neighbours = [
        (k, e)
        for k in {math.floor(acs.k_cont), math.ceil(acs.k_cont)}
        for e in {math.floor(acs.e_cont), math.ceil(acs.e_cont)}
    ]
    best = min(neighbours, key=lambda z: p3_objective(params, *z))
    assert (acs.k, acs.e) == best


def test_acs_start_point_does_not_matter():
    params = LuoCostParams(gamma=0.2, **SETUP2)
    reference = solve_acs(params)
    for k0, e0 in [(1.0, 1.0), (50.0, 200.0), (100.0, 1.0)]:
        other = solve_acs(params, k0=k0, e0=e0)
        assert other.k_cont == pytest.approx(reference.k_cont, rel=1e-7)
        assert other.e_cont == pytest.approx(reference.e_cont, rel=1e-7)
        assert (other.k, other.e) == (reference.k, reference.e)


def test_acs_raises_solver_error_when_not_converged():
    params = LuoCostParams(gamma=0.5, **SETUP2)
    with pytest.raises(SolverError, match="did not converge"):
        solve_acs(params, max_iter=1)


# --- Theorems 1-4 ----------------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(params=instances())
def test_theorem_2_gamma_0_gives_k_n(params):
    p0 = LuoCostParams(**{**params.__dict__, "gamma": 0.0})
    acs = solve_acs(p0)
    assert acs.k_cont == params.n and acs.k == params.n
    # strictly decreasing in K for a fixed E
    if params.n > 1:
        values = p3_objective(p0, np.arange(1, params.n + 1), 3.0)
        assert np.all(np.diff(values) < 0)


@settings(max_examples=100, deadline=None)
@given(params=instances())
def test_theorem_3_gamma_1_gives_k_1(params):
    p1 = LuoCostParams(**{**params.__dict__, "gamma": 1.0})
    acs = solve_acs(p1)
    assert acs.k_cont == 1.0 and acs.k == 1
    if params.n > 1:
        values = p3_objective(p1, np.arange(1, params.n + 1), 3.0)
        assert np.all(np.diff(values) > 0)


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(2, 300),
    t_p_s=log_uniform(1e-3, 10.0),
    t_m_s=log_uniform(1e-3, 10.0),
    power_w=log_uniform(1e-3, 10.0),
    a0_over_b0=log_uniform(1e-2, 1e5),
    gammas=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=6),
)
def test_theorem_4_k_and_e_decrease_with_gamma(n, t_p_s, t_m_s, power_w, a0_over_b0, gammas):
    # e_m / t_m = e_p / t_p (same power for computation and communication)
    solutions = [
        solve_acs(
            LuoCostParams(
                n=n, t_p_s=t_p_s, t_m_s=t_m_s, e_p_j=power_w * t_p_s, e_m_j=power_w * t_m_s,
                gamma=g, a0_over_b0=a0_over_b0,
            )  # fmt: skip
        )
        for g in sorted(gammas)
    ]
    for before, after in zip(solutions, solutions[1:]):
        assert after.k_cont <= before.k_cont * (1 + 1e-9)
        assert after.e_cont <= before.e_cont * (1 + 1e-9)


@settings(max_examples=100, deadline=None)
@given(params=instances(n_max=100))
def test_theorem_1_biconvex_and_corollary_1(params):
    # strictly convex in E for fixed K (first decreases then increases when the minimiser is > 1)
    k = float(max(1, params.n // 2))
    e = np.linspace(1.0, 3 * math.sqrt(params.a0_over_b0) + 3, 400)
    values = p3_objective(params, k, e)
    assert np.all(np.diff(values, 2) > -1e-9 * values[1:-1])
    # strictly convex in K for fixed E (when K matters)
    if params.n > 2:
        kk = np.linspace(1.0, params.n, 200)
        v = p3_objective(params, kk, 5.0)
        assert np.all(np.diff(v, 2) > -1e-9 * v[1:-1])


# --- the paper's simulation setting ----------------------------------------------------------------------------


def test_setup2_solution_is_interior_and_consistent():
    params = LuoCostParams(gamma=0.5, **SETUP2)
    acs = solve_acs(params)
    assert 1 < acs.k_cont < 100 and acs.e_cont > 1
    # the converged point satisfies both closed forms
    assert k_given_e(params, acs.e_cont) == pytest.approx(acs.k_cont, rel=1e-8)
    assert e_given_k(params, acs.k_cont) == pytest.approx(acs.e_cont, rel=1e-8)


def test_gp_handles_single_device_and_two_devices():
    for n in (1, 2):
        params = LuoCostParams(**{**SETUP2, "n": n, "gamma": 0.5})
        gp = solve_gp(params)
        acs = solve_acs(params)
        assert gp.k <= n
        assert acs.objective_cont == pytest.approx(gp.objective, rel=GP_REL_TOL)


# --- validation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("n", 0, r"n=0: must be >= 1"),
        ("n", 2.5, r"n=2.5: must be an integer"),
        ("t_p_s", -1.0, r"t_p_s=-1.0: must be > 0"),
        ("t_m_s", 0.0, r"t_m_s=0.0: must be > 0"),
        ("e_p_j", float("nan"), r"e_p_j=nan: must be finite"),
        ("e_m_j", "x", r"e_m_j='x': must be a number"),
        ("gamma", 1.5, r"gamma=1.5: must be in \[0, 1\]"),
        ("a0_over_b0", -3.0, r"a0_over_b0=-3.0: must be > 0"),
    ],
)
def test_params_validation_names_field_value_and_range(field, value, match):
    kwargs = {**SETUP2, "gamma": 0.5, field: value}
    with pytest.raises(OptimizerInputError, match=match):
        LuoCostParams(**kwargs)


def test_objective_validation():
    params = LuoCostParams(gamma=0.5, **SETUP2)
    with pytest.raises(OptimizerInputError, match=r"k=0.5: must be in \[1, n=100\]"):
        p3_objective(params, 0.5, 2)
    with pytest.raises(OptimizerInputError, match=r"e\[1\]=0.0: must be >= 1"):
        p3_objective(params, 2, [1.0, 0.0])
    with pytest.raises(OptimizerInputError, match=r"k0=0.0: must be in \[1, n=100\]"):
        solve_acs(params, k0=0.0)
    with pytest.raises(OptimizerInputError, match=r"epsilon=0.0: must be > 0"):
        rounds_for_precision(1, 1, n=10, a0=1.0, b0=1.0, epsilon=0.0)
    with pytest.raises(OptimizerInputError, match=r"a=-1.0: must be > 0"):
        cubic_positive_root(-1.0, 1.0)
