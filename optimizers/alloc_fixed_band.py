"""Least energy of one FDMA round under a deadline with each device's bandwidth given: transmit power and CPU
frequency only.

The EB-FDMA baseline of Yang et al., "Energy Efficient Federated Learning Over Wireless Communication Networks"
(IEEE TWC 20(3), 2021) in the implementation notes' clean form (shared/papers/wireless_allocation.md, Yang §7.4:
(P-E) with ``b_k = B/K`` fixed and everything else optimised [CODE for the baseline's name; the definition is the
notes' choice]), at a fixed local accuracy like :mod:`optimizers.alloc_min_energy`, whose model it shares:

    E_i = kappa_i c_i f_i^2 + p_i t_i,   t_i = S_i / (b_i log2(1 + g_i p_i / (N0 b_i))),   c_i / f_i + t_i <= T,
    0 < p_i <= p_max_i,   f_min_i <= f_i <= f_max_i.

With b_i fixed the devices no longer share anything, so each is solved alone over its upload time t: the rate
met with equality gives ``p t = (N0 b / g) t (2^{S/(t b)} - 1)`` (convex and falling in t), the deadline gives
``f = max(f_min, c / (T - t))`` (compute energy ``kappa c f^2`` convex and rising in t), so

    E_i(t) = kappa c max(f_min, c / (T - t))^2 + (N0 b / g) t (2^{S/(t b)} - 1)

is convex on ``[S / r_i(b_i, p_max_i), T - c / f_max]`` (p <= p_max at the left end, f <= f_max at the right)
and is minimised by golden-section search for all devices at once. A device whose interval is empty cannot
make the deadline on its band: :class:`InfeasibleError` names it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from optimizers import _checks as chk
from optimizers.alloc_min_energy import MinEnergyAllocation
from optimizers.alloc_min_time import _per_device, device_inputs, shannon_rate_bps
from optimizers.errors import InfeasibleError

__all__ = ["min_energy_fixed_bandwidth"]

_LN2 = math.log(2.0)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_GOLDEN_STEPS = 80  # 0.618^80 ~ 2e-17 of the interval: to float resolution


def min_energy_fixed_bandwidth(
    *,
    cycles: Any,
    kappa: Any,
    f_min_hz: Any,
    f_max_hz: Any,
    p_max_w: Any,
    update_bits: Any,
    gain: Any,
    n0_w_per_hz: float,
    bandwidth_hz: Any,
    deadline_s: float,
) -> MinEnergyAllocation:
    """Least total energy of a round that ends by ``deadline_s`` [s] with device i on ``bandwidth_hz[i]`` [Hz]
    (a scalar: every device on that band). Per device (scalars broadcast): ``cycles`` [cycles], ``kappa``
    [J s^2/cycle^3], ``f_min_hz`` <= ``f_max_hz`` [Hz], ``p_max_w`` [W], ``update_bits`` [bit], ``gain``
    (linear); ``n0_w_per_hz`` N0 [W/Hz]. ``price_j_per_hz`` of the answer is NaN (no band is shared)."""
    c, kap, f_min, f_max, p_max, s, g = device_inputs(cycles, kappa, f_min_hz, f_max_hz, p_max_w, update_bits, gain)
    n = c.size
    b = _per_device(bandwidth_hz, "bandwidth_hz", n)
    n0 = chk.positive(n0_w_per_hz, "n0_w_per_hz")
    deadline = chk.positive(deadline_s, "deadline_s")

    t_lo = s / shannon_rate_bps(b, g * p_max / n0)  # the upload at p_max
    t_hi = deadline - c / f_max  # the computation at f_max
    late = np.flatnonzero(t_lo > t_hi)
    if late.size:
        i = int(late[np.argmax((t_lo - t_hi)[late])])
        raise InfeasibleError(
            f"device {i} cannot make the deadline deadline_s={deadline!r} on its bandwidth_hz={b[i]!r}: at f_max "
            f"and p_max it finishes at {c[i] / f_max[i] + t_lo[i]:.6g} s",
            device=i,
        )

    def energy(t: np.ndarray) -> np.ndarray:
        f = np.maximum(f_min, c / (deadline - t))
        return kap * c * f * f + (n0 * b / g) * t * np.expm1(s * _LN2 / (t * b))

    lo, hi = t_lo.copy(), t_hi.copy()
    x1, x2 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    e1, e2 = energy(x1), energy(x2)
    for _ in range(_GOLDEN_STEPS):
        left = e1 <= e2  # the minimum lies in [lo, x2]
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        new = np.where(left, hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo))
        e_new = energy(new)
        x1, x2, e1, e2 = (np.where(left, new, x2), np.where(left, x1, new), np.where(left, e_new, e2),
                          np.where(left, e1, e_new))  # fmt: skip
    # the ends of the interval are candidates too (the minimum may sit at p_max or at f_max)
    cands = np.stack([x1, x2, t_lo, t_hi])
    t = cands[np.argmin(energy(cands), axis=0), np.arange(n)]
    p = np.minimum(p_max, (n0 * b / g) * np.expm1(s * _LN2 / (t * b)))
    t_up = s / shannon_rate_bps(b, g * p / n0)
    f = np.minimum(f_max, np.maximum(f_min, c / (deadline - t_up)))
    e_cmp, e_up = kap * c * f * f, p * t_up
    return MinEnergyAllocation(
        energy_j=float(np.sum(e_cmp + e_up)), compute_energy_j=e_cmp, upload_energy_j=e_up, bandwidth_hz=b,
        p_tx_w=p, cpu_hz=f, t_cmp_s=c / f, t_up_s=t_up, price_j_per_hz=math.nan,
    )  # fmt: skip
