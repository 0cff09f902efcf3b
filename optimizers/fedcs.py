"""FedCS client selection: Nishio and Yonetani, "Client Selection for Federated Learning with Heterogeneous
Resources in Mobile Edge" (IEEE ICC 2019), problem (1) and its greedy heuristic (Algorithm 2).

The paper's full text was not readable: the model follows the implementation notes
(shared/papers/wireless_allocation.md, FedCS §3-§4 [RECALL, structure matching the SelecEval code; DERIVED]).

Time model (SI units). Selected clients start their update together after the model distribution; uploads are
serialised in the schedule's order, each on the whole uplink, each starting once its client has finished its
update and the previous upload has ended:

    Theta_0 = 0,   Theta_i = max(Theta_{i-1}, t_UD_{k_i}) + t_UL_{k_i}                      (notes §3, eq. (2) region)

Problem (1): the largest ordered set S with ``T_cs + T_d(S) + Theta_|S| + T_agg < T_round`` (strict, as the
notes recall it). ``T_d(S)`` is the distribution time: a constant, or the multicast at the slowest selected
client's throughput, ``Z / min_{k in S} theta_k`` (notes §8.1; pass ``distribution_bits`` and
``throughput_bps``).

Greedy (Algorithm 2): repeatedly take the remaining client with the least added time
``T_d(S + k) - T_d(S) + max(0, t_UD_k - Theta) + t_UL_k`` (ties: the smaller t_UL, then the lower index); keep it
when the round still ends before the deadline, else drop it for good; stop when no client remains.
:func:`fedcs_optimal` is the exact optimum by enumeration (for small sets): for a fixed set the earliest-release
order (ascending t_UD) minimises Theta (1|r_j|C_max), so every subset is scored in that order.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from optimizers import _checks as chk
from optimizers.errors import OptimizerInputError

__all__ = ["fedcs_greedy", "fedcs_optimal", "upload_finish_times"]

#: Largest candidate set :func:`fedcs_optimal` enumerates (2^n subsets).
MAX_EXHAUSTIVE = 20


def upload_finish_times(t_update_s: Any, t_upload_s: Any, order: Any) -> np.ndarray:
    """Theta_1..Theta_|S| [s] for clients ``order`` (indices) uploading one after another (the recursion above)."""
    t_ud = np.asarray(t_update_s, dtype=float)
    t_ul = np.asarray(t_upload_s, dtype=float)
    theta, out = 0.0, []
    for k in order:
        theta = max(theta, float(t_ud[k])) + float(t_ul[k])
        out.append(theta)
    return np.array(out)


def _inputs(t_update_s, t_upload_s, deadline_s, distribution_bits, throughput_bps, overhead_s):
    t_ud = chk.one_dimensional(t_update_s, "t_update_s")
    chk.require(t_ud, "t_update_s", t_ud >= 0, "must be >= 0")
    t_ul = chk.one_dimensional(t_upload_s, "t_upload_s")
    if t_ul.size != t_ud.size:
        raise OptimizerInputError(f"t_upload_s: shape {t_ul.shape}: must match t_update_s {t_ud.shape}")
    chk.require(t_ul, "t_upload_s", t_ul > 0, "must be > 0")
    deadline = chk.positive(deadline_s, "deadline_s")
    overhead = chk.at_least(overhead_s, "overhead_s", 0.0)
    if (distribution_bits is None) != (throughput_bps is None):
        raise OptimizerInputError("distribution_bits: give it together with throughput_bps, or neither")
    if distribution_bits is None:
        return t_ud, t_ul, deadline, overhead, None
    z = chk.at_least(distribution_bits, "distribution_bits", 0.0)
    theta = chk.one_dimensional(throughput_bps, "throughput_bps")
    if theta.size != t_ud.size:
        raise OptimizerInputError(f"throughput_bps: shape {theta.shape}: must match t_update_s {t_ud.shape}")
    chk.require(theta, "throughput_bps", theta > 0, "must be > 0")
    return t_ud, t_ul, deadline, overhead, (z, theta)


def fedcs_greedy(
    t_update_s: Any,
    t_upload_s: Any,
    *,
    deadline_s: float,
    distribution_bits: float | None = None,
    throughput_bps: Any = None,
    overhead_s: float = 0.0,
) -> list[int]:
    """FedCS's greedy selection: the ordered client indices (the upload schedule), as in the module docstring.

    ``t_update_s`` [s] and ``t_upload_s`` [s] per candidate; ``deadline_s`` T_round [s]; ``overhead_s`` [s]
    is ``T_cs + T_agg`` (default 0) plus any fixed distribution time; ``distribution_bits`` Z [bit] with
    ``throughput_bps`` [bit/s] per candidate adds the multicast time ``Z / min theta`` over the selected set.
    """
    t_ud, t_ul, deadline, overhead, dist = _inputs(
        t_update_s, t_upload_s, deadline_s, distribution_bits, throughput_bps, overhead_s
    )
    remaining = list(range(t_ud.size))
    chosen: list[int] = []
    theta, slowest = 0.0, np.inf  # Theta of the chosen schedule; min throughput over it

    def t_dist(rate: float) -> float:
        return 0.0 if dist is None or not np.isfinite(rate) else dist[0] / rate

    while remaining:
        def added(k: int) -> tuple[float, float, int]:
            rate = slowest if dist is None else min(slowest, float(dist[1][k]))
            extra = t_dist(rate) - t_dist(slowest) + max(0.0, t_ud[k] - theta) + t_ul[k]
            return (extra, float(t_ul[k]), k)

        x = min(remaining, key=added)
        remaining.remove(x)
        rate = slowest if dist is None else min(slowest, float(dist[1][x]))
        theta_new = max(theta, float(t_ud[x])) + float(t_ul[x])
        if overhead + t_dist(rate) + theta_new < deadline:
            chosen.append(x)
            theta, slowest = theta_new, rate
    return chosen


def fedcs_optimal(
    t_update_s: Any,
    t_upload_s: Any,
    *,
    deadline_s: float,
    distribution_bits: float | None = None,
    throughput_bps: Any = None,
    overhead_s: float = 0.0,
) -> list[int]:
    """A largest feasible schedule by enumerating every subset (at most ``MAX_EXHAUSTIVE`` candidates), each in
    ascending-t_UD order (optimal for a fixed set). Same arguments as :func:`fedcs_greedy`; ties between sets of
    the same size go to the smaller finish time, then to the lexicographically first set."""
    t_ud, t_ul, deadline, overhead, dist = _inputs(
        t_update_s, t_upload_s, deadline_s, distribution_bits, throughput_bps, overhead_s
    )
    n = t_ud.size
    if n > MAX_EXHAUSTIVE:
        raise OptimizerInputError(f"t_update_s: {n} candidates: exhaustive search takes at most {MAX_EXHAUSTIVE}")
    for size in range(n, 0, -1):
        best: tuple[float, list[int]] | None = None
        for subset in itertools.combinations(range(n), size):
            order = sorted(subset, key=lambda k: (t_ud[k], k))
            end = overhead + upload_finish_times(t_ud, t_ul, order)[-1]
            if dist is not None:
                end += dist[0] / float(np.min(dist[1][list(subset)]))
            if end < deadline and (best is None or end < best[0]):
                best = (end, order)
        if best is not None:
            return best[1]
    return []
