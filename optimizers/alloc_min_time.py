"""Least round time of an FDMA uplink: the bandwidth split at which every scheduled device finishes together.

Shi et al., "Joint Device Scheduling and Resource Allocation for Latency Constrained Wireless Federated
Learning" (IEEE TWC 20(1), 2021), sub-problem (a), and the completion-time problem of Yang et al., "Energy
Efficient Federated Learning Over Wireless Communication Networks" (IEEE TWC 20(3), 2021) at a fixed local
accuracy with f = f_max and p = p_max. Neither paper's full text was readable: the equations below follow the
implementation notes (shared/papers/wireless_allocation.md, Shi §4 [DERIVED], Yang §4 and §7.1 [RECALL, CODE]),
so the papers' equation numbers are not given.

Model. Device i computes for ``t_cmp_i`` [s] (``cycles_i / f_i``) and then uploads ``S_i`` [bit] over its own
band ``b_i`` [Hz] at the Shannon rate

    r_i(b) = b * log2(1 + G_i / b),    G_i = g_i * p_i / N0  [Hz]                              (rate)

which is increasing and concave in b, with the limit ``G_i / ln 2`` as b -> infinity. The round lasts
``max_i (t_cmp_i + S_i / r_i(b_i))`` and the problem is

    minimise T  subject to  t_cmp_i + S_i / r_i(b_i) <= T  for every i,   sum_i b_i <= B,  b_i >= 0.

Each upload time falls strictly with b_i, so at the optimum every device finishes at T and the band is used
in full (notes, Shi §4). For a target T device i needs the rate ``S_i / (T - t_cmp_i)``, hence the bandwidth

    b_i(T) = -r ln2 / (W_{-1}(-c e^{-c}) + c),    r = S_i / (T - t_cmp_i),  c = r ln2 / G_i < 1   (Lambert W)

on the lower branch W_{-1} (the principal branch gives the trivial root b = infinity), polished by Newton's
method on ``b ln(1 + G/b) = r ln2``. ``sum_i b_i(T)`` falls strictly in T, so T* is found by bisection between

    T_lo = max_i (t_cmp_i + S_i ln2 / G_i)   (infinite bandwidth; the sum is infinite there)
    T_hi = max_i (t_cmp_i + S_i / r_i(B/n))  (the equal split is feasible)

The returned T is the upper end of the final bracket (relative width ``rtol``) and the returned bandwidths are
``b_i(T)``: every device finishes at T and ``sum b_i <= B``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import lambertw

from optimizers import _checks as chk
from optimizers.errors import InfeasibleError, OptimizerInputError

__all__ = [
    "MinTimeAllocation",
    "min_time_allocation",
    "required_bandwidth_hz",
    "shannon_rate_bps",
]

_LN2 = math.log(2.0)
_NEWTON_STEPS = 3
_MAX_BISECTIONS = 200


@dataclass(frozen=True)
class MinTimeAllocation:
    """The least-time FDMA split. Arrays have one entry per device, in the input's order.

    ``t_round_s`` [s]: the common finish time T; ``bandwidth_hz`` [Hz]: b_i (sum <= B); ``rate_bps`` [bit/s]:
    r_i(b_i); ``t_up_s`` [s]: S_i / r_i; ``t_cmp_s`` [s]: the computation times used.
    """

    t_round_s: float
    bandwidth_hz: np.ndarray
    rate_bps: np.ndarray
    t_up_s: np.ndarray
    t_cmp_s: np.ndarray


def shannon_rate_bps(bandwidth_hz: Any, snr_hz: Any) -> np.ndarray:
    """``b * log2(1 + G / b)`` [bit/s] for bandwidth b [Hz] and ``G = g p / N0`` [Hz] (0 where b = 0)."""
    b = np.asarray(bandwidth_hz, dtype=float)
    g = np.asarray(snr_hz, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = b * np.log1p(g / b) / _LN2
    return np.where(b > 0, out, 0.0)


def required_bandwidth_hz(rate_bps: Any, snr_hz: Any) -> np.ndarray:
    """The bandwidth b [Hz] with ``b log2(1 + G/b) = rate`` (the Lambert-W form of the module docstring).

    ``rate_bps`` >= 0 [bit/s], ``snr_hz`` = g p / N0 > 0 [Hz], broadcast together. ``inf`` where the rate is at
    or above the infinite-bandwidth limit ``G / ln 2``; 0 where the rate is 0.
    """
    r = np.asarray(rate_bps, dtype=float)
    g = np.asarray(snr_hz, dtype=float)
    r, g = np.broadcast_arrays(r, g)
    c = r * _LN2 / g
    ok = (c > 0) & (c < 1)
    b = np.where(c >= 1, np.inf, 0.0)
    if ok.any():
        cc, rr, gg = c[ok], r[ok], g[ok]
        w = lambertw(-cc * np.exp(-cc), k=-1).real
        x = -rr * _LN2 / (w + cc)
        # For c a rounding error below 1, w + c can round to 0 (or change sign): the bandwidth is then beyond
        # any float and is returned as inf.
        x = np.where((w + cc < 0) & np.isfinite(x), x, np.inf)
        fin = np.isfinite(x)
        xf, gf, target = x[fin], gg[fin], rr[fin] * _LN2
        for _ in range(_NEWTON_STEPS):
            # Newton on h(b) = b ln(1 + G/b) - r ln2 (concave, increasing). A step is kept only where it lands
            # at b > 0 and shrinks |h|: near c = 1 (b >> G) the root is ill-conditioned and a full step from
            # the Lambert estimate can overshoot below 0.
            h = xf * np.log1p(gf / xf) - target
            xn = xf - h / _dh(gf / xf)
            with np.errstate(invalid="ignore", divide="ignore"):
                hn = np.abs(xn * np.log1p(gf / xn) - target)
            better = (xn > 0) & (hn < np.abs(h))
            xf = np.where(better, xn, xf)
        x[fin] = xf
        b[ok] = x
    return b


def _dh(y: np.ndarray) -> np.ndarray:
    """``ln(1 + y) - y / (1 + y)`` (the derivative of b ln(1 + G/b) at y = G/b), by its series for small y."""
    series = y * y * (0.5 - y * (2.0 / 3.0 - y * (0.75 - 0.8 * y)))
    return np.where(y < 1e-3, series, np.log1p(y) - y / (1.0 + y))


def _compute_times(t_cmp_s: Any, cycles: Any, cpu_hz: Any) -> np.ndarray:
    if t_cmp_s is not None:
        if cycles is not None or cpu_hz is not None:
            raise OptimizerInputError("t_cmp_s: give either t_cmp_s or cycles with cpu_hz, not both")
        t = chk.one_dimensional(t_cmp_s, "t_cmp_s")
        return chk.require(t, "t_cmp_s", t >= 0, "must be >= 0")
    if cycles is None or cpu_hz is None:
        raise OptimizerInputError("t_cmp_s=None: give t_cmp_s [s], or cycles with cpu_hz [Hz]")
    c = chk.one_dimensional(cycles, "cycles")
    chk.require(c, "cycles", c >= 0, "must be >= 0")
    f = np.broadcast_to(chk.real_array(cpu_hz, "cpu_hz"), c.shape).astype(float)
    chk.require(f, "cpu_hz", f > 0, "must be > 0")
    return c / f


def device_inputs(
    cycles: Any, kappa: Any, f_min_hz: Any, f_max_hz: Any, p_max_w: Any, update_bits: Any, gain: Any
) -> tuple[np.ndarray, ...]:
    """(c, kappa, f_min, f_max, p_max, S, g), each shape (n,): the per-device inputs of the least-energy allocators,
    checked (all > 0, f_min <= f_max) and broadcast over the n devices of ``cycles``."""
    c = chk.one_dimensional(cycles, "cycles")
    c = chk.require(c, "cycles", c > 0, "must be > 0")
    n = c.size
    kap = _per_device(kappa, "kappa", n)
    f_min = _per_device(f_min_hz, "f_min_hz", n)
    f_max = _per_device(f_max_hz, "f_max_hz", n)
    chk.require(f_min, "f_min_hz", f_min <= f_max, "must be <=", other=("f_max_hz", f_max))
    return (c, kap, f_min, f_max, _per_device(p_max_w, "p_max_w", n), _per_device(update_bits, "update_bits", n),
            _per_device(gain, "gain", n))  # fmt: skip


def _per_device(value: Any, name: str, n: int) -> np.ndarray:
    """A positive scalar or length-n array, broadcast to shape (n,)."""
    arr = chk.real_array(value, name)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.size != n):
        raise OptimizerInputError(f"{name}: shape {arr.shape}: must be a scalar or have one entry per device ({n})")
    arr = np.broadcast_to(arr, (n,)).astype(float)
    return chk.require(arr, name, arr > 0, "must be > 0")


def min_time_allocation(
    *,
    update_bits: Any,
    gain: Any,
    p_tx_w: Any,
    n0_w_per_hz: float,
    bandwidth_hz: float,
    t_cmp_s: Any = None,
    cycles: Any = None,
    cpu_hz: Any = None,
    deadline_s: float | None = None,
    rtol: float = 1e-12,
) -> MinTimeAllocation:
    """The FDMA split of ``bandwidth_hz`` at which all devices finish together, as early as possible.

    Per device (scalars broadcast): ``t_cmp_s`` [s] computation time, or ``cycles`` [cycles] with ``cpu_hz``
    [Hz]; ``update_bits`` S_i [bit]; ``gain`` g_i (linear uplink power gain); ``p_tx_w`` p_i [W]. Shared:
    ``n0_w_per_hz`` N0 [W/Hz], ``bandwidth_hz`` B [Hz]. ``rtol``: relative width of the final bisection bracket.

    With ``deadline_s`` given, raises :class:`InfeasibleError` (one line naming the device) when no split lets
    every device finish by it: first a device whose computation alone reaches the deadline, then one that would
    miss it even with the whole band, else (the band too small for all together) the device with the largest
    share at the deadline.
    """
    t_cmp = _compute_times(t_cmp_s, cycles, cpu_hz)
    n = t_cmp.size
    s = _per_device(update_bits, "update_bits", n)
    g = _per_device(gain, "gain", n)
    p = _per_device(p_tx_w, "p_tx_w", n)
    n0 = chk.positive(n0_w_per_hz, "n0_w_per_hz")
    band = chk.positive(bandwidth_hz, "bandwidth_hz")
    rtol = chk.in_range(rtol, "rtol", 1e-15, 1e-2)
    snr = g * p / n0

    if deadline_s is not None:
        deadline = chk.positive(deadline_s, "deadline_s")
        _check_deadline(deadline, t_cmp, s, snr, band)

    def needed(t: float) -> np.ndarray:
        slack = t - t_cmp
        with np.errstate(divide="ignore"):
            rate = np.where(slack > 0, s / slack, np.inf)
        return required_bandwidth_hz(rate, snr)

    lo = float(np.max(t_cmp + s * _LN2 / snr))
    hi = float(np.max(t_cmp + s / shannon_rate_bps(band / n, snr)))
    for _ in range(_MAX_BISECTIONS):
        if hi - lo <= rtol * hi:
            break
        mid = 0.5 * (lo + hi)
        if needed(mid).sum() > band:
            lo = mid
        else:
            hi = mid
    b = needed(hi)
    rate = shannon_rate_bps(b, snr)
    return MinTimeAllocation(t_round_s=hi, bandwidth_hz=b, rate_bps=rate, t_up_s=s / rate, t_cmp_s=t_cmp)


def _check_deadline(deadline: float, t_cmp: np.ndarray, s: np.ndarray, snr: np.ndarray, band: float) -> None:
    """Raise :class:`InfeasibleError` naming a device when the deadline cannot be met (see the caller)."""
    late = np.flatnonzero(t_cmp >= deadline)
    if late.size:
        i = int(late[np.argmax(t_cmp[late])])
        raise InfeasibleError(
            f"device {i} cannot make the deadline deadline_s={deadline!r}: its computation alone takes "
            f"{t_cmp[i]:.6g} s",
            device=i,
        )
    alone = t_cmp + s / shannon_rate_bps(band, snr)
    late = np.flatnonzero(alone > deadline)
    if late.size:
        i = int(late[np.argmax(alone[late])])
        raise InfeasibleError(
            f"device {i} cannot make the deadline deadline_s={deadline!r}: even with the whole band "
            f"bandwidth_hz={band!r} it finishes at {alone[i]:.6g} s",
            device=i,
        )
    need = required_bandwidth_hz(s / (deadline - t_cmp), snr)
    if need.sum() > band:
        i = int(np.argmax(need))
        raise InfeasibleError(
            f"device {i} cannot make the deadline deadline_s={deadline!r}: the devices together need "
            f"{need.sum():.6g} Hz of bandwidth_hz={band!r} (device {i} alone {need[i]:.6g} Hz)",
            device=i,
        )
