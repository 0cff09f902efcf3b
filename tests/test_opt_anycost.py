"""AnycostFL closed form (optimizers/anycost.py): hand-computed case, regimes, infeasibility, validation,
aggregation weights (eq. 13) and the corrected stationary points (eq. 24, ERRATA).

Regime cases are compared with the geometric-program reference (optimizers/anycost_gp.py).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from optimizers.anycost import (
    REASON_CONFLICT,
    REASON_ENERGY,
    REASON_LATENCY,
    REASON_LATENCY_ENERGY,
    AnycostDevices,
    aggregation_weights,
    solve_anycost,
    solve_anycost_gp,
    stationary_phi,
)
from optimizers.errors import OptimizerInputError

GAP_REL = 1e-6  # closed form vs GP, relative, on the gain
CONSTRAINT_REL = 1e-9  # constraint satisfaction of the closed form, relative

# A device in the paper's regime (Lemma 3, eq. (26)): both budgets tight, alpha < 1, beta < beta_max,
# f strictly inside [f_min, f_max].
HAND = dict(samples=1000.0, eps=1e-27, f_min_hz=1e8, f_max_hz=2e9, e_max_j=3.0, rate_bps=2e5, p_tx_w=0.1)
HAND_SETTINGS = dict(t_max_s=10.0, cycles_per_sample=1e7, update_bits=53.23e6)


def devices(**fields) -> AnycostDevices:
    """One device per entry; scalars broadcast, starting from HAND."""
    values = {**HAND, **fields}
    n = max(np.size(v) for v in values.values())
    return AnycostDevices(**{k: np.broadcast_to(np.asarray(v, dtype=float), (n,)) for k, v in values.items()})


def check_constraints(dev: AnycostDevices, sol, *, t_max_s, cycles_per_sample, update_bits, epochs=1,
                      alpha_min=0.25, beta_max=1 / 15) -> None:  # fmt: skip
    """(10a)-(10e) from the raw cost model eqs. (6)-(9), recomputed here, to CONSTRAINT_REL."""
    ok = sol.feasible
    c = epochs * dev.samples[ok] * cycles_per_sample
    a, b, f = sol.alpha[ok], sol.beta[ok], sol.f_hz[ok]
    t_com = a * b * update_bits / dev.rate_bps[ok]
    tol = CONSTRAINT_REL
    assert np.all(c * a / f + t_com <= t_max_s * (1 + tol))  # (10a), eqs. (6), (9)
    assert np.all(dev.eps[ok] * f**2 * c * a + dev.p_tx_w[ok] * t_com <= dev.e_max_j[ok] * (1 + tol))  # (10b)
    assert np.all((a >= alpha_min * (1 - tol)) & (a <= 1 + tol))  # (10c)
    assert np.all((b > 0) & (b <= beta_max * (1 + tol)))  # (10d)
    assert np.all((f >= dev.f_min_hz[ok] * (1 - tol)) & (f <= dev.f_max_hz[ok] * (1 + tol)))  # (10e)
    # reported costs are the cost model's
    np.testing.assert_allclose(sol.t_cmp_s[ok], c * a / f, rtol=1e-12)
    np.testing.assert_allclose(sol.t_com_s[ok], t_com, rtol=1e-12)
    np.testing.assert_allclose(sol.e_cmp_j[ok], dev.eps[ok] * f**2 * c * a, rtol=1e-12)
    np.testing.assert_allclose(sol.e_com_j[ok], dev.p_tx_w[ok] * t_com, rtol=1e-12)
    np.testing.assert_allclose(sol.gain[ok], a**4 * b, rtol=1e-12)


def test_hand_computed_single_device():
    """Paper's regime, worked by hand from eqs. (24) (corrected) and (26)."""
    t, p, e = 10.0, 0.1, 3.0
    a = p * t  # = 1 J
    psi = 4 * a**2 - 4 * a * e + 9 * e**2  # = 73
    phi = (math.sqrt(psi) - 3 * e) / (8 * a) + 3 / 4  # eq. (24), s1 = 0.69300047
    c = 1000 * 1e7  # tau |D| W = 1e10 cycles
    alpha = ((phi * t) ** 2 * (e - (1 - phi) * t * p) / (1e-27 * c**3)) ** (1 / 3)  # eq. (26)
    beta = 2e5 * (1 - phi) * t / (alpha * 53.23e6)
    f = alpha * c / (phi * t)
    varphi = 1 - (1 - phi) * t * p / e
    # the same numbers written out (computed once with the formulas above)
    assert (phi, alpha, beta, f) == pytest.approx((0.6930004682, 0.5057095576, 0.02280920146, 7.297391284e8), rel=1e-9)

    sol = solve_anycost(devices(), **HAND_SETTINGS)
    assert sol.feasible.tolist() == [True] and sol.reason.tolist() == [""]
    assert sol.phi[0] == pytest.approx(phi, rel=1e-12)
    assert sol.varphi[0] == pytest.approx(varphi, rel=1e-12)
    assert sol.alpha[0] == pytest.approx(alpha, rel=1e-12)
    assert sol.beta[0] == pytest.approx(beta, rel=1e-12)
    assert sol.f_hz[0] == pytest.approx(f, rel=1e-12)
    assert sol.gain[0] == pytest.approx(alpha**4 * beta, rel=1e-12)
    # Lemma 3: both budgets exactly used
    assert sol.t_cmp_s[0] + sol.t_com_s[0] == pytest.approx(t, rel=1e-12)
    assert sol.e_cmp_j[0] + sol.e_com_j[0] == pytest.approx(e, rel=1e-12)
    assert sol.weights.tolist() == [1.0]
    gp = solve_anycost_gp(devices(), **HAND_SETTINGS)
    assert gp.gain[0] == pytest.approx(sol.gain[0], rel=GAP_REL)


