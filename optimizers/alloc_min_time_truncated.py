"""Least round time of an FDMA uplink under the attenuated, truncated Shannon link (3GPP TR 36.942 Annex A.2): the
bandwidth split at which every device finishes together, as early as possible.

The problem is Shi et al.'s common finish (:mod:`optimizers.alloc_min_time`) with the rate of the link model that
3GPP system studies use: with ``G_i = g_i p_i / N0`` [Hz] the SINR in a band b is ``G_i / b`` and

    r_i(b) = 0                              if G_i / b <  gamma_min       (below the SINR floor)
    r_i(b) = alpha b log2(1 + G_i / b)      if gamma_min <= G_i / b < gamma_max
    r_i(b) = Thr_max b                      if G_i / b >= gamma_max       (the highest code: the cap)

with ``gamma_max = 2^(Thr_max / alpha) - 1`` (where ``alpha log2(1 + gamma_max) = Thr_max``).

Monotonicity. Let ``b_cap = G / gamma_max`` and ``b_top = G / gamma_min`` (b_cap < b_top when gamma_min <
gamma_max). On (0, b_cap] the rate is the line ``Thr_max b``; on [b_cap, b_top] it is ``alpha`` times Shannon's
``b log2(1 + G/b)``, which is increasing in b; the two pieces meet at b_cap, so r is continuous and strictly
increasing on (0, b_top], with its largest value ``r_top = alpha b_top log2(1 + gamma_min)`` at b_top; above
b_top the SINR falls under the floor and the rate drops to 0. So a device cannot go faster than ``S / r_top``
however much band it gets, more band than b_top is useless (worse: it stops the link), and the least band that
gives a rate r in (0, r_top] is unique:

    b(r) = r / Thr_max                          if r <= Thr_max b_cap   (the cap binds)
    b(r) = Shannon's band for the rate r / alpha  otherwise            (Lambert W, alloc_min_time)

Every device with ``g p > 0`` reaches a positive rate (any band below b_top); a zero gain or power is refused as
input. With ``b_i(T) = b(S_i / (T - t_cmp_i))``, the band the devices need to finish by T is continuous and
strictly decreasing in T on [T_lo, inf), ``T_lo = max_i (t_cmp_i + S_i / r_top_i)`` (below T_lo some device
cannot finish at any band). Hence T* = T_lo when ``sum_i b_i(T_lo) <= B`` (the SINR floor binds: the band is not
used in full), else the T with ``sum_i b_i(T) = B``, found by bisection between T_lo and the equal split's finish
(each device's band ``min(B / n, b_top_i)``, which is feasible). The returned T is the upper end of the final
bracket (relative width ``rtol``), and the bands are ``b_i(T)`` (``sum b_i <= B``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from optimizers import _checks as chk
from optimizers.alloc_min_time import _compute_times, _per_device, required_bandwidth_hz
from optimizers.errors import InfeasibleError

__all__ = ["MinTimeTruncatedAllocation", "min_time_truncated_allocation", "truncated_rate_bps"]

_MAX_BISECTIONS = 200
#: b_top is taken this relative margin inside G / gamma_min, so that the SINR computed at it in floating point is
#: not rounded below the floor (the rate would then be 0).
_TOP_MARGIN = 1e-12


@dataclass(frozen=True)
class MinTimeTruncatedAllocation:
    """The least-time split. Arrays have one entry per device, in the input's order.

    ``t_round_s`` [s]: the common finish T; ``bandwidth_hz`` [Hz]: b_i (sum <= B); ``rate_bps`` [bit/s]: r_i(b_i);
    ``t_up_s`` [s]: S_i / r_i; ``t_cmp_s`` [s]: the computation times; ``top_hz`` [Hz]: b_top_i, the most band with
    a positive rate; ``floor_binds``: True when T = T_lo (some device is at its fastest and the band is not used
    in full)."""

    t_round_s: float
    bandwidth_hz: np.ndarray
    rate_bps: np.ndarray
    t_up_s: np.ndarray
    t_cmp_s: np.ndarray
    top_hz: np.ndarray
    floor_binds: bool


def truncated_rate_bps(bandwidth_hz: Any, snr_hz: Any, *, alpha: float, snr_min: float, max_bps_per_hz: float):
    """The rate [bit/s] of the module docstring at band b [Hz] (> 0) and ``G = g p / N0`` [Hz]; ``snr_min``
    gamma_min [linear], ``max_bps_per_hz`` Thr_max [bit/s/Hz]."""
    b = np.asarray(bandwidth_hz, dtype=float)
    sinr = np.asarray(snr_hz, dtype=float) / b
    eff = np.minimum(alpha * np.log1p(sinr) / math.log(2.0), max_bps_per_hz)
    return np.where(sinr < snr_min, 0.0, b * eff)


def min_time_truncated_allocation(
    *,
    update_bits: Any,
    gain: Any,
    p_tx_w: Any,
    n0_w_per_hz: float,
    bandwidth_hz: float,
    alpha: float,
    snr_min: float,
    max_bps_per_hz: float,
    t_cmp_s: Any = None,
    cycles: Any = None,
    cpu_hz: Any = None,
    deadline_s: float | None = None,
    rtol: float = 1e-12,
) -> MinTimeTruncatedAllocation:
    """The FDMA split of ``bandwidth_hz`` B [Hz] at which all devices finish together, as early as possible, under
    the truncated Shannon link (module docstring).

    Per device (scalars broadcast): ``t_cmp_s`` [s], or ``cycles`` with ``cpu_hz`` [Hz]; ``update_bits`` S_i
    [bit]; ``gain`` g_i [linear]; ``p_tx_w`` p_i [W]. Shared: ``n0_w_per_hz`` N0 [W/Hz]; the link's ``alpha``
    [-] in (0, 1], ``snr_min`` gamma_min [linear] > 0, ``max_bps_per_hz`` Thr_max [bit/s/Hz] > 0 (TR 36.942
    Table A.2.1). ``rtol``: relative width of the final bisection bracket.

    With ``deadline_s`` given, raises :class:`InfeasibleError` (one line naming the device) when no split lets
    every device finish by it: a device whose computation alone reaches it, one that misses it even at its
    fastest (band b_top), else the device with the largest share of a band too small for all.
    """
    t_cmp = _compute_times(t_cmp_s, cycles, cpu_hz)
    n = t_cmp.size
    s = _per_device(update_bits, "update_bits", n)
    g = _per_device(gain, "gain", n)
    p = _per_device(p_tx_w, "p_tx_w", n)
    n0 = chk.positive(n0_w_per_hz, "n0_w_per_hz")
    band = chk.positive(bandwidth_hz, "bandwidth_hz")
    alpha = chk.in_range(alpha, "alpha", 1e-6, 1.0)
    snr_min = chk.positive(snr_min, "snr_min")
    cap = chk.positive(max_bps_per_hz, "max_bps_per_hz")
    rtol = chk.in_range(rtol, "rtol", 1e-15, 1e-2)
    snr_max = 2.0 ** (cap / alpha) - 1.0
    link = dict(alpha=alpha, snr_min=snr_min, max_bps_per_hz=cap)
    big_g = g * p / n0
    top = big_g / snr_min * (1.0 - _TOP_MARGIN)
    r_top = truncated_rate_bps(top, big_g, **link)
    r_cap = cap * big_g / max(snr_max, snr_min)  # the rate up to which the cap binds (all of (0, r_top] if it is
    # below the floor's spectral efficiency)

    def needed(t: float) -> np.ndarray:
        slack = t - t_cmp
        with np.errstate(divide="ignore"):
            rate = np.where(slack > 0, s / slack, np.inf)
        rate = np.where((rate > r_top) & (rate <= r_top * (1.0 + 1e-12)), r_top, rate)  # T_lo's own rounding
        shannon = required_bandwidth_hz(np.minimum(rate, r_top) / alpha, big_g)
        b = np.where(rate <= r_cap, rate / cap, np.minimum(shannon, top))
        return np.where(rate > r_top, np.inf, b)

    t_fast = t_cmp + s / r_top
    if deadline_s is not None:
        _check_deadline(chk.positive(deadline_s, "deadline_s"), t_cmp, t_fast, needed, band)
    lo = float(np.max(t_fast))
    if needed(lo).sum() <= band:
        hi, floor = lo, True
    else:
        floor = False
        hi = float(np.max(t_cmp + s / truncated_rate_bps(np.minimum(band / n, top), big_g, **link)))
        for _ in range(_MAX_BISECTIONS):
            if hi - lo <= rtol * hi:
                break
            mid = 0.5 * (lo + hi)
            if needed(mid).sum() > band:
                lo = mid
            else:
                hi = mid
    b = needed(hi)
    rate = truncated_rate_bps(b, big_g, **link)
    return MinTimeTruncatedAllocation(t_round_s=hi, bandwidth_hz=b, rate_bps=rate, t_up_s=s / rate, t_cmp_s=t_cmp,
                                      top_hz=top, floor_binds=floor)  # fmt: skip


def _check_deadline(deadline: float, t_cmp: np.ndarray, t_fast: np.ndarray, needed, band: float) -> None:
    """Raise :class:`InfeasibleError` naming a device when the deadline cannot be met (see the caller)."""
    late = np.flatnonzero(t_cmp >= deadline)
    if late.size:
        i = int(late[np.argmax(t_cmp[late])])
        raise InfeasibleError(f"device {i} cannot make the deadline deadline_s={deadline!r}: its computation alone "
                              f"takes {t_cmp[i]:.6g} s", device=i)  # fmt: skip
    late = np.flatnonzero(t_fast > deadline)
    if late.size:
        i = int(late[np.argmax(t_fast[late])])
        raise InfeasibleError(f"device {i} cannot make the deadline deadline_s={deadline!r}: at its fastest (the "
                              f"most band above its SINR floor) it finishes at {t_fast[i]:.6g} s", device=i)  # fmt: skip
    need = needed(deadline)
    if need.sum() > band:
        i = int(np.argmax(need))
        raise InfeasibleError(f"device {i} cannot make the deadline deadline_s={deadline!r}: the devices together "
                              f"need {need.sum():.6g} Hz of bandwidth_hz={band!r} (device {i} alone {need[i]:.6g} "
                              "Hz)", device=i)  # fmt: skip
