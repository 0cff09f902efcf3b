"""Property tests: AnycostFL closed form (optimizers/anycost.py) against the geometric-program reference
(optimizers/anycost_gp.py) over wide input ranges.

- same feasibility verdict and reason;
- closed-form gain within GAP_REL (1e-6) of the GP's, relative;
- the closed-form (alpha, beta, f) satisfy (10a)-(10e), recomputed from eqs. (6)-(9), to CONSTRAINT_REL (1e-9).

Devices within 1e-6 (relative) of the feasibility boundary are left out of the verdict comparison: there the
verdict is decided by rounding (the feasible set has measure ~0) in either solver.
Uplink rates come either straight from 1e3..1e8 bps or from the 3GPP macro path loss of AnycostFL Sec. V-A
(ERRATA: PL = 128.1 + 37.6 log10(d/km), 1 MHz, 0.1 W, -114 dBm/MHz) at 10..2000 m.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from strategies import log_uniform

from optimizers.anycost import (
    REASON_CONFLICT,
    REASON_ENERGY,
    REASON_LATENCY,
    REASON_LATENCY_ENERGY,
    AnycostDevices,
    solve_anycost,
    solve_anycost_gp,
)
from optimizers.anycost_corners import corner_alpha_fixed, corner_beta_max

GAP_REL = 1e-6
CONSTRAINT_REL = 1e-9
BOUNDARY_REL = 1e-6


def rate_3gpp_bps(distance_m: np.ndarray) -> np.ndarray:
    """Shannon rate of AnycostFL eq. (8) with the Sec. V-A settings and the 3GPP macro path loss."""
    bandwidth_hz, p_tx_w, n0_dbm_per_hz = 1e6, 0.1, -114.0 - 60.0  # -114 dBm/MHz = -174 dBm/Hz
    path_loss_db = 128.1 + 37.6 * np.log10(distance_m / 1000.0)
    rx_dbm = 10 * np.log10(p_tx_w * 1e3) - path_loss_db  # W -> dBm
    noise_dbm = n0_dbm_per_hz + 10 * np.log10(bandwidth_hz)
    snr = 10 ** ((rx_dbm - noise_dbm) / 10)  # dB -> linear
    return bandwidth_hz * np.log2(1 + snr)



@st.composite
def problems(draw, max_devices: int = 6):
    n = draw(st.integers(1, max_devices))

    def column(lo, hi):
        return np.array(draw(st.lists(log_uniform(lo, hi), min_size=n, max_size=n)))

    f_a, f_b = column(1e8, 3e9), column(1e8, 3e9)
    same = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))) & draw(st.booleans())
    f_b = np.where(same, f_a, f_b)  # sometimes a fixed frequency
    if draw(st.booleans()):
        rate = rate_3gpp_bps(column(10.0, 2000.0))
    else:
        rate = column(1e3, 1e8)
    p_tx = np.full(n, 0.1) if draw(st.booleans()) else column(1e-3, 2.0)
    devices = AnycostDevices(
        samples=np.round(column(10, 5000)),
        eps=column(1e-28, 1e-25),
        f_min_hz=np.minimum(f_a, f_b),
        f_max_hz=np.maximum(f_a, f_b),
        e_max_j=column(1e-3, 1e3),
        rate_bps=rate,
        p_tx_w=p_tx,
    )
    knobs = dict(
        t_max_s=draw(log_uniform(0.1, 300.0)),
        cycles_per_sample=draw(log_uniform(1e5, 1e8)),
        update_bits=draw(st.sampled_from([53.23e6, 111.7e6]) | log_uniform(1e5, 1e9)),
        epochs=draw(st.integers(1, 5)),
        alpha_min=draw(st.just(0.25) | st.floats(0.05, 1.0)),
        beta_max=draw(st.just(1 / 15) | st.floats(0.01, 1.0)),
    )
    return devices, knobs


def near_boundary(dev: AnycostDevices, knobs: dict) -> np.ndarray:
    """Devices whose cheapest setting (alpha_min, beta -> 0+) is within BOUNDARY_REL of infeasible."""
    ca = knobs["epochs"] * dev.samples * knobs["cycles_per_sample"] * knobs["alpha_min"]
    ratios = [
        ca / (dev.f_max_hz * knobs["t_max_s"]),  # latency at f_max
        dev.eps * dev.f_min_hz**2 * ca / dev.e_max_j,  # energy at f_min
        dev.eps * ca**3 / (knobs["t_max_s"] ** 2 * dev.e_max_j),  # latency-tight f within energy
    ]
    return np.any([np.abs(r - 1) < BOUNDARY_REL for r in ratios], axis=0)


def assert_constraints(dev: AnycostDevices, sol, knobs: dict) -> None:
    ok = sol.feasible
    c = knobs["epochs"] * dev.samples[ok] * knobs["cycles_per_sample"]
    a, b, f = sol.alpha[ok], sol.beta[ok], sol.f_hz[ok]
    t_com = a * b * knobs["update_bits"] / dev.rate_bps[ok]  # eq. (9)
    tol = CONSTRAINT_REL
    assert np.all(c * a / f + t_com <= knobs["t_max_s"] * (1 + tol))  # (10a)
    assert np.all(dev.eps[ok] * f**2 * c * a + dev.p_tx_w[ok] * t_com <= dev.e_max_j[ok] * (1 + tol))  # (10b)
    assert np.all((a >= knobs["alpha_min"] * (1 - tol)) & (a <= 1 + tol))  # (10c)
    assert np.all((b > 0) & (b <= knobs["beta_max"] * (1 + tol)))  # (10d)
    assert np.all((f >= dev.f_min_hz[ok] * (1 - tol)) & (f <= dev.f_max_hz[ok] * (1 + tol)))  # (10e)
    assert np.all(sol.gain[~ok] == 0) and np.all(sol.reason[ok] == "") and np.all(sol.reason[~ok] != "")
    for name in ("alpha", "beta", "f_hz", "phi", "varphi", "gain", "t_cmp_s", "t_com_s", "e_cmp_j", "e_com_j", "weights"):
        assert np.all(np.isfinite(getattr(sol, name))), name


def regimes(dev: AnycostDevices, sol, knobs: dict) -> list[str]:
    out = []
    for i in range(len(sol)):
        if not sol.feasible[i]:
            out.append(f"infeasible: {sol.reason[i]}")
            continue
        caps = []
        if sol.alpha[i] == 1.0:
            caps.append("alpha=1")
        if sol.beta[i] >= knobs["beta_max"] * (1 - 1e-9):
            caps.append("beta=beta_max")
        if sol.f_hz[i] == dev.f_min_hz[i]:
            caps.append("f=f_min")
        if sol.f_hz[i] == dev.f_max_hz[i]:
            caps.append("f=f_max")
        out.append(" ".join(caps) or "interior (Lemma 3)")
    return out


@pytest.mark.slow  # 250 geometric programs in cvxpy, ~3.5 s: the full tier
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_closed_form_matches_gp(problem):
    dev, knobs = problem
    sol = solve_anycost(dev, **knobs)
    gp = solve_anycost_gp(dev, **knobs)
    for regime in regimes(dev, sol, knobs):
        event(regime)
    assert_constraints(dev, sol, knobs)
    keep = ~near_boundary(dev, knobs)
    assert sol.feasible[keep].tolist() == gp.feasible[keep].tolist()
    assert sol.reason[keep].tolist() == gp.reason[keep].tolist()
    both = sol.feasible & gp.feasible
    np.testing.assert_allclose(sol.gain[both], gp.gain[both], rtol=GAP_REL, atol=0)


@pytest.mark.slow  # 150 batches of up to 200 devices, ~6 s: the full tier
@settings(max_examples=150, deadline=None)
@given(problems(max_devices=200))
def test_closed_form_constraints_large_batches(problem):
    dev, knobs = problem
    sol = solve_anycost(dev, **knobs)
    assert_constraints(dev, sol, knobs)
    if sol.feasible.any():
        assert abs(sol.weights.sum() - 1) < 1e-12 and np.all(sol.weights[~sol.feasible] == 0)


def test_every_regime_occurs_and_matches_gp():
    """Over a wide random fleet each regime occurs; the GP agrees on up to 8 devices of each."""
    rng = np.random.default_rng(20230517)
    n = 4000

    def log_u(lo, hi, size=n):
        return 10 ** rng.uniform(np.log10(lo), np.log10(hi), size)

    f_a, f_b = log_u(1e8, 3e9), log_u(1e8, 3e9)
    dev = AnycostDevices(
        samples=np.round(log_u(10, 5000)), eps=log_u(1e-28, 1e-25),
        f_min_hz=np.minimum(f_a, f_b), f_max_hz=np.maximum(f_a, f_b), e_max_j=log_u(1e-2, 1e3),
        rate_bps=rate_3gpp_bps(rng.uniform(10, 2000, n)), p_tx_w=np.full(n, 0.1),
    )  # fmt: skip
    knobs = dict(t_max_s=10.0, cycles_per_sample=3e6, update_bits=53.23e6, epochs=1, alpha_min=0.25, beta_max=1 / 15)
    sol = solve_anycost(dev, **knobs)
    assert_constraints(dev, sol, knobs)
    labels = np.array(regimes(dev, sol, knobs))
    words = ["alpha=1", "beta=beta_max", "f=f_min", "f=f_max", "interior (Lemma 3)"]
    reasons = [f"infeasible: {r}" for r in (REASON_LATENCY, REASON_ENERGY, REASON_LATENCY_ENERGY, REASON_CONFLICT)]
    for word in words + reasons:
        hits = np.flatnonzero(labels == word if word in reasons else np.char.find(labels, word) >= 0)
        assert hits.size > 0, f"regime {word!r} never occurs"
        pick = hits[:8]
        sub = AnycostDevices(**{name: getattr(dev, name)[pick] for name in
                                ("samples", "eps", "f_min_hz", "f_max_hz", "e_max_j", "rate_bps", "p_tx_w")})  # fmt: skip
        gp = solve_anycost_gp(sub, **knobs)
        assert gp.feasible.tolist() == sol.feasible[pick].tolist(), word
        assert gp.reason.tolist() == sol.reason[pick].tolist(), word
        np.testing.assert_allclose(sol.gain[pick], gp.gain, rtol=GAP_REL, atol=0, err_msg=word)


@settings(max_examples=300, deadline=None)
@given(
    t=log_uniform(1e-2, 1e4), e=log_uniform(1e-4, 1e4), p=log_uniform(1e-4, 10.0), ratio=log_uniform(1e-40, 1.0)
)
def test_corner_alpha_fixed_solves_its_cubic(t, e, p, ratio):
    """J with alpha fixed: y^2 (E - P x) = k, x + y = T_max, 0 <= x <= min(T_max, E/P) (anycost_corners)."""
    k = ratio * t**2 * e  # ratio <= 1: a root exists
    x, y = (v[0] for v in corner_alpha_fixed(t, np.array([e]), np.array([p]), np.array([k])))
    assert 0 <= x <= min(t, e / p) * (1 + 1e-15) and abs(x + y - t) <= 1e-14 * t
    assert abs(y**2 * (e - p * x) - k) <= 1e-12 * y**2 * (e + p * x)
    assert np.isnan(corner_alpha_fixed(t, np.array([e]), np.array([p]), np.array([k * 1.001 / ratio]))[0][0])


@settings(max_examples=300, deadline=None)
@given(t=log_uniform(1e-2, 1e4), e=log_uniform(1e-4, 1e4), p=log_uniform(1e-4, 10.0), k=log_uniform(1e-30, 1e30))
def test_corner_beta_max_solves_its_cubic(t, e, p, k):
    """J with beta = beta_max: y^2 (E - P x) = k x^3, x + y = T_max (anycost_corners)."""
    x, y = (v[0] for v in corner_beta_max(t, np.array([e]), np.array([p]), np.array([k])))
    assert 0 < x <= min(t, e / p) * (1 + 1e-15) and abs(x + y - t) <= 1e-14 * t
    assert abs(y**2 * (e - p * x) - k * x**3) <= 1e-12 * (y**2 * (e + p * x) + k * x**3)


def test_no_sampled_feasible_point_beats_closed_form():
    """Second referee, independent of cvxpy: no feasible one of 20,000 random (alpha, beta, f) per device
    beats the closed-form gain, and an SLSQP polish (scipy, log variables) of the best one lands on it."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(7)
    n, m = 40, 20_000

    def log_u(lo, hi, size):
        return 10 ** rng.uniform(np.log10(lo), np.log10(hi), size)

    f_a, f_b = log_u(1e8, 3e9, n), log_u(1e8, 3e9, n)
    dev = AnycostDevices(
        samples=np.round(log_u(10, 5000, n)), eps=log_u(1e-28, 1e-25, n),
        f_min_hz=np.minimum(f_a, f_b), f_max_hz=np.maximum(f_a, f_b), e_max_j=log_u(1e-2, 1e3, n),
        rate_bps=log_u(1e3, 1e8, n), p_tx_w=np.full(n, 0.1),
    )  # fmt: skip
    knobs = dict(t_max_s=10.0, cycles_per_sample=3e6, update_bits=53.23e6, epochs=1, alpha_min=0.25, beta_max=1 / 15)
    sol = solve_anycost(dev, **knobs)
    assert 10 < sol.feasible.sum() < n
    refereed = 0
    for i in range(n):
        c = dev.samples[i] * knobs["cycles_per_sample"]
        s = knobs["update_bits"] / dev.rate_bps[i]

        def slack(u):  # >= 0 when feasible; u = log(alpha, beta, f)
            a, b, f = np.exp(u)
            return np.array([
                1 - (c * a / f + a * b * s) / knobs["t_max_s"],
                1 - (dev.eps[i] * f**2 * c * a + dev.p_tx_w[i] * a * b * s) / dev.e_max_j[i],
            ])  # fmt: skip

        a = rng.uniform(knobs["alpha_min"], 1, m)
        b = knobs["beta_max"] * 10 ** rng.uniform(-8, 0, m)
        f = dev.f_min_hz[i] + (dev.f_max_hz[i] - dev.f_min_hz[i]) * rng.uniform(0, 1, m)
        ok = np.all(slack(np.log([a, b, f])) >= 0, axis=0)
        if not sol.feasible[i]:
            assert not ok.any()
            continue
        best = np.argmax(np.where(ok, a**4 * b, -1)) if ok.any() else None
        if best is None:
            continue
        assert a[best] ** 4 * b[best] <= sol.gain[i] * (1 + 1e-12)
        bounds = [(np.log(knobs["alpha_min"]), 0.0), (None, np.log(knobs["beta_max"])),
                  (np.log(dev.f_min_hz[i]), np.log(dev.f_max_hz[i]))]  # fmt: skip
        res = minimize(lambda u: -(4 * u[0] + u[1]), np.log([a[best], b[best], f[best]]), method="SLSQP",
                       bounds=bounds, constraints={"type": "ineq", "fun": slack}, options={"ftol": 1e-14, "maxiter": 500})  # fmt: skip
        if np.all(slack(res.x) >= -1e-12):  # SLSQP ended feasible: it agrees with the closed form
            assert np.exp(4 * res.x[0] + res.x[1]) == pytest.approx(sol.gain[i], rel=1e-9)
            refereed += 1
    assert refereed >= sol.feasible.sum() // 2