def test_stationary_points_errata_sign():
    """Eq. (24) with '+ 3/4' in the second root: both roots solve 4a phi^2 - (6a - 3E) phi - 2(E - a) = 0."""
    a = np.array([0.01, 0.5, 1.0, 3.0, 100.0, 1e4])
    e = np.array([1.0, 1.0, 3.0, 1.0, 0.2, 1.0])
    phi1, z1, phi2, z2 = stationary_phi(a, e)
    psi = 4 * a**2 - 4 * a * e + 9 * e**2
    np.testing.assert_allclose(phi1, (np.sqrt(psi) - 3 * e) / (8 * a) + 3 / 4, rtol=1e-12)
    np.testing.assert_allclose(phi2, -(np.sqrt(psi) + 3 * e) / (8 * a) + 3 / 4, rtol=1e-12)
    for phi in (phi1, phi2):
        residual = 4 * a * phi**2 - (6 * a - 3 * e) * phi - 2 * (e - a)
        scale = 4 * a * phi**2 + np.abs((6 * a - 3 * e) * phi) + 2 * np.abs(e - a)
        assert np.all(np.abs(residual) <= 1e-14 * scale)
    np.testing.assert_allclose(z1 + phi1, 1, rtol=1e-15)
    # s1 is the maximiser on the admissible range phi > max(0, 1 - E/a); s2 never lies inside it
    phi_lo = np.maximum(0, 1 - e / a)
    assert np.all((phi1 > phi_lo) & (phi1 < 1))
    assert np.all(phi2 <= phi_lo)


def test_small_a_stationary_point_is_two_thirds():
    """With negligible upload energy (a = P T_max -> 0), eq. (21) ~ phi^2 (1 - phi): optimum phi = 2/3."""
    phi1, _, _, _ = stationary_phi(np.array([1e-12]), np.array([1.0]))
    assert phi1[0] == pytest.approx(2 / 3, rel=1e-9)


def _compare_with_gp(dev, **settings):
    sol = solve_anycost(dev, **settings)
    gp = solve_anycost_gp(dev, **settings)
    assert np.all(sol.feasible)
    assert sol.feasible.tolist() == gp.feasible.tolist()
    assert sol.reason.tolist() == gp.reason.tolist()
    np.testing.assert_allclose(sol.gain, gp.gain, rtol=GAP_REL, atol=0)
    check_constraints(dev, sol, **settings)
    return sol


