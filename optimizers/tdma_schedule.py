"""Least round time of a TDMA uplink: devices compute in parallel, then upload one after another on the whole band.

Yang et al., "Energy Efficient Federated Learning Over Wireless Communication Networks" (IEEE TWC 20(3), 2021),
the TDMA baseline (implementation notes, shared/papers/wireless_allocation.md, Yang §7.4 [CODE
``CompletionMinTDMA.m``; RECALL]): each user uploads its ``S_i`` bits alone on the whole band ``B``, so its upload
takes ``t_up_i = S_i / (B log2(1 + g_i p_i / (N0 B)))``. The public code charges a round as the compute time plus
the sum of the upload times (every user computing the same cycles); with devices whose computations end at
different times ``t_cmp_i`` the channel is a single server whose jobs are released at ``t_cmp_i``, and the round
ends when the last upload does. The order that ends it earliest is the order of release (Jackson's rule for
one machine with release dates, 1|r_j|C_max): each upload starts at ``max(t_cmp_i, end of the previous upload)``.
So the round time lies between ``max_i t_cmp_i + min_i t_up_i`` and ``max_i t_cmp_i + sum_i t_up_i`` (the code's
charge when every compute time is equal).

Compute and upload times both fall with the CPU frequency and the transmit power, so the least TDMA round is the
one at ``f_max`` and ``p_max`` in release order (:func:`tdma_max_allocation`). The paper's least-energy TDMA
under a deadline (fmincon on the sum of upload times in the code) is not solved here: its upload order is a
choice among K! orders, each a convex problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from optimizers import _checks as chk
from optimizers.alloc_min_time import _per_device, shannon_rate_bps
from optimizers.errors import OptimizerInputError

__all__ = ["TdmaAllocation", "TdmaSchedule", "tdma_max_allocation", "tdma_schedule"]


@dataclass(frozen=True)
class TdmaSchedule:
    """One TDMA round's uploads. ``order``: device indices in upload order; ``start_s`` and ``end_s`` [s]: each
    device's upload slot (input order); ``t_round_s`` [s]: the end of the last upload."""

    order: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    t_round_s: float


@dataclass(frozen=True)
class TdmaAllocation:
    """The least-time TDMA round at ``f_max`` and ``p_max``, arrays in input order: ``rate_bps`` [bit/s] on the
    whole band, ``t_cmp_s`` and ``t_up_s`` [s], ``e_cmp_j`` (``kappa c f_max^2``) and ``e_up_j`` (``p_max t_up``)
    [J], ``schedule`` (:class:`TdmaSchedule`); ``energy_j`` [J] the total."""

    rate_bps: np.ndarray
    t_cmp_s: np.ndarray
    t_up_s: np.ndarray
    e_cmp_j: np.ndarray
    e_up_j: np.ndarray
    schedule: TdmaSchedule
    energy_j: float


def tdma_schedule(t_cmp_s: Any, t_up_s: Any) -> TdmaSchedule:
    """The serial upload schedule that ends earliest: uploads in order of computation end (ties by index), each
    starting when its computation has ended and the previous upload is done. ``t_cmp_s`` >= 0 and ``t_up_s`` > 0
    [s], one entry per device."""
    t_cmp = chk.one_dimensional(t_cmp_s, "t_cmp_s")
    chk.require(t_cmp, "t_cmp_s", t_cmp >= 0, "must be >= 0")
    t_up = chk.one_dimensional(t_up_s, "t_up_s")
    if t_up.shape != t_cmp.shape:
        raise OptimizerInputError(f"t_up_s: shape {t_up.shape}: must match t_cmp_s's {t_cmp.shape}")
    chk.require(t_up, "t_up_s", t_up > 0, "must be > 0")
    order = np.argsort(t_cmp, kind="stable")
    start = np.empty_like(t_cmp)
    end = np.empty_like(t_cmp)
    free = 0.0
    for i in order:
        start[i] = max(free, t_cmp[i])
        end[i] = free = start[i] + t_up[i]
    return TdmaSchedule(order=order, start_s=start, end_s=end, t_round_s=float(free))


def tdma_max_allocation(
    *,
    cycles: Any,
    cpu_hz: Any,
    kappa: Any,
    p_tx_w: Any,
    update_bits: Any,
    gain: Any,
    n0_w_per_hz: float,
    bandwidth_hz: float,
) -> TdmaAllocation:
    """The least-time TDMA round: every device computes ``cycles`` [cycles] at ``cpu_hz`` [Hz] (its f_max) and
    uploads ``update_bits`` [bit] alone on the whole band ``bandwidth_hz`` [Hz] at ``p_tx_w`` [W] (its p_max), with
    linear gain ``gain`` and noise PSD ``n0_w_per_hz`` [W/Hz]; ``kappa`` [J s^2/cycle^3] prices the compute
    energy ``kappa c f^2``. Scalars broadcast to the devices."""
    c = chk.one_dimensional(cycles, "cycles")
    c = chk.require(c, "cycles", c >= 0, "must be >= 0")
    n = c.size
    f = _per_device(cpu_hz, "cpu_hz", n)
    kap = _per_device(kappa, "kappa", n)
    p = _per_device(p_tx_w, "p_tx_w", n)
    s = _per_device(update_bits, "update_bits", n)
    g = _per_device(gain, "gain", n)
    n0 = chk.positive(n0_w_per_hz, "n0_w_per_hz")
    band = chk.positive(bandwidth_hz, "bandwidth_hz")
    rate = shannon_rate_bps(np.full(n, band), g * p / n0)
    t_cmp, t_up = c / f, s / rate
    e_cmp, e_up = kap * c * f * f, p * t_up
    return TdmaAllocation(rate_bps=rate, t_cmp_s=t_cmp, t_up_s=t_up, e_cmp_j=e_cmp, e_up_j=e_up,
                          schedule=tdma_schedule(t_cmp, t_up), energy_j=float(np.sum(e_cmp + e_up)))  # fmt: skip
