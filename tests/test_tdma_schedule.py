"""Least-time TDMA round (optimizers/tdma_schedule.py) against exhaustive search over every upload order on random
small instances, and hand cases. Units: SI (s, cycles, Hz, W, bit, W/Hz, J)."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

from optimizers.errors import OptimizerInputError
from optimizers.tdma_schedule import tdma_max_allocation, tdma_schedule

N_INSTANCES = 200
#: Exhaustive search and the release order add the same floats in different orders: only rounding may differ.
GAP_REL = 1e-12


def brute_force_round_s(t_cmp: np.ndarray, t_up: np.ndarray) -> float:
    """The least end of the last upload over every upload order and every start time: for a fixed order, no
    upload gains by waiting once its computation is done and the channel is free (later starts only push the
    rest later), so each order is played as early as it allows."""
    best = math.inf
    for order in itertools.permutations(range(t_cmp.size)):
        free = 0.0
        for i in order:
            free = max(free, t_cmp[i]) + t_up[i]
        best = min(best, free)
    return best


def test_release_order_matches_exhaustive_search():
    rng = np.random.default_rng(36)
    gaps = []
    for _ in range(N_INSTANCES):
        n = int(rng.integers(1, 7))
        # compute times spread over 0-1 s or all equal; uploads 1 ms-1 s (both regimes: idle channel and queue)
        t_cmp = rng.uniform(0, 1, n) if rng.random() < 0.8 else np.full(n, rng.uniform(0, 1))
        t_up = 10 ** rng.uniform(-3, 0, n)
        sched = tdma_schedule(t_cmp, t_up)
        ref = brute_force_round_s(t_cmp, t_up)
        gaps.append(abs(sched.t_round_s / ref - 1))
        # the slots do not overlap, each starts after its computation and lasts its upload time
        order = sched.order
        assert np.all(sched.start_s >= t_cmp) and np.allclose(sched.end_s - sched.start_s, t_up, rtol=1e-12)
        assert np.all(sched.start_s[order][1:] >= sched.end_s[order][:-1])
        assert t_cmp.max() + t_up.min() <= sched.t_round_s * (1 + GAP_REL)
        assert sched.t_round_s <= (t_cmp.max() + t_up.sum()) * (1 + GAP_REL)
    assert max(gaps) <= GAP_REL, max(gaps)


def test_hand_case():
    # device 0 computes 3 s, device 1 1 s; uploads 2 s and 1 s: device 1 uploads 1-2 s, device 0 3-5 s
    sched = tdma_schedule([3.0, 1.0], [2.0, 1.0])
    assert sched.order.tolist() == [1, 0]
    assert sched.start_s.tolist() == [3.0, 1.0] and sched.end_s.tolist() == [5.0, 2.0]
    assert sched.t_round_s == 5.0
    # equal compute times: the round is the compute time plus the sum of the uploads (the code's TDMA charge)
    assert tdma_schedule([2.0, 2.0, 2.0], [0.5, 0.25, 1.0]).t_round_s == 3.75


def test_max_allocation_by_hand():
    # one device alone on 1 MHz with SNR g p / (N0 B) = 3: rate 2 Mbit/s, 1 Mbit in 0.5 s at 0.2 W = 0.1 J;
    # 1e9 cycles at 1 GHz: 1 s and kappa c f^2 = 1e-27 * 1e9 * 1e18 = 1 J
    n0, band = 1e-20, 1e6
    gain = 3 * n0 * band / 0.2
    a = tdma_max_allocation(cycles=[1e9], cpu_hz=1e9, kappa=1e-27, p_tx_w=0.2, update_bits=1e6, gain=gain,
                            n0_w_per_hz=n0, bandwidth_hz=band)  # fmt: skip
    assert a.rate_bps[0] == pytest.approx(2e6, rel=1e-12)
    assert a.t_up_s[0] == pytest.approx(0.5, rel=1e-12) and a.e_up_j[0] == pytest.approx(0.1, rel=1e-12)
    assert a.e_cmp_j[0] == pytest.approx(1.0, rel=1e-12) and a.energy_j == pytest.approx(1.1, rel=1e-12)
    assert a.schedule.t_round_s == pytest.approx(1.5, rel=1e-12)


@pytest.mark.parametrize(
    "t_cmp, t_up, message",
    [
        ([1.0, -1.0], [1.0, 1.0], "t_cmp_s[1]=-1.0: must be >= 0"),
        ([1.0, 1.0], [1.0, 0.0], "t_up_s[1]=0.0: must be > 0"),
        ([1.0, 1.0], [1.0], "t_up_s: shape (1,): must match t_cmp_s's (2,)"),
    ],
)
def test_bad_inputs_are_named(t_cmp, t_up, message):
    with pytest.raises(OptimizerInputError, match=re.escape(message)):
        tdma_schedule(t_cmp, t_up)