def test_alpha_capped_at_one():
    """Cheap computation (c = 1e7 cycles) and a generous budget: alpha would exceed 1 at the J tangent."""
    dev = devices(samples=[10.0, 100.0], e_max_j=[3.0, 30.0])
    sol = _compare_with_gp(dev, t_max_s=10.0, cycles_per_sample=1e6, update_bits=53.23e6)
    assert np.all(sol.alpha == 1.0)
    assert np.all(sol.beta < 1 / 15)


def test_beta_capped_at_beta_max():
    """Fast uplink (100 Mbps): the upload is short even uncompressed, beta sits at beta_max, alpha < 1."""
    dev = devices(rate_bps=[1e8, 5e7])
    sol = _compare_with_gp(dev, **HAND_SETTINGS)
    np.testing.assert_allclose(sol.beta, 1 / 15, rtol=1e-11)
    assert np.all(sol.alpha < 1)


def test_alpha_and_beta_both_capped_leave_slack():
    """Everything cheap: gain = beta_max, the maximum; frequency is the least-energy one meeting T_max."""
    dev = devices(samples=10.0, rate_bps=1e8, e_max_j=100.0)
    sol = _compare_with_gp(dev, t_max_s=10.0, cycles_per_sample=1e5, update_bits=53.23e6)
    assert sol.alpha[0] == 1.0 and sol.beta[0] == pytest.approx(1 / 15, rel=1e-12)
    assert sol.gain[0] == pytest.approx(1 / 15, rel=1e-12)
    assert sol.f_hz[0] == dev.f_min_hz[0]  # no need to run faster
    assert sol.t_cmp_s[0] + sol.t_com_s[0] < 10.0 and sol.e_cmp_j[0] + sol.e_com_j[0] < 100.0


def test_frequency_at_f_max():
    """Tight deadline with energy to spare: the interior f of eq. (26) would exceed f_max."""
    dev = devices(f_max_hz=[5e8, 3e8], e_max_j=[30.0, 10.0])
    sol = _compare_with_gp(dev, **HAND_SETTINGS)
    np.testing.assert_array_equal(sol.f_hz, dev.f_max_hz)
    assert np.all(sol.alpha < 1)


def test_frequency_at_f_min():
    """Long deadline, small energy budget: the interior f of eq. (26) would be below f_min.

    The first device sits on the tangent of the f_min boundary (varphi = 3/4), the second also at beta_max.
    """
    dev = devices(f_min_hz=[5e8, 1e9], f_max_hz=3e9, e_max_j=[3.0, 10.0])
    sol = _compare_with_gp(dev, t_max_s=100.0, cycles_per_sample=1e7, update_bits=53.23e6)
    np.testing.assert_array_equal(sol.f_hz, dev.f_min_hz)
    assert np.all(sol.alpha < 1)
    assert sol.varphi[0] == pytest.approx(0.75, rel=1e-12)


def test_fixed_frequency():
    """f_min == f_max: the only frequency is used."""
    dev = devices(f_min_hz=[3e8, 6e8, 1e9], f_max_hz=[3e8, 6e8, 1e9])
    sol = _compare_with_gp(dev, **HAND_SETTINGS)
    np.testing.assert_array_equal(sol.f_hz, dev.f_min_hz)


@pytest.mark.parametrize(
    "fields, settings, reason",
    [
        # c*alpha_min/f_max = 1e12*0.25/2e9 = 125 s > T_max, energy at f_min fine
        (dict(samples=1e5, eps=1e-30), dict(cycles_per_sample=1e7), REASON_LATENCY),
        # eps f_min^2 c alpha_min = 1e-25 * 1e16 * 1e10 * 0.25 = 2.5 J > 1 J, deadline fine at f_max
        (dict(eps=1e-25, e_max_j=1.0), dict(cycles_per_sample=1e7), REASON_ENERGY),
        (dict(samples=1e5, eps=1e-25, e_max_j=1.0), dict(cycles_per_sample=1e7), REASON_LATENCY_ENERGY),
        # each alone feasible (f_max meets T_max, f_min meets E_max), but not with one frequency
        # (c alpha_min / f_max = 0.83 s < 2 s; eps f_min^2 c alpha_min = 0.025 J < 1 J; at 1.25 GHz: 3.9 J)
        (dict(eps=1e-27, e_max_j=1.0, f_max_hz=3e9), dict(cycles_per_sample=1e7, t_max_s=2.0), REASON_CONFLICT),
    ],
)  # fmt: skip
def test_infeasible_reasons(fields, settings, reason):
    dev = devices(**fields)
    full = {**HAND_SETTINGS, **settings}
    sol = solve_anycost(dev, **full)
    assert sol.feasible.tolist() == [False]
    assert sol.reason.tolist() == [reason]
    for name in ("alpha", "beta", "f_hz", "phi", "varphi", "gain", "t_cmp_s", "t_com_s", "e_cmp_j", "e_com_j", "weights"):
        assert getattr(sol, name).tolist() == [0.0], name
    gp = solve_anycost_gp(dev, **full)
    assert gp.feasible.tolist() == [False] and gp.reason.tolist() == [reason]


