"""Least energy of an FDMA round with every CPU at a fixed frequency (``f_min_hz = f_max_hz``): bandwidth and
transmit power only, the fixed-frequency baseline of examples/allocation_yang.py. Checked against a cvxpy
reference in exponential-cone form on random small instances (issue #36, point 5).

The reference. With f fixed, device i computes for ``c_i / f_i`` whatever the allocation, and its upload energy
``p t = (N0 / g) t b (2^{S/(t b)} - 1)`` falls with its upload time t for any bandwidth b (``u (2^{S/u} - 1)``
falls with u = t b), so each upload takes all of its slack, ``tau_i = T - c_i / f_i``. What is left is convex in
b: minimise ``sum_i (N0 tau_i / g_i) (b_i e^{k_i / b_i} - b_i)`` with ``k_i = S ln2 / tau_i``, subject to
``sum b <= B`` and ``p_i <= p_max_i``, i.e. ``b_i >= `` the least bandwidth that carries the rate at p_max (a
bound found by brentq on ``b ln(1 + g p_max / (N0 b)) = S ln2 / tau``); the perspective ``b e^{k/b}`` is an
exponential cone. No Lambert W, no price bisection, no golden section: none of the solver's
steps. Units: SI (cycles, Hz, W, bit, W/Hz, s, J).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq

from optimizers.alloc_min_energy import min_energy_allocation
from optimizers.alloc_min_time import min_time_allocation

cp = pytest.importorskip("cvxpy")

#: Issue #36's bar: the answer at most this far above the reference's upload energy, relative (the compute energy
#: is fixed and the same on both sides, so the gap is taken on the upload energy alone). Measured: 2.9e-7 above
#: (seed 3607); on the one instance whose reference is inaccurate the answer is 5% below it.
GAP_REL = 1e-3
#: How far below the reference the answer may be: the reference's own conic-solver tolerance.
BELOW_REL = 1e-5
N_INSTANCES = 100
N0 = 10 ** (-174 / 10) * 1e-3
FEAS_REL = 1e-9


def random_instance(rng: np.random.Generator) -> dict:
    """1-5 devices: 1e7-1e9 cycles at f = f_max in 0.5-2 GHz, kappa 3e-29-1e-27, p_max 0-23 dBm, S 0.1-3 Mbit,
    B 0.3-10 MHz, distance 10-500 m (128.1 + 37.6 log10 d/km, 8 dB shadowing); deadline 1.001 to 10 times the
    least round time."""
    n = int(rng.integers(1, 6))
    d_km = rng.uniform(0.01, 0.5, n)
    f = rng.uniform(0.5e9, 2e9, n)
    inst = dict(
        cycles=10 ** rng.uniform(7, 9, n), kappa=10 ** rng.uniform(-28.5, -27, n), f_min_hz=f, f_max_hz=f,
        p_max_w=10 ** (rng.uniform(0, 23, n) / 10) * 1e-3, update_bits=float(10 ** rng.uniform(5, 6.5)),
        gain=10 ** (-(128.1 + 37.6 * np.log10(d_km) + rng.normal(0, 8, n)) / 10), n0_w_per_hz=N0,
        bandwidth_hz=float(10 ** rng.uniform(5.5, 7)),
    )  # fmt: skip
    least = min_time_allocation(
        cycles=inst["cycles"], cpu_hz=f, update_bits=inst["update_bits"], gain=inst["gain"], p_tx_w=inst["p_max_w"],
        n0_w_per_hz=N0, bandwidth_hz=inst["bandwidth_hz"],
    ).t_round_s  # fmt: skip
    inst["deadline_s"] = least * float(rng.choice([1.001, 1.05, 1.5, 3.0, 10.0]))
    return inst


def least_share(k: np.ndarray, snr_share: np.ndarray) -> np.ndarray:
    """The least share beta at which p <= p_max: ``beta ln(1 + G / (B beta)) >= k`` (G / B = ``snr_share``), by
    brentq on that increasing function of beta (a linear bound: it keeps p_max's large G / B out of the cone)."""
    out = np.empty_like(k)
    for i, (ki, gi) in enumerate(zip(k, snr_share)):
        out[i] = brentq(lambda x: x * math.log1p(gi / x) - ki, 1e-300, 1e6, xtol=1e-300, rtol=1e-15)
    return out


def reference_upload_energy_j(inst: dict) -> tuple[float, bool]:
    """The module docstring's exponential-cone problem, in shares beta = b / B (solver scaling): (upload energy
    [J] at the reference's bandwidths, whether the conic solver reports them accurate). Where the p_max bounds
    take nearly all of the band and the devices' weights N0 tau / g span many decades, CLARABEL stops at
    "optimal_inaccurate", above the optimum."""
    band, s = inst["bandwidth_hz"], inst["update_bits"]
    tau = inst["deadline_s"] - inst["cycles"] / inst["f_max_hz"]
    k = s * math.log(2) / (tau * band)  # per unit share
    weight = N0 * tau * band / inst["gain"]  # [J] per unit of (zeta - beta)
    n = tau.size
    beta, zeta = cp.Variable(n, pos=True), cp.Variable(n)
    lower = least_share(k, inst["gain"] * inst["p_max_w"] / (N0 * band))
    cons = [cp.sum(beta) <= 1, beta >= lower]
    cons += [cp.constraints.ExpCone(cp.Constant(k[i]), beta[i], zeta[i]) for i in range(n)]
    scale = weight.max()
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(weight / scale, zeta - beta))), cons)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "solution may be inaccurate": returned as accurate=False
        prob.solve(solver=cp.CLARABEL)
    assert prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE), prob.status
    b = np.maximum(beta.value, lower) * band
    # the energy of the reference's bandwidths, evaluated exactly (not the solver's objective value)
    return float(np.sum(N0 * tau / inst["gain"] * b * np.expm1(s * math.log(2) / (tau * b)))), prob.status == cp.OPTIMAL


@pytest.mark.slow  # ~50 s of conic references: the full tier, not make test-fast
def test_fixed_frequency_against_exponential_cone_reference():
    rng = np.random.default_rng(3607)
    gaps, inaccurate = [], 0
    for _ in range(N_INSTANCES):
        inst = random_instance(rng)
        sol = min_energy_allocation(**inst)
        # the frequency stays where it is fixed; the round meets the deadline; the band and power limits hold
        assert np.array_equal(sol.cpu_hz, inst["f_max_hz"])
        assert np.all(sol.t_cmp_s + sol.t_up_s <= inst["deadline_s"] * (1 + FEAS_REL))
        assert sol.bandwidth_hz.sum() <= inst["bandwidth_hz"] * (1 + FEAS_REL)
        assert np.all(sol.p_tx_w <= inst["p_max_w"])
        np.testing.assert_allclose(sol.compute_energy_j, inst["kappa"] * inst["cycles"] * inst["f_max_hz"] ** 2,
                                   rtol=1e-12)  # fmt: skip
        ref, accurate = reference_upload_energy_j(inst)
        gap = float(sol.upload_energy_j.sum()) / ref - 1
        if accurate:  # below an accurate optimum only by the conic solver's tolerance
            assert gap >= -BELOW_REL, (gap, inst)
        else:
            inaccurate += 1
        gaps.append(gap)
    print(f"worst gap over {N_INSTANCES}: {max(gaps):.3g} (least {min(gaps):.3g}; {inaccurate} references inaccurate)")
    assert inaccurate <= N_INSTANCES // 10, inaccurate  # the check stays a check on most instances
    assert max(gaps) <= GAP_REL, max(gaps)
