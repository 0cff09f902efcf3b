"""Least-energy round under a deadline (optimizers/alloc_min_energy.py) against a multi-start SLSQP reference on
random small instances, a one-device hand case, and infeasibility naming the device (issue #36, point 5).

The reference works in the problem's own variables (b, p, f), with no elimination and no Lambert W: it
minimises sum kappa c f^2 + p S / (b log2(1 + g p / (N0 b))) subject to c/f + S/r <= T, sum b <= B and the box
bounds, from the all-at-maximum start plus random starts, and keeps the best point that meets every constraint.
Units: SI (cycles, Hz, W, bit, W/Hz, s, J).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from optimizers.alloc_min_energy import min_energy_allocation
from optimizers.alloc_min_time import min_time_allocation
from optimizers.errors import InfeasibleError, OptimizerInputError

#: Issue #36's bar: the answer at most this far above the reference's energy, relative. Measured: ~3e-8.
GAP_REL = 1e-3
N_INSTANCES = 100
N_STARTS = 4
N0 = 10 ** (-174 / 10) * 1e-3
FEAS_REL = 1e-9  # constraint tolerance for both the answer and the reference


def random_instance(rng: np.random.Generator) -> dict:
    """1-4 devices: 1e7-1e9 cycles, f_max 0.5-2 GHz with f_min 5-50 % of it, kappa 3e-29-1e-27, p_max 0-23 dBm,
    S 0.1-3 Mbit, B 0.3-10 MHz, distance 10-500 m (128.1 + 37.6 log10 d/km, 8 dB shadowing); the deadline 1.001
    to 10 times the least round time."""
    n = int(rng.integers(1, 5))
    d_km = rng.uniform(0.01, 0.5, n)
    f_max = rng.uniform(0.5e9, 2e9, n)
    inst = dict(
        cycles=10 ** rng.uniform(7, 9, n), kappa=10 ** rng.uniform(-28.5, -27, n),
        f_min_hz=f_max * rng.uniform(0.05, 0.5, n), f_max_hz=f_max, p_max_w=10 ** (rng.uniform(0, 23, n) / 10) * 1e-3,
        update_bits=float(10 ** rng.uniform(5, 6.5)), gain=10 ** (-(128.1 + 37.6 * np.log10(d_km) + rng.normal(0, 8, n)) / 10),
        n0_w_per_hz=N0, bandwidth_hz=float(10 ** rng.uniform(5.5, 7)),
    )  # fmt: skip
    inst["deadline_s"] = fastest(inst).t_round_s * float(rng.choice([1.001, 1.05, 1.5, 3.0, 10.0]))
    return inst


def fastest(inst: dict):
    return min_time_allocation(
        cycles=inst["cycles"], cpu_hz=inst["f_max_hz"], update_bits=inst["update_bits"], gain=inst["gain"],
        p_tx_w=inst["p_max_w"], n0_w_per_hz=N0, bandwidth_hz=inst["bandwidth_hz"],
    )  # fmt: skip


def energy(inst: dict, b, p, f) -> float:
    rate = b * np.log2(1 + inst["gain"] * p / (N0 * b))
    return float(np.sum(inst["kappa"] * inst["cycles"] * f**2 + p * inst["update_bits"] / rate))


def slack(inst: dict, b, p, f) -> np.ndarray:
    """Per device (T - c/f - S/r) / T, then (1 - sum b / B): all >= 0 when feasible."""
    rate = b * np.log2(1 + inst["gain"] * p / (N0 * b))
    t = inst["deadline_s"]
    time_slack = (t - inst["cycles"] / f - inst["update_bits"] / rate) / t
    return np.append(time_slack, 1 - b.sum() / inst["bandwidth_hz"])


def reference(inst: dict, rng: np.random.Generator) -> float:
    n = inst["cycles"].size
    scale = np.concatenate([np.full(n, inst["bandwidth_hz"]), inst["p_max_w"], inst["f_max_hz"]])

    def unpack(z):
        x = z * scale
        return x[:n], x[n : 2 * n], x[2 * n :]

    bounds = [(1e-12, 1.0)] * (2 * n) + [(lo, 1.0) for lo in inst["f_min_hz"] / inst["f_max_hz"]]
    starts = [np.concatenate([fastest(inst).bandwidth_hz / inst["bandwidth_hz"], np.ones(2 * n)])]
    for _ in range(N_STARTS - 1):
        lo_f = inst["f_min_hz"] / inst["f_max_hz"]
        starts.append(np.concatenate([rng.dirichlet(np.ones(n)), rng.uniform(0.05, 1, n), rng.uniform(lo_f, 1)]))
    norm = energy(inst, *unpack(starts[0]))
    # The all-at-maximum start meets the deadline (it finishes at the least round time): a feasible candidate
    # when SLSQP stops just outside the set, as it can at deadlines within 0.1 % of the least round time.
    best = norm if np.all(slack(inst, *unpack(starts[0])) >= -FEAS_REL) else math.inf
    for z0 in starts:
        res = minimize(
            lambda z: energy(inst, *unpack(z)) / norm, z0, method="SLSQP", bounds=bounds,
            constraints=[{"type": "ineq", "fun": lambda z: slack(inst, *unpack(z))}],
            options=dict(ftol=1e-14, maxiter=1000),
        )  # fmt: skip
        if np.all(slack(inst, *unpack(res.x)) >= -FEAS_REL):
            best = min(best, energy(inst, *unpack(res.x)))
    return best


@pytest.mark.slow  # ~40 s of multi-start SLSQP references: the full tier, not make test-fast
def test_against_multistart_slsqp_on_random_instances():
    rng = np.random.default_rng(2021)
    gaps = []
    for _ in range(N_INSTANCES):
        inst = random_instance(rng)
        sol = min_energy_allocation(**inst)
        b, p, f = sol.bandwidth_hz, sol.p_tx_w, sol.cpu_hz
        # Feasible, recomputed here from (b, p, f) alone; the boxes hold; the reported energy is the model's.
        assert np.all(slack(inst, b, p, f) >= -FEAS_REL)
        assert np.all(p <= inst["p_max_w"]) and np.all((f >= inst["f_min_hz"]) & (f <= inst["f_max_hz"]))
        assert sol.energy_j == pytest.approx(energy(inst, b, p, f), rel=1e-12)
        ref = reference(inst, rng)
        assert math.isfinite(ref)  # every instance is feasible, and the start at the maximum is a feasible point
        gaps.append(sol.energy_j / ref - 1)
    assert max(gaps) <= GAP_REL, max(gaps)


def test_one_device_hand_case():
    """f pinned (f_min = f_max = 1 GHz, 1e9 cycles: 1 s, kappa 1e-28: 0.1 J), deadline 2 s: the upload takes its
    whole second over the whole band (upload energy falls with b), so p = (N0 B / g)(2^(S/B) - 1)."""
    n0, band, s, g = 4e-21, 1e6, 2e6, 1e-13
    sol = min_energy_allocation(cycles=[1e9], kappa=1e-28, f_min_hz=1e9, f_max_hz=1e9, p_max_w=1.0, update_bits=s,
                                gain=g, n0_w_per_hz=n0, bandwidth_hz=band, deadline_s=2.0)  # fmt: skip
    p = n0 * band / g * (2 ** (s / band) - 1)  # 0.12 W
    assert sol.bandwidth_hz[0] == pytest.approx(band, rel=1e-8)
    assert sol.p_tx_w[0] == pytest.approx(p, rel=1e-6) and sol.t_up_s[0] == pytest.approx(1.0, rel=1e-6)
    assert sol.energy_j == pytest.approx(0.1 + p * 1.0, rel=1e-6)


@pytest.mark.slow  # 2-3 s: the quick tier keeps this file's other checks
def test_looser_deadline_never_costs_more():
    rng = np.random.default_rng(3)
    inst = random_instance(rng)
    t_star = fastest(inst).t_round_s
    energies = [min_energy_allocation(**{**inst, "deadline_s": t_star * k}).energy_j for k in (1.01, 1.1, 2, 5, 20)]
    assert all(a >= b * (1 - 1e-9) for a, b in zip(energies, energies[1:]))


def test_infeasible_deadline_names_the_device():
    kw = dict(cycles=[1e9, 4e9], kappa=1e-28, f_min_hz=1e8, f_max_hz=2e9, p_max_w=0.1, update_bits=1e6, gain=1e-12,
              n0_w_per_hz=N0, bandwidth_hz=1e6)  # fmt: skip
    with pytest.raises(InfeasibleError, match=r"^device 1 cannot make the deadline deadline_s=1.5: its computation "
                       r"alone takes 2 s$") as err:  # fmt: skip
        min_energy_allocation(deadline_s=1.5, **kw)
    assert err.value.device == 1


def test_bad_frequency_bounds_are_named():
    with pytest.raises(OptimizerInputError, match=r"f_min_hz\[0\]=3000000000.0: must be <= f_max_hz\[0\]"):
        min_energy_allocation(cycles=[1e9], kappa=1e-28, f_min_hz=3e9, f_max_hz=2e9, p_max_w=0.1, update_bits=1e6,
                              gain=1e-12, n0_w_per_hz=N0, bandwidth_hz=1e6, deadline_s=5.0)  # fmt: skip
