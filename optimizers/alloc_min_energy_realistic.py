"""Least energy of one FDMA round under a deadline with the realistic cost model: static power while computing,
circuit power and PA efficiency while uploading, and the attenuated, truncated Shannon link (3GPP TR 36.942
Annex A.2) or Shannon's rate.

It extends Yang et al.'s problem (P-E) at a fixed local accuracy (:mod:`optimizers.alloc_min_energy`, whose
notes and derivation it follows) by the power parts and the link model. Per device i (SI units):

    E_i = P_s c / f + eps c f^2  +  (P_c + p / eta) t_up                        (compute; upload)
    t_up = S / r(b, p),   r = b alpha log2(1 + g p / (N0 b)), at most Thr_max b, 0 below SINR gamma_min
    c / f + t_up <= T,   sum_i b_i <= B,   0 < p <= p_max,   f_min <= f <= f_max

(Shannon's rate is alpha = 1, gamma_min = 0, Thr_max = inf.)

Convexity (derived here). Write the problem in each device's upload time t and band b, the power being the
least that carries S bits in t: ``p = (N0 b / g)(2^y - 1)`` with ``y = S / (alpha t b)``.

- The radiated energy ``(p / eta) t = (N0 / (g eta)) u (2^(S / (alpha u)) - 1)``, ``u = t b``, is a convex
  decreasing function of u; as a function of ``sqrt(u)`` (concave in (t, b)) it is convex decreasing too, so it is
  jointly convex in (t, b) (Yang et al.'s step, with 1 / eta and alpha).
- The SINR floor forbids ``y < y_min = log2(1 + gamma_min)``, i.e. u > S / (alpha y_min), which is not a convex
  set. It is relaxed: beyond that u the device sends at the floor's power ``N0 b gamma_min / g`` for the shorter
  time ``S / (alpha b y_min)``, whose radiated energy is the constant reached at the boundary, and finishes
  earlier (feasible). The radiated energy extended by that constant is still convex and non-increasing in u, and
  the circuit energy of the relaxation (``P_c t``) is at least the true one, so the relaxed optimum is attained by
  a true allocation of the same energy: the relaxation is exact.
- The cap Thr_max is ``t b >= S / Thr_max`` and ``p <= p_max`` is ``b >= b_req(S / (alpha t))`` (Shannon's least
  band for that rate at p_max, alloc_min_time) and, at the floor, ``b <= b_top = g p_max / (N0 gamma_min)``: all
  convex sets in (t, b).
- The compute energy at slack ``v = T - t`` is least at ``f = clip(max(f*, c / v), f_min, f_max)``, with
  ``f* = (P_s / (2 eps))^(1/3)`` the frequency of least energy per cycle (edgefl.fleet.costs), and is a convex
  non-increasing function of v (a partial minimum of the convex ``P_s u + eps c^3 / u^2`` over u <= v).

So the problem is convex and is solved by its dual in the band price lambda [J/Hz], as alloc_min_energy: for a
fixed lambda each device's best band at upload time t is the stationary point ``y = (1 + W_0((lambda eta g /
(N0 t) - 1) / e)) / ln 2``, ``b = S / (alpha t max(y, y_min))``, clipped to its bounds; the resulting convex
function of t is minimised by golden-section search over [S / r_top, T - c / f_max] (``r_top``: the fastest
rate at p_max); the total band falls with lambda, which is found by geometric bisection. Under the truncated link
the band need not bind (lambda = 0, every device at or below its floor's band). Feasibility is decided first by
the min_time solver at f_max and p_max (:class:`InfeasibleError` names the device).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import lambertw

from optimizers import _checks as chk
from optimizers.alloc_min_time import _per_device, device_inputs, min_time_allocation, required_bandwidth_hz
from optimizers.alloc_min_time_truncated import min_time_truncated_allocation
from optimizers.errors import OptimizerInputError

__all__ = ["MinEnergyRealisticAllocation", "min_energy_realistic_allocation"]

_LN2 = math.log(2.0)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_GOLDEN_STEPS = 80
_LAMBDA_STEPS = 300
_LAMBDA_RTOL = 1e-12
_TOP_MARGIN = 1e-12


@dataclass(frozen=True)
class MinEnergyRealisticAllocation:
    """The least-energy round, one entry per device in the input's order: ``energy_j`` [J] the total;
    ``compute_energy_j``, ``upload_energy_j`` [J]; ``bandwidth_hz`` [Hz], ``p_tx_w`` [W], ``cpu_hz`` [Hz];
    ``t_cmp_s``, ``t_up_s`` [s] (their sum <= the deadline); ``price_j_per_hz``: lambda at the answer (0 when the
    band does not bind)."""

    energy_j: float
    compute_energy_j: np.ndarray
    upload_energy_j: np.ndarray
    bandwidth_hz: np.ndarray
    p_tx_w: np.ndarray
    cpu_hz: np.ndarray
    t_cmp_s: np.ndarray
    t_up_s: np.ndarray
    price_j_per_hz: float


def _nonnegative(value: Any, name: str, n: int) -> np.ndarray:
    arr = np.broadcast_to(chk.real_array(value, name), (n,)).astype(float)
    return chk.require(arr, name, arr >= 0, "must be >= 0")


def min_energy_realistic_allocation(
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
    static_power_w: Any = 0.0,
    circuit_power_w: Any = 0.0,
    pa_efficiency: Any = 1.0,
    alpha: float = 1.0,
    snr_min: float = 0.0,
    max_bps_per_hz: float = math.inf,
) -> MinEnergyRealisticAllocation:
    """Least total energy of one round that ends by ``deadline_s`` T [s] (module docstring).

    Per device (scalars broadcast): ``cycles`` c [cycles] > 0, ``kappa`` eps [J s^2/cycle^3], ``f_min_hz`` <=
    ``f_max_hz`` [Hz], ``p_max_w`` [W], ``update_bits`` S [bit], ``gain`` g [linear], ``static_power_w`` P_s [W]
    >= 0, ``circuit_power_w`` P_c [W] >= 0, ``pa_efficiency`` eta in (0, 1]. Shared: ``n0_w_per_hz`` N0 [W/Hz],
    ``bandwidth_hz`` B [Hz]; the link: ``alpha`` in (0, 1], ``snr_min`` gamma_min [linear] >= 0,
    ``max_bps_per_hz`` Thr_max [bit/s/Hz] (Shannon's rate: 1, 0, inf; the truncated link needs gamma_min > 0).
    Raises :class:`InfeasibleError` (one line naming the device) when no allocation meets the deadline.
    """
    c, eps, f_min, f_max, p_max, s, g = device_inputs(cycles, kappa, f_min_hz, f_max_hz, p_max_w, update_bits, gain)
    n = c.size
    p_s = _nonnegative(static_power_w, "static_power_w", n)
    p_c = _nonnegative(circuit_power_w, "circuit_power_w", n)
    eta = _per_device(pa_efficiency, "pa_efficiency", n)
    chk.require(eta, "pa_efficiency", eta <= 1.0, "must be <= 1")
    n0 = chk.positive(n0_w_per_hz, "n0_w_per_hz")
    band = chk.positive(bandwidth_hz, "bandwidth_hz")
    deadline = chk.positive(deadline_s, "deadline_s")
    alpha = chk.in_range(alpha, "alpha", 1e-6, 1.0)
    cap = float(max_bps_per_hz)
    if not cap > 0:
        raise OptimizerInputError(f"max_bps_per_hz={max_bps_per_hz!r}: must be > 0 (inf: no cap)")
    gamma0 = float(snr_min)
    shannon = gamma0 == 0.0 and math.isinf(cap) and alpha == 1.0
    if not shannon and not gamma0 > 0:
        raise OptimizerInputError(f"snr_min={snr_min!r}: must be > 0 for a capped or attenuated link")

    common = dict(cycles=c, cpu_hz=f_max, update_bits=s, gain=g, p_tx_w=p_max, n0_w_per_hz=n0, bandwidth_hz=band,
                  deadline_s=deadline)  # fmt: skip
    if shannon:
        fastest = min_time_allocation(**common)
    else:
        fastest = min_time_truncated_allocation(alpha=alpha, snr_min=gamma0, max_bps_per_hz=cap, **common)
    if fastest.t_round_s > deadline:
        raise OptimizerInputError(f"deadline_s={deadline!r}: must exceed the least round time "
                                  f"{fastest.t_round_s:.12g} s")  # fmt: skip

    big_g = g * p_max / n0  # [Hz]
    y_min = math.log2(1.0 + gamma0)
    if shannon:
        top = np.full(n, np.inf)
        t_lo = s * _LN2 / big_g  # infinite band (excluded)
    else:
        top = big_g / gamma0 * (1.0 - _TOP_MARGIN)
        r_top = top * np.minimum(alpha * np.log1p(big_g / top) / _LN2, cap)
        t_lo = s / r_top
    t_hi = deadline - c / f_max
    f_star = np.cbrt(p_s / (2.0 * eps))
    u_floor = s / (alpha * y_min) if y_min > 0 else np.full(n, np.inf)  # t b beyond which the floor binds

    def band_low(t):
        need = required_bandwidth_hz(s / (alpha * t), big_g)
        return np.maximum(need, s / (t * cap)) if math.isfinite(cap) else need

    def bandwidth(t, lam):
        if lam > 0:
            arg = (lam * eta * g / (n0 * t) - 1.0) / math.e
            w = lambertw(np.maximum(arg, -1.0 / math.e), k=0).real
            y = (1.0 + np.where(np.isfinite(w), w, -1.0)) / _LN2  # scipy's W_0 is nan at the branch point -1/e
        else:
            y = np.zeros_like(t)
        with np.errstate(divide="ignore"):
            b = s / (alpha * t * np.maximum(y, y_min))
        return np.minimum(np.maximum(b, band_low(t)), top)

    def radiated(t, b):
        u = np.minimum(t * b, u_floor)
        with np.errstate(over="ignore"):
            return (n0 / (g * eta)) * u * np.expm1(s * _LN2 / (alpha * u))

    def compute_energy(t):
        f = np.clip(np.maximum(f_star, c / (deadline - t)), f_min, f_max)
        return eps * c * f * f + p_s * c / f

    def phi(t, lam):
        b = bandwidth(t, lam)
        with np.errstate(over="ignore", invalid="ignore"):
            out = compute_energy(t) + p_c * t + radiated(t, b) + lam * b
        return np.where(np.isfinite(out), out, np.inf)

    def best_t(lam):
        lo, hi = t_lo.copy(), t_hi.copy()
        x1, x2 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
        f1, f2 = phi(x1, lam), phi(x2, lam)
        for _ in range(_GOLDEN_STEPS):
            left = f1 <= f2
            hi, lo = np.where(left, x2, hi), np.where(left, lo, x1)
            x1n = np.where(left, hi - _GOLDEN * (hi - lo), x2)
            x2n = np.where(left, x1, lo + _GOLDEN * (hi - lo))
            new = np.where(left, x1n, x2n)
            fnew = phi(new, lam)
            f1, f2 = np.where(left, fnew, f2), np.where(left, f1, fnew)
            x1, x2 = x1n, x2n
        t = np.where(f1 <= f2, x1, x2)
        return np.where(phi(t_hi, lam) < np.minimum(f1, f2), t_hi, t)

    def total_band(lam):
        t = best_t(lam)
        return float(bandwidth(t, lam).sum()), t

    lam_used = 0.0
    total, t = (math.inf, None) if shannon else total_band(0.0)
    if total > band:
        lam_lo, lam_hi = 1e-60, 1e-20
        while total_band(lam_hi)[0] > band and lam_hi < 1e30:
            lam_lo, lam_hi = lam_hi, lam_hi * 1e10
        total, t = total_band(lam_hi)
        if total > band:  # the deadline is within rounding of the least round time: the fastest allocation
            t, lam_hi = None, math.nan
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
        lam_used = lam_hi
    if t is None:
        b, p = fastest.bandwidth_hz, p_max.copy()
    else:
        b = bandwidth(t, lam_used)
        y = np.maximum(s / (alpha * t * b), y_min)  # at the floor: its power, a shorter upload
        p = np.minimum(p_max, (n0 * b / g) * np.expm1(y * _LN2))
    sinr = g * p / (n0 * b)
    rate = b * np.minimum(alpha * np.log1p(sinr) / _LN2, cap)
    t_up = s / rate
    f = np.clip(np.maximum(f_star, c / (deadline - t_up)), f_min, f_max)
    e_cmp = eps * c * f * f + p_s * c / f
    e_up = (p_c + p / eta) * t_up
    return MinEnergyRealisticAllocation(
        energy_j=float(np.sum(e_cmp + e_up)), compute_energy_j=e_cmp, upload_energy_j=e_up, bandwidth_hz=b,
        p_tx_w=p, cpu_hz=f, t_cmp_s=c / f, t_up_s=t_up, price_j_per_hz=lam_used,
    )  # fmt: skip