def test_mixed_batch_and_no_nan():
    dev = devices(samples=[1000.0, 1e5, 10.0], eps=[1e-27, 1e-30, 1e-27])
    sol = solve_anycost(dev, **HAND_SETTINGS)
    assert sol.feasible.tolist() == [True, False, True]
    assert sol.reason.tolist() == ["", REASON_LATENCY, ""]
    for field in dataclasses.fields(sol):
        value = getattr(sol, field.name)
        assert value.shape == (3,)
        if value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), field.name
    assert sol.weights[1] == 0 and sol.weights.sum() == pytest.approx(1.0, rel=1e-15)


def test_per_device_independence():
    """A device's answer does not depend on the other devices in the batch (Sec. IV-D)."""
    dev = devices(samples=[1000.0, 10.0, 3000.0], rate_bps=[2e5, 1e8, 1e6])
    batch = solve_anycost(dev, **HAND_SETTINGS)
    for i in range(3):
        one = solve_anycost(devices(samples=dev.samples[i], rate_bps=dev.rate_bps[i]), **HAND_SETTINGS)
        assert (one.alpha[0], one.beta[0], one.f_hz[0]) == (batch.alpha[i], batch.beta[i], batch.f_hz[i])


def test_empty_fleet():
    sol = solve_anycost(AnycostDevices(*[np.zeros(0)] * 7), **HAND_SETTINGS)
    assert len(sol) == 0 and sol.weights.shape == (0,)


