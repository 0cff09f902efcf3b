"""Least energy of one FDMA round under a deadline: bandwidth, transmit power and CPU frequency per device.

Yang et al., "Energy Efficient Federated Learning Over Wireless Communication Networks" (IEEE TWC 20(3),
2021), problem (P-E) at a fixed local accuracy (the notes' step (a) of the alternating method; the local
accuracy eta and the round count are outside this function: fold ``v log2(1/eta)`` into ``cycles`` and the
round count into the caller). The paper's full text was not readable; the model and the derivation follow the
implementation notes (shared/papers/wireless_allocation.md, Yang §3-§7.2 [RECALL, CODE obj.m; DERIVED]), so
the labels below are the notes' and the paper's equation numbers are not given.

Model (per round, SI units). Device i runs ``c_i`` cycles at ``f_i`` Hz and uploads ``S_i`` bits over ``b_i`` Hz
at power ``p_i`` W:

    E = sum_i [ kappa_i c_i f_i^2 + p_i t_i ],   t_i = S_i / r_i,   r_i = b_i log2(1 + g_i p_i / (N0 b_i))   (obj.m)
    c_i / f_i + t_i <= T                                                                             (C1)
    sum_i b_i <= B,   0 < p_i <= p_max_i,   f_min_i <= f_i <= f_max_i                                (C3)-(C5)

Structure (notes §7.2a, DERIVED). Energy grows with f, so ``f_i = max(f_min_i, c_i / (T - t_i))``: the lowest
frequency that leaves the upload its time t_i. With the rate met with equality, ``p_i t_i = (N0/g_i) t_i b_i
(2^{S_i/(t_i b_i)} - 1)``, jointly convex in (t_i, b_i); ``p_i <= p_max_i`` is the convex set
``t_i r_i(b_i, p_max_i) >= S_i``, i.e. ``b_i >= b_req(S_i / t_i)`` (the Lambert-W bandwidth of
:mod:`optimizers.alloc_min_time`). The problem is convex in (t, b), and the band is always used in full (upload
energy falls with b), so it is solved by its dual in the bandwidth price lambda [J/Hz]:

- for a fixed lambda each device minimises ``phi_i(t) = kappa c f(t)^2 + min_b [p t + lambda b]`` over
  ``t in (S ln2 N0 / (g p_max), T - c / f_max]``; the inner minimum is at
  ``b = max(S / (t x), b_req(S / t))`` with the spectral efficiency ``x = (1 + W_0((lambda g / (N0 t) - 1) / e))
  / ln 2`` [bit/s/Hz] (stationarity in b; notes §7.2a); phi_i is convex (a partial minimum of a convex
  function) and is minimised by golden-section search, for all devices at once;
- ``sum_i b_i(lambda)`` falls with lambda; lambda is found by geometric bisection so that it equals B, keeping
  the end with ``sum b <= B``.

Feasibility is decided first by :func:`optimizers.alloc_min_time.min_time_allocation` at ``f_max`` and
``p_max``: the deadline can be met at all iff it can be met there; otherwise :class:`InfeasibleError` names the
device. The answer is the global optimum to the tolerance of the two searches (the notes' alternating method
over eta is not part of this function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import lambertw

from optimizers import _checks as chk
from optimizers.alloc_min_time import (
    device_inputs, min_time_allocation, required_bandwidth_hz, shannon_rate_bps,
)  # fmt: skip
from optimizers.errors import OptimizerInputError

__all__ = ["MinEnergyAllocation", "min_energy_allocation"]

_LN2 = math.log(2.0)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_GOLDEN_STEPS = 64  # bracket shrinks to 0.618^64 ~ 4e-14 of its width
_LAMBDA_STEPS = 200
_LAMBDA_RTOL = 1e-10


@dataclass(frozen=True)
class MinEnergyAllocation:
    """The least-energy round. Arrays have one entry per device, in the input's order.

    ``energy_j`` [J]: the total; ``compute_energy_j`` and ``upload_energy_j`` [J]: per device;
    ``bandwidth_hz`` [Hz], ``p_tx_w`` [W], ``cpu_hz`` [Hz], ``t_cmp_s`` and ``t_up_s`` [s]: the allocation and
    its times (``t_cmp_s + t_up_s <= deadline_s``); ``price_j_per_hz``: the bandwidth price lambda at the answer.
    """

    energy_j: float
    compute_energy_j: np.ndarray
    upload_energy_j: np.ndarray
    bandwidth_hz: np.ndarray
    p_tx_w: np.ndarray
    cpu_hz: np.ndarray
    t_cmp_s: np.ndarray
    t_up_s: np.ndarray
    price_j_per_hz: float


def min_energy_allocation(
    *,
    cycles: Any,
    kappa: Any,
    f_min_hz: Any,
    f_max_hz: Any,
    p_max_w: Any,
    update_bits: Any,
    gain: Any,
    n0_w_per_hz: float,
    bandwidth_hz: float,
    deadline_s: float,
) -> MinEnergyAllocation:
    """Least total energy of one round that ends by ``deadline_s`` (the module docstring's problem).

    Per device (scalars broadcast): ``cycles`` c_i [cycles] of computation this round; ``kappa`` [J s^2/cycle^3]
    (compute energy ``kappa c f^2``); ``f_min_hz`` <= ``f_max_hz`` [Hz]; ``p_max_w`` [W]; ``update_bits`` S_i
    [bit]; ``gain`` g_i (linear). Shared: ``n0_w_per_hz`` N0 [W/Hz], ``bandwidth_hz`` B [Hz], ``deadline_s`` T [s].
    Raises :class:`InfeasibleError` (one line naming the device) when no allocation meets the deadline.
    """
    c, kap, f_min, f_max, p_max, s, g = device_inputs(cycles, kappa, f_min_hz, f_max_hz, p_max_w, update_bits, gain)
    n = c.size
    n0 = chk.positive(n0_w_per_hz, "n0_w_per_hz")
    band = chk.positive(bandwidth_hz, "bandwidth_hz")
    deadline = chk.positive(deadline_s, "deadline_s")

    # Feasibility (raises naming the device) and a feasible fallback: everything at its maximum.
    fastest = min_time_allocation(
        cycles=c, cpu_hz=f_max, update_bits=s, gain=g, p_tx_w=p_max, n0_w_per_hz=n0, bandwidth_hz=band,
        deadline_s=deadline,
    )  # fmt: skip
    if fastest.t_round_s > deadline:  # within the bisection's rtol of the deadline
        raise OptimizerInputError(
            f"deadline_s={deadline!r}: must exceed the least round time {fastest.t_round_s:.12g} s"
        )

    snr_max = g * p_max / n0
    t_lo = s * _LN2 / snr_max  # upload time at p_max with infinite band (excluded)
    t_hi = deadline - c / f_max  # > t_lo: the instance is feasible

    def bandwidth(t: np.ndarray, lam: float) -> np.ndarray:
        arg = (lam * g / (n0 * t) - 1.0) / math.e
        x = (1.0 + lambertw(arg, k=0).real) / _LN2
        return np.maximum(s / (t * x), required_bandwidth_hz(s / t, snr_max))

    def upload_energy(t: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (n0 / g) * t * b * np.expm1(s * _LN2 / (t * b))

    def compute_energy(t: np.ndarray) -> np.ndarray:
        f = np.maximum(f_min, c / (deadline - t))
        return kap * c * f * f

    def phi(t: np.ndarray, lam: float) -> np.ndarray:
        b = bandwidth(t, lam)
        with np.errstate(over="ignore", invalid="ignore"):
            out = compute_energy(t) + upload_energy(t, b) + lam * b
        return np.where(np.isfinite(out), out, np.inf)

    def best_t(lam: float) -> np.ndarray:
        lo, hi = t_lo.copy(), t_hi.copy()
        x1 = hi - _GOLDEN * (hi - lo)
        x2 = lo + _GOLDEN * (hi - lo)
        f1, f2 = phi(x1, lam), phi(x2, lam)
        for _ in range(_GOLDEN_STEPS):
            left = f1 <= f2  # the minimum lies in [lo, x2]
            hi = np.where(left, x2, hi)
            lo = np.where(left, lo, x1)
            x2n = np.where(left, x1, lo + _GOLDEN * (hi - lo))
            x1n = np.where(left, hi - _GOLDEN * (hi - lo), x2)
            f2n = np.where(left, f1, np.nan)
            f1n = np.where(left, np.nan, f2)
            new = np.where(left, x1n, x2n)
            fnew = phi(new, lam)
            x1, x2 = x1n, x2n
            f1 = np.where(left, fnew, f1n)
            f2 = np.where(left, f2n, fnew)
        # The end of the bracket is a candidate too (the minimum may sit at t_hi, where f = f_max).
        t = np.where(f1 <= f2, x1, x2)
        return np.where(phi(hi, lam) < np.minimum(f1, f2), hi, t)

    def total_band(lam: float) -> tuple[float, np.ndarray]:
        t = best_t(lam)
        return float(bandwidth(t, lam).sum()), t

    lam_lo, lam_hi = 1e-60, 1e-20
    while total_band(lam_hi)[0] > band and lam_hi < 1e30:
        lam_lo, lam_hi = lam_hi, lam_hi * 1e10
    total, t = total_band(lam_hi)
    if total > band:  # the deadline is within rounding of the least round time: take the fastest allocation
        t, b, p = fastest.t_up_s, fastest.bandwidth_hz, p_max
    else:
        for _ in range(_LAMBDA_STEPS):
            if lam_hi <= lam_lo * (1 + _LAMBDA_RTOL):
                break
            mid = math.sqrt(lam_lo * lam_hi)
            total_mid, t_mid = total_band(mid)
            if total_mid > band:
                lam_lo = mid
            else:
                lam_hi, t = mid, t_mid
        b = bandwidth(t, lam_hi)
        p = np.minimum(p_max, (n0 / g) * b * np.expm1(s * _LN2 / (t * b)))
    t_up = s / shannon_rate_bps(b, g * p / n0)
    f = np.minimum(f_max, np.maximum(f_min, c / (deadline - t_up)))
    e_cmp = kap * c * f * f
    e_up = p * t_up
    return MinEnergyAllocation(
        energy_j=float(np.sum(e_cmp + e_up)), compute_energy_j=e_cmp, upload_energy_j=e_up, bandwidth_hz=b,
        p_tx_w=p, cpu_hz=f, t_cmp_s=c / f, t_up_s=t_up, price_j_per_hz=lam_hi,
    )  # fmt: skip
