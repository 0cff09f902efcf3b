"""Least weighted time and energy of one FDMA round: Yang et al.'s weighted objective over the round's length.

Yang et al., "Energy Efficient Federated Learning Over Wireless Communication Networks" (arXiv 1911.02417 v1,
the weighted form of the later IEEE TWC 20(3), 2021 paper): minimise ``w T + (1 - w) E`` [s, J] where T is the
round's length and E its energy (the notes, shared/papers/wireless_allocation.md, Yang §0 [TEXT, abstract] and
the code's ``weight*T + (1-weight)*E`` [CODE main_6/7/8]; the paper's equation numbers are not given). The
per-round form is the whole-training form divided by the round count, which does not move the optimum.

For a fixed length T the inner problem is :func:`optimizers.alloc_min_energy.min_energy_allocation` with
deadline T, whose least energy ``E*(T)`` is convex and non-increasing in T: the problem is jointly convex in
(t, b, T) (``kappa c^3 / (T - t)^2`` is convex where ``T > t``), and a partial minimum of a convex function is
convex [DERIVED]. So ``w T + (1 - w) E*(T)`` is convex in T on ``(T_min, inf)``, T_min the least round time
(:func:`optimizers.alloc_min_time.min_time_allocation` at f_max and p_max), and is minimised by a bracket that
doubles the length until the objective rises, then Brent's bounded search (scipy ``minimize_scalar``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy.optimize import minimize_scalar

from optimizers import _checks as chk
from optimizers.alloc_min_energy import MinEnergyAllocation, min_energy_allocation
from optimizers.alloc_min_time import min_time_allocation
from optimizers.errors import OptimizerInputError

__all__ = ["WeightedAllocation", "min_weighted_allocation", "min_weighted_realistic_allocation", "weighted_search"]

_MAX_DOUBLINGS = 60
_XATOL_REL = 1e-3  # Brent's absolute tolerance on T, relative to T_min


@dataclass(frozen=True)
class WeightedAllocation:
    """The least-weighted round: ``length_s`` [s] the round length T chosen, ``objective`` the value of
    ``w T + (1 - w) E`` at it, ``allocation`` the least-energy allocation of that length (its arrays)."""

    length_s: float
    objective: float
    allocation: MinEnergyAllocation


def min_weighted_allocation(
    *,
    weight: float,
    cycles: Any,
    kappa: Any,
    f_min_hz: Any,
    f_max_hz: Any,
    p_max_w: Any,
    update_bits: Any,
    gain: Any,
    n0_w_per_hz: float,
    bandwidth_hz: float,
    xatol_rel: float = _XATOL_REL,
) -> WeightedAllocation:
    """Least ``weight * T + (1 - weight) * E`` over the round length T [s] and the allocation (bandwidth, power and
    CPU frequency per device) that ends by T with the least energy E [J].

    ``weight`` w in (0, 1] (w = 1: the least round time; a small w a long, frugal round). The other arguments are
    :func:`~optimizers.alloc_min_energy.min_energy_allocation`'s, without the deadline. ``xatol_rel``: the search's
    tolerance on T relative to the least round time.
    """
    w = chk.in_range(weight, "weight", 0.0, 1.0)
    if w <= 0.0:
        raise OptimizerInputError(f"weight={weight!r}: must be in (0, 1] (0 lets the round grow without bound)")
    xatol_rel = chk.in_range(xatol_rel, "xatol_rel", 1e-12, 1e-2)
    devices = dict(cycles=cycles, kappa=kappa, f_min_hz=f_min_hz, f_max_hz=f_max_hz, p_max_w=p_max_w,
                   update_bits=update_bits, gain=gain, n0_w_per_hz=n0_w_per_hz, bandwidth_hz=bandwidth_hz)  # fmt: skip
    fastest = min_time_allocation(
        cycles=cycles, cpu_hz=f_max_hz, update_bits=update_bits, gain=gain, p_tx_w=p_max_w,
        n0_w_per_hz=n0_w_per_hz, bandwidth_hz=bandwidth_hz,
    )  # fmt: skip
    t_min = fastest.t_round_s * (1.0 + 1e-9)  # just above the least round time: min_energy needs T > T_min

    return weighted_search(w, lambda t: min_energy_allocation(**devices, deadline_s=t), t_min, xatol_rel, weight)


def weighted_search(
    w: float, least_energy: Any, t_min: float, xatol_rel: float, weight: Any = None
) -> WeightedAllocation:
    """Least ``w T + (1 - w) E*(T)`` over T > ``t_min`` [s], where ``least_energy(T)`` is the least-energy
    allocation of a round of length T (with ``energy_j``) and E*(T) is convex and non-increasing (module docstring):
    a bracket doubling from ``t_min``, then Brent's bounded search to ``xatol_rel * t_min``."""
    solved: dict[float, Any] = {}  # each length's allocation, solved once

    def objective(t: float) -> float:
        if t not in solved:
            solved[t] = least_energy(t)
        return w * t + (1.0 - w) * solved[t].energy_j

    if w == 1.0:  # the objective is T itself: the least round time (with the least energy at that length)
        return WeightedAllocation(length_s=t_min, objective=t_min, allocation=least_energy(t_min))
    lo, hi = t_min, 2.0 * t_min
    f_lo, f_hi = objective(lo), objective(hi)
    for _ in range(_MAX_DOUBLINGS):  # convex: once it rises from lo to hi, the minimum lies in [t_min, hi]
        if f_hi >= f_lo:
            break
        lo, f_lo = hi, f_hi
        hi, f_hi = 2.0 * hi, objective(2.0 * hi)
    res = minimize_scalar(objective, bounds=(t_min, hi), method="bounded",
                          options={"xatol": xatol_rel * t_min})  # fmt: skip
    best_t, best_f = float(res.x), float(res.fun)
    for t, f in ((t_min, objective(t_min)), (lo, f_lo)):  # the ends of the bracket are candidates too
        if f < best_f:
            best_t, best_f = t, f
    alloc = solved[best_t] if best_t in solved else least_energy(best_t)
    if not math.isfinite(best_f):
        shown = w if weight is None else weight
        raise OptimizerInputError(f"weight={shown!r}: the weighted objective is not finite")
    return WeightedAllocation(length_s=best_t, objective=best_f, allocation=alloc)


