"""The cost model (edgefl/fleet/costs.py) against hand computation and an independent grid search.

Hand set-up, two devices:
    FLOPs per cycle 4, 2;  f 1 GHz;  eps 1e-27, 2e-27 J/(cycle Hz^2);  P_tx 0.1, 0.2 W
    400e6 FLOPs  -> cycles 1e8, 2e8  -> t_cmp = c / f = 0.1 s, 0.2 s;  e_cmp = eps f^2 c = 0.1 J, 0.4 J
    2e6 bits at 1e6, 4e6 bit/s -> t_com = 2 s, 0.5 s;  e_com = P t = 0.2 J, 0.1 J
Per-step costs (Luo eqs. 3, 6): t_p 0.1, 0.3 s; e_p 1e-3, 2e-3 J; t_m 2, 3 s; e_m 0.02, 0.03 J.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgefl.fleet.costs import CostModel
from edgefl.fleet.devices import Fleet

REL = 1e-12  # the model evaluates the same formulas as the hand computation
DEV = np.array([0, 1])


def _fleet(**step) -> Fleet:
    return Fleet(
        f_min_hz=np.array([1e8, 1e8]), f_max_hz=np.array([1e9, 1e9]), energy_coeff=np.array([1e-27, 2e-27]),
        flops_per_cycle=np.array([4.0, 2.0]), tx_power_w=np.array([0.1, 0.2]), n_samples=np.array([100, 100]),
        **step,
    )  # fmt: skip


STEP = dict(step_time_s=np.array([0.1, 0.3]), comm_time_s=np.array([2.0, 3.0]),
            step_energy_j=np.array([1e-3, 2e-3]), comm_energy_j=np.array([0.02, 0.03]))  # fmt: skip


def test_physical_mode_is_anycostfl_eqs_6_to_9():
    costs = CostModel(_fleet())
    assert costs.mode == "physical"
    cycles = costs.cycles(DEV, 400e6)
    np.testing.assert_allclose(cycles, [1e8, 2e8], rtol=REL)
    t, e = costs.compute(DEV, cycles=cycles, steps=7, f_hz=1e9)  # steps play no part here
    np.testing.assert_allclose(t, [0.1, 0.2], rtol=REL)
    np.testing.assert_allclose(e, [0.1, 0.4], rtol=REL)
    t, e = costs.upload(DEV, bits=2e6, rate_bps=np.array([1e6, 4e6]))
    np.testing.assert_allclose(t, [2.0, 0.5], rtol=REL)
    np.testing.assert_allclose(e, [0.2, 0.1], rtol=REL)


def test_per_step_mode_is_luo_eqs_3_and_6():
    costs = CostModel(_fleet(**STEP))
    assert costs.mode == "per_step"
    t, e = costs.compute(DEV, cycles=1e30, steps=np.array([10, 4]), f_hz=1.0)  # cycles and f play no part
    np.testing.assert_allclose(t, [1.0, 1.2], rtol=REL)
    np.testing.assert_allclose(e, [0.01, 0.008], rtol=REL)
    t, e = costs.upload(DEV, bits=np.array([5e6, 0.0]), rate_bps=1.0)  # any payload costs t_m; none costs 0
    np.testing.assert_allclose(t, [2.0, 0.0], rtol=REL)
    np.testing.assert_allclose(e, [0.02, 0.0], rtol=REL)


def test_frequency_rules():
    costs = CostModel(_fleet())
    # 1e8 and 2e8 cycles in 0.2 s need 5e8 and 1e9 Hz; in 0.05 s 2e9 and 4e9 (above f_max: clipped, no fit)
    f, fits = costs.deadline_frequency_hz(DEV, np.array([1e8, 2e8]), 0.2)
    np.testing.assert_allclose(f, [5e8, 1e9], rtol=REL)
    assert fits.tolist() == [True, True]
    f, fits = costs.deadline_frequency_hz(DEV, np.array([1e8, 2e8]), np.array([0.05, -1.0]))
    np.testing.assert_allclose(f, [1e9, 1e9], rtol=REL)
    assert fits.tolist() == [False, False]
    f, _ = costs.deadline_frequency_hz(DEV, np.array([1e6, 1e6]), 1.0)  # 1e6 Hz would do: clipped up to f_min
    np.testing.assert_allclose(f, [1e8, 1e8], rtol=REL)
    np.testing.assert_allclose(costs.free_frequency_hz(DEV, "min_energy"), [1e8, 1e8])
    np.testing.assert_allclose(costs.free_frequency_hz(DEV, "max"), [1e9, 1e9])


@pytest.mark.parametrize("t_max_s, e_max_j", [(2.0, 0.5), (2.0, 100.0), (0.15, 0.5), (30.0, 0.15)])
def test_upload_budget_maximises_bits_against_a_grid_search(t_max_s, e_max_j):
    """Reference: the best of 200,001 frequencies on [f_min, f_max] for min(r (T - c/f), r (E - eps f^2 c) / P)."""
    costs = CostModel(_fleet())
    cycles, rate = np.array([1e8, 2e8]), np.array([1e6, 4e6])
    b = costs.upload_budget(DEV, cycles=cycles, steps=1, e_max_j=np.full(2, e_max_j), rate_bps=rate, t_max_s=t_max_s)
    fl = costs.fleet
    for i in range(2):
        grid = np.linspace(fl.f_min_hz[i], fl.f_max_hz[i], 200_001)
        bits = np.minimum(rate[i] * (t_max_s - cycles[i] / grid),
                          rate[i] * (e_max_j - fl.energy_coeff[i] * grid**2 * cycles[i]) / fl.tx_power_w[i])  # fmt: skip
        best = math.floor(bits.max())
        if best < 1:
            assert not b.feasible[i]
            continue
        assert b.feasible[i] and best <= b.bits[i] <= best + 0.01 * rate[i]  # grid step: f/2e5 ~ 5 kHz
        # the plan's costs are the model's own formulas at the chosen frequency and bits
        t, e = costs.compute(DEV[i : i + 1], cycles=cycles[i : i + 1], steps=1, f_hz=b.f_hz[i : i + 1])
        assert (b.t_cmp_s[i], b.e_cmp_j[i]) == (t[0], e[0])
        assert b.t_cmp_s[i] + b.t_com_s[i] <= t_max_s * (1 + REL) and b.e_cmp_j[i] + b.e_com_j[i] <= e_max_j * (1 + REL)


def test_frugal_upload_budget_sends_the_cap_at_the_deadline_frequency():
    """The compression baselines' "deadline" protocol: a cap of 1e5 bits binds both devices (T = 2 s, E = 100 J
    leave millions). By hand: upload 1e5 / 1e6 = 0.1 s and 1e5 / 4e6 = 0.025 s, so the lowest frequencies that
    compute 1e8 and 2e8 cycles in what is left are 1e8 / 1.9 and 2e8 / 1.975 Hz; the energies are eps f^2 c."""
    costs = CostModel(_fleet())
    cycles, rate = np.array([1e8, 2e8]), np.array([1e6, 4e6])
    kw = dict(cycles=cycles, steps=1, e_max_j=np.full(2, 100.0), rate_bps=rate, t_max_s=2.0, max_bits=1e5)
    frugal = costs.upload_budget(DEV, frugal=True, **kw)
    greedy = costs.upload_budget(DEV, **kw)
    f = np.array([1e8 / 1.9, 2e8 / 1.975])
    np.testing.assert_allclose(frugal.f_hz, np.maximum(f, 1e8), rtol=REL)  # device 0 would need 5.3e7: f_min
    np.testing.assert_allclose(frugal.bits, [1e5, 1e5])
    np.testing.assert_allclose(frugal.e_cmp_j, [1e-27 * 1e16 * 1e8, 2e-27 * f[1] ** 2 * 2e8], rtol=REL)
    assert np.all(frugal.t_cmp_s + frugal.t_com_s <= 2.0 * (1 + REL))
    assert np.all(frugal.e_cmp_j < greedy.e_cmp_j) and np.array_equal(greedy.bits, frugal.bits)
    # without a deadline the lowest frequency is f_min
    free = costs.upload_budget(DEV, frugal=True, **{**kw, "t_max_s": math.inf})
    np.testing.assert_allclose(free.f_hz, [1e8, 1e8])