def test_outputs_and_inputs_are_frozen():
    dev = devices()
    sol = solve_anycost(dev, **HAND_SETTINGS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sol.alpha = np.ones(1)  # type: ignore[misc]
    with pytest.raises(ValueError):
        sol.alpha[0] = 1.0
    with pytest.raises(ValueError):
        dev.samples[0] = 1.0


# --- aggregation weights, eq. (13) -------------------------------------------------------------------


def test_aggregation_weights_eq13():
    """p_i = d_i^-2 / sum_k d_k^-2, d_i = 1 - alpha_i (2 - alpha_i) sqrt(beta_i) (eqs. (16)-(17))."""
    alpha = np.array([1.0, 0.5, 0.25])
    beta = np.array([1 / 16, 1 / 4, 1 / 16])
    d = np.array([1 - 1 * 1 * 0.25, 1 - 0.75 * 0.5, 1 - 0.4375 * 0.25])  # 0.75, 0.625, 0.890625
    expected = d**-2 / np.sum(d**-2)
    w = aggregation_weights(alpha, beta)
    np.testing.assert_allclose(w, expected, rtol=1e-14)
    assert w.sum() == pytest.approx(1.0, rel=1e-15)
    assert w[1] > w[0] > w[2]  # more information (smaller d) -> larger weight


def test_aggregation_weights_minimise_p2():
    """The weights solve (P2), eq. (14): no feasible perturbation lowers sum p_i^2 d_i^2."""
    rng = np.random.default_rng(3)
    alpha, beta = rng.uniform(0.25, 1, 6), rng.uniform(0.01, 1, 6)
    d2 = (1 - alpha * (2 - alpha) * np.sqrt(beta)) ** 2
    w = aggregation_weights(alpha, beta)
    best = np.sum(w**2 * d2)
    for _ in range(200):
        v = w + rng.normal(0, 0.01, 6)
        v = np.clip(v, 0, None)
        v /= v.sum()
        assert np.sum(v**2 * d2) >= best * (1 - 1e-12)


def test_aggregation_weights_mask_and_limits():
    alpha, beta = np.array([0.5, 1.0, 0.7]), np.array([0.1, 1.0, 0.2])
    w = aggregation_weights(alpha, beta)
    assert w.tolist() == [0.0, 1.0, 0.0]  # d = 0: an uncompressed full update takes all the weight
    w = aggregation_weights(alpha, beta, include=np.array([True, False, True]))
    assert w[1] == 0 and w.sum() == pytest.approx(1.0)
    assert aggregation_weights(alpha, beta, include=np.zeros(3, bool)).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(OptimizerInputError, match=r"alpha\[0\]=0.0: must be in \(0, 1\]"):
        aggregation_weights(np.array([0.0]), np.array([0.5]))


def test_solution_weights_are_eq13_over_feasible():
    dev = devices(samples=[1000.0, 1e5, 10.0, 300.0], eps=[1e-27, 1e-30, 1e-27, 1e-27])
    sol = solve_anycost(dev, **HAND_SETTINGS)
    d = 1 - sol.alpha * (2 - sol.alpha) * np.sqrt(sol.beta)
    expected = np.where(sol.feasible, d**-2, 0.0)
    np.testing.assert_allclose(sol.weights, expected / expected.sum(), rtol=1e-14)


# --- validation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(f_min_hz=2e9, f_max_hz=1e9), r"f_min_hz\[0\]=2000000000.0: must be <= f_max_hz\[0\]=1000000000.0"),
        (dict(rate_bps=[1e6, 0.0]), r"rate_bps\[1\]=0.0: must be finite and > 0"),
        (dict(rate_bps=-5.0), r"rate_bps\[0\]=-5.0: must be finite and > 0"),
        (dict(eps=np.nan), r"eps\[0\]=nan: must be finite and > 0"),
        (dict(samples=np.inf), r"samples\[0\]=inf: must be finite and > 0"),
        (dict(e_max_j=0.0), r"e_max_j\[0\]=0.0: must be finite and > 0"),
        (dict(p_tx_w=-0.1), r"p_tx_w\[0\]=-0.1: must be finite and > 0"),
    ],
)
def test_device_validation(fields, message):
    with pytest.raises(OptimizerInputError, match=message):
        devices(**fields)


def test_device_validation_shapes():
    with pytest.raises(OptimizerInputError, match=r"rate_bps: has 2 devices, samples has 1"):
        AnycostDevices(**{**{k: [v] for k, v in HAND.items()}, "rate_bps": [1e6, 1e6]})
    with pytest.raises(OptimizerInputError, match=r"eps: must have shape \(n_devices,\)"):
        AnycostDevices(**{**{k: [v] for k, v in HAND.items()}, "eps": [[1e-27]]})


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("t_max_s", -1.0, r"^t_max_s=-1.0: must be finite and > 0$"),
        ("t_max_s", 0, r"^t_max_s=0.0: must be finite and > 0$"),
        ("cycles_per_sample", math.inf, r"^cycles_per_sample=inf: must be finite and > 0$"),
        ("update_bits", 0.0, r"^update_bits=0.0: must be finite and > 0$"),
        ("epochs", 0, r"^epochs=0.0: must be finite and > 0$"),
        ("alpha_min", 0.0, r"^alpha_min=0.0: must be in \(0, 1\]$"),
        ("alpha_min", 1.5, r"^alpha_min=1.5: must be in \(0, 1\]$"),
        ("beta_max", 0.0, r"^beta_max=0.0: must be in \(0, 1\]$"),
        ("beta_max", 2.0, r"^beta_max=2.0: must be in \(0, 1\]$"),
        ("t_max_s", "10", r"^t_max_s='10': must be a real number$"),
    ],
)
def test_setting_validation(setting, value, message):
    settings = {**HAND_SETTINGS, setting: value}
    for solver in (solve_anycost, solve_anycost_gp):
        with pytest.raises(OptimizerInputError, match=message):
            solver(devices(), **settings)


def test_alpha_min_one_and_beta_max_one_are_allowed():
    sol = _compare_with_gp(devices(samples=[10.0, 300.0]), **HAND_SETTINGS, alpha_min=1.0, beta_max=1.0)
    assert np.all(sol.alpha[sol.feasible] == 1.0)