def min_weighted_realistic_allocation(
    *,
    weight: float,
    cycles: Any,
    kappa: Any,
    f_min_hz: Any,
    f_max_hz: Any,
    p_max_w: Any,
    update_bits: Any,
    gain: Any,
    n0_w_per_hz: float,
    bandwidth_hz: float,
    static_power_w: Any = 0.0,
    circuit_power_w: Any = 0.0,
    pa_efficiency: Any = 1.0,
    alpha: float = 1.0,
    snr_min: float = 0.0,
    max_bps_per_hz: float = math.inf,
    xatol_rel: float = _XATOL_REL,
) -> WeightedAllocation:
    """:func:`min_weighted_allocation` under the realistic cost model: the inner least energy of a length T is
    :func:`optimizers.alloc_min_energy_realistic.min_energy_realistic_allocation` (truncated Shannon link, static
    and circuit power, PA efficiency; its arguments), T_min the least round time under that link
    (:func:`optimizers.alloc_min_time_truncated.min_time_truncated_allocation` at f_max and p_max). E*(T) is convex
    in T for the same reason as above: that solver's problem (its SINR floor relaxed as its docstring shows) is
    jointly convex in the upload times, the bands and T [DERIVED]."""
    from optimizers.alloc_min_energy_realistic import min_energy_realistic_allocation
    from optimizers.alloc_min_time_truncated import min_time_truncated_allocation

    w = chk.in_range(weight, "weight", 0.0, 1.0)
    if w <= 0.0:
        raise OptimizerInputError(f"weight={weight!r}: must be in (0, 1] (0 lets the round grow without bound)")
    xatol_rel = chk.in_range(xatol_rel, "xatol_rel", 1e-12, 1e-2)
    link = dict(alpha=alpha, snr_min=snr_min, max_bps_per_hz=max_bps_per_hz)
    devices = dict(cycles=cycles, kappa=kappa, f_min_hz=f_min_hz, f_max_hz=f_max_hz, p_max_w=p_max_w,
                   update_bits=update_bits, gain=gain, n0_w_per_hz=n0_w_per_hz, bandwidth_hz=bandwidth_hz,
                   static_power_w=static_power_w, circuit_power_w=circuit_power_w, pa_efficiency=pa_efficiency,
                   **link)  # fmt: skip
    fastest = min_time_truncated_allocation(
        cycles=cycles, cpu_hz=f_max_hz, update_bits=update_bits, gain=gain, p_tx_w=p_max_w,
        n0_w_per_hz=n0_w_per_hz, bandwidth_hz=bandwidth_hz, **link,
    )  # fmt: skip
    t_min = fastest.t_round_s * (1.0 + 1e-9)
    return weighted_search(w, lambda t: min_energy_realistic_allocation(**devices, deadline_s=t), t_min, xatol_rel,
                           weight)  # fmt: skip
