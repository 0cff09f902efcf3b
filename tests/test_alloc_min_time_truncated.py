"""Least-time FDMA split under the truncated Shannon link (optimizers/alloc_min_time_truncated.py) against an
independent reference on random small instances, hand cases for the cap and the SINR floor, and deadline
infeasibility naming the device (issue #36, points 5 and 1 under physics = "realistic").

Reference: the rate is the channel's own (channel.truncated_shannon_rate_bps, 3GPP TR 36.942 A.2, the function the
rounds charge with), used only as a black box: the most band with a positive rate by bisection on "rate > 0", each
device's least band for a rate by brentq on the rate, the common finish by brentq on sum_i b_i(T) = B (no closed
form, no Lambert W). Units: SI (s, bit, W, W/Hz, Hz).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from channel import TRUNCATED_SHANNON, truncated_shannon_rate_bps
from optimizers.alloc_min_time_truncated import min_time_truncated_allocation
from optimizers.errors import InfeasibleError

#: Issue #36's bar for min_time: worst relative gap of T to the reference.
GAP_REL = 1e-4
#: Slack of the checks that the bands fit the cell and every device finishes by T (floating-point rounding only).
FIT_REL = 1e-9
N_INSTANCES = 100
UP = TRUNCATED_SHANNON["uplink"]
LINK = dict(alpha=UP.alpha, snr_min=10 ** (UP.snr_min_db / 10), max_bps_per_hz=UP.max_bps_per_hz)


def rate(b: float, g: float, p: float, n0: float) -> float:
    return float(truncated_shannon_rate_bps(b, g, p, n0, direction="uplink"))


def random_instance(rng: np.random.Generator) -> dict:
    """1-5 devices: distance 10 m-3 km under 128.1 + 37.6 log10(d/km) with 8 dB shadowing, p 0-23 dBm, noise
    -174 to -134 dBm/Hz, compute 0-2 s, S 0.1-10 Mbit, B 0.1-50 MHz: the cap, the Shannon part and the SINR floor
    all occur."""
    n = int(rng.integers(1, 6))
    d_km = 10 ** rng.uniform(-2, math.log10(3), n)
    gain = 10 ** (-(128.1 + 37.6 * np.log10(d_km) + rng.normal(0, 8, n)) / 10)
    return dict(
        t_cmp_s=rng.uniform(0, 2, n), update_bits=float(10 ** rng.uniform(5, 7)), gain=gain,
        p_tx_w=10 ** (rng.uniform(0, 23, n) / 10) * 1e-3, n0_w_per_hz=10 ** (rng.uniform(-174, -134) / 10) * 1e-3,
        bandwidth_hz=float(10 ** rng.uniform(5, 7.7)),
    )  # fmt: skip


def reference(inst: dict) -> float:
    t, s, band, n0 = inst["t_cmp_s"], inst["update_bits"], inst["bandwidth_hz"], inst["n0_w_per_hz"]
    devs = list(zip(t, inst["gain"], inst["p_tx_w"]))
    tops = []
    for _, g, p in devs:  # the most band with a positive rate: "rate > 0" holds below it, fails above
        lo, hi = 1e-6, 1e18
        for _ in range(200):
            mid = math.sqrt(lo * hi) if hi / lo > 4 else 0.5 * (lo + hi)
            lo, hi = (mid, hi) if rate(mid, g, p, n0) > 0 else (lo, mid)
        tops.append(lo)
    fastest = [ti + s / rate(top, g, p, n0) for (ti, g, p), top in zip(devs, tops)]

    def band_for(r: float, g: float, p: float, top: float) -> float:
        if r >= rate(top, g, p, n0):
            return top
        low = 0.5 * r / UP.max_bps_per_hz  # the rate never exceeds Thr_max b, so it is below r there
        return brentq(lambda b: rate(b, g, p, n0) - r, low, top, xtol=1e-300, rtol=1e-13, maxiter=500)

    def excess(T: float) -> float:
        return sum(band_for(s / (T - ti), g, p, top) for (ti, g, p), top in zip(devs, tops)) - band

    lo = max(fastest)
    if excess(lo) <= 0:
        return lo
    hi = lo + 1.0
    while excess(hi) > 0:
        hi = lo + 2 * (hi - lo)
    return brentq(excess, lo, hi, xtol=1e-300, rtol=1e-12, maxiter=500)


@pytest.mark.slow  # 2-3 s: the quick tier keeps this file's other checks
def test_random_instances_match_the_reference():
    rng = np.random.default_rng(36)
    gaps, floors, caps, shannons = [], 0, 0, 0
    for _ in range(N_INSTANCES):
        inst = random_instance(rng)
        sol = min_time_truncated_allocation(**inst, **LINK)
        ref = reference(inst)
        gaps.append(abs(sol.t_round_s - ref) / ref)
        b = sol.bandwidth_hz
        assert b.sum() <= inst["bandwidth_hz"] * (1 + FIT_REL)
        charged = np.array([rate(bi, g, p, inst["n0_w_per_hz"]) for bi, g, p in zip(b, inst["gain"], inst["p_tx_w"])])
        assert np.all(inst["t_cmp_s"] + inst["update_bits"] / charged <= sol.t_round_s * (1 + FIT_REL))
        sinr = inst["gain"] * inst["p_tx_w"] / (inst["n0_w_per_hz"] * b)
        floors += sol.floor_binds
        caps += bool(np.any(UP.alpha * np.log2(1 + sinr) >= UP.max_bps_per_hz))
        shannons += bool(np.any(UP.alpha * np.log2(1 + sinr) < UP.max_bps_per_hz * (1 - 1e-9)))
    assert max(gaps) <= GAP_REL, f"worst relative gap {max(gaps):.3g}"
    assert min(floors, caps, shannons) >= 5, (floors, caps, shannons)  # every regime is exercised


def test_one_device_under_the_cap_uses_the_whole_band():
    # G / B far above gamma_max: rate = Thr_max B, so T = t_cmp + S / (Thr_max B) (TR 36.942 A.2's top code).
    sol = min_time_truncated_allocation(t_cmp_s=[0.5], update_bits=4e6, gain=1e-6, p_tx_w=0.1, n0_w_per_hz=4e-21,
                                        bandwidth_hz=1e6, **LINK)  # fmt: skip
    assert sol.t_round_s == pytest.approx(0.5 + 4e6 / (2.0 * 1e6), rel=1e-10)
    assert sol.bandwidth_hz[0] == pytest.approx(1e6, rel=1e-10)


def test_one_device_at_the_sinr_floor_leaves_band_unused():
    # G = g p / N0 = 1e6 Hz, gamma_min = 0.1: above b_top = 1e7 Hz the rate is 0, so with B = 5e7 Hz the device
    # takes b_top and its rate is alpha b_top log2(1.1).
    g, p, n0 = 1e-14, 0.1, 1e-21
    sol = min_time_truncated_allocation(t_cmp_s=[0.0], update_bits=1e6, gain=g, p_tx_w=p, n0_w_per_hz=n0,
                                        bandwidth_hz=5e7, **LINK)  # fmt: skip
    top = g * p / n0 / 0.1
    assert sol.floor_binds
    assert sol.bandwidth_hz[0] == pytest.approx(top, rel=1e-9)
    assert sol.t_round_s == pytest.approx(1e6 / (0.4 * top * math.log2(1.1)), rel=1e-9)


def test_a_device_below_its_floor_by_the_deadline_is_named():
    # device 1 at G = 1e4 Hz: its fastest upload of 1e6 bit takes 1e6 / (0.4 * 1e5 * log2 1.1) = 182 s
    with pytest.raises(InfeasibleError, match=r"^device 1 cannot make the deadline deadline_s=10.0: at its fastest"):
        min_time_truncated_allocation(t_cmp_s=[0.1, 0.1], update_bits=1e6, gain=[1e-8, 1e-16], p_tx_w=0.1,
                                      n0_w_per_hz=1e-21, bandwidth_hz=1e6, deadline_s=10.0, **LINK)  # fmt: skip
