"""Shared planning for compression baselines under AnycostFL's budgets (AnycostFL Sec. V-B: STC, QSGD, FedHQ).

Every device trains the full model (``c`` cycles) and spends what T_max and E_max leave on upload bits:

    bits(f) = min( r (T_max - c/f),  r (E_max - eps f^2 c) / P ),   f in [f_min, f_max]

(AnycostFL eqs. (6)-(9)). The first term grows with f, the second falls, so the best f is where they cross, or
an end of [f_min, f_max]; it is found by vectorised bisection. That f is also the lowest frequency that meets
the deadline after uploading ``bits``. The planned bits are the device's budget; the method then picks the
largest setting of its own knob (sparsity, levels) whose *real encoded size* fits them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from edgefl.algorithms.base import ClientUpdate, DeviceJob, JobTable, Method, RoundContext, RoundPlan
from edgefl.learning.config import steps_per_round
from edgefl.system import compute_energy_j, compute_time_s, upload_energy_j, upload_time_s

if TYPE_CHECKING:
    from edgefl.compression.codec import Compressed
    from edgefl.learning.workload import State, TrainResult

__all__ = ["UploadBudget", "upload_budget", "BudgetedMethod"]

_BISECT_STEPS = 100


@dataclass(frozen=True)
class UploadBudget:
    """Per device, shape (n,): frequency [Hz], affordable upload bits (floored), planned costs, feasibility."""

    f_hz: np.ndarray
    bits: np.ndarray
    t_cmp_s: np.ndarray
    t_com_s: np.ndarray
    e_cmp_j: np.ndarray
    e_com_j: np.ndarray
    feasible: np.ndarray
    reason: np.ndarray


def upload_budget(
    *, cycles: np.ndarray, eps: np.ndarray, f_min_hz: np.ndarray, f_max_hz: np.ndarray, e_max_j: np.ndarray,
    rate_bps: np.ndarray, p_tx_w: np.ndarray, t_max_s: float, min_bits: np.ndarray | float = 1.0,
    max_bits: np.ndarray | float = math.inf,
) -> UploadBudget:  # fmt: skip
    """Frequency maximising the affordable upload bits after computing ``cycles`` (shape (n,)), and those bits.

    ``t_max_s`` [s] (inf: no deadline), ``e_max_j`` [J] (inf: no budget). A device whose best budget is below
    ``min_bits`` (its method's smallest useful payload) is infeasible, with the reason. Bits are capped at
    ``max_bits`` (the f is then still the one of the cap-free optimum, the lowest meeting the deadline).
    """
    c, eps = np.asarray(cycles, float), np.asarray(eps, float)
    lo, hi = np.asarray(f_min_hz, float), np.asarray(f_max_hz, float)
    e_max, r, p = np.asarray(e_max_j, float), np.asarray(rate_bps, float), np.asarray(p_tx_w, float)

    def time_bits(f):
        return r * (t_max_s - c / f) if math.isfinite(t_max_s) else np.full(f.shape, np.inf)

    def energy_bits(f):
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(e_max), r * (e_max - eps * f * f * c) / p, np.inf)

    at_min = time_bits(lo) >= energy_bits(lo)  # energy binds already at f_min: f_min is best
    at_max = ~at_min & (time_bits(hi) <= energy_bits(hi))  # time binds even at f_max
    a, b = lo.copy(), hi.copy()
    for _ in range(_BISECT_STEPS):  # crossing of an increasing and a decreasing function
        mid = 0.5 * (a + b)
        up = time_bits(mid) < energy_bits(mid)
        a, b = np.where(up, mid, a), np.where(up, b, mid)
    f = np.where(at_min, lo, np.where(at_max, hi, b))  # b: the side where energy binds, time is met
    bits = np.floor(np.minimum(time_bits(f), energy_bits(f)))
    bits = np.minimum(bits, max_bits)
    t_cmp = compute_time_s(c, f)
    e_cmp = compute_energy_j(c, f, eps)
    reason = np.full(c.shape, "", dtype=object)
    reason[bits < min_bits] = "upload budget left by T_max and E_max is below the smallest useful payload"
    reason[bits <= 0] = "computing the model within T_max exceeds E_max (no frequency meets both)"
    reason[np.isfinite(e_max) & (compute_energy_j(c, lo, eps) >= e_max)] = "computing the model exceeds E_max at f_min"
    reason[math.isfinite(t_max_s) & (c / hi >= t_max_s)] = "computing the model exceeds T_max at f_max"
    feasible = reason == ""
    bits = np.where(feasible, bits, np.nan)
    t_com = upload_time_s(bits, r)
    return UploadBudget(f, bits, t_cmp, t_com, e_cmp, upload_energy_j(p, t_com), feasible, reason)


class BudgetedMethod(Method):
    """A full-model method whose knob is the compressed size: plans with :func:`upload_budget`.

    Subclasses give :meth:`min_payload_bits` and build payloads of at most ``job.bits_planned`` bits.
    The plan records ``alpha = 1`` and ``beta = bits / S`` (the planned compression rate).
    """

    def min_payload_bits(self) -> float:
        """The smallest useful payload [bits] (a device that cannot afford it sits out)."""
        return 1.0

    @cached_property
    def _min_bits(self) -> float:
        # min_payload_bits depends only on the model's shape: computed once per run
        return float(self.min_payload_bits())

    def packed_update(self, job: DeviceJob, res: TrainResult, packed: Compressed) -> ClientUpdate:
        """A compressed full-model update: the decoded update the server applies (``packed.update``) and the
        number of kept kernels, charged the real encoded size ``packed.bits``."""
        return ClientUpdate(
            device=job.device, payload={"update": packed.update, "kept": packed.kept_kernels},
            weight=float(res.n_samples), bits=float(packed.bits), flops=res.flops, steps=res.steps,
            train_loss=res.train_loss,
        )  # fmt: skip

    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        """FedAvg of the decoded updates, weighted by |D_i| (a method with its own rule overrides this)."""
        from edgefl.algorithms.aggregate import fedavg_step

        return fedavg_step(global_state, [u.payload["update"] for u in updates], [u.weight for u in updates])

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        dev, fleet, wl = ctx.selected, ctx.fleet, self.workload
        t_max = math.inf if ctx.t_max_s is None else float(ctx.t_max_s) - self.scenario.round.downlink_s
        s_bits = float(wl.update_bits)
        cycles = wl.flops_per_sample() * wl.samples_per_round(dev) / fleet.flops_per_cycle[dev]
        b = upload_budget(
            cycles=cycles, eps=fleet.energy_coeff[dev], f_min_hz=fleet.f_min_hz[dev], f_max_hz=fleet.f_max_hz[dev],
            e_max_j=ctx.e_max_j[dev], rate_bps=ctx.rate_bps[dev], p_tx_w=fleet.tx_power_w[dev], t_max_s=t_max,
            min_bits=self._min_bits, max_bits=2 * s_bits + 65536,  # more than any payload of the model
        )  # fmt: skip
        ok = b.feasible
        jobs = JobTable.build(
            dev[ok], cpu_hz=b.f_hz[ok], width=self.scenario.model.width, alpha=1.0, beta=b.bits[ok] / s_bits,
            local_steps=steps_per_round(wl.train_config, wl.n_samples[dev[ok]]), bits_planned=b.bits[ok],
            t_cmp_planned_s=b.t_cmp_s[ok], t_com_planned_s=b.t_com_s[ok], e_cmp_planned_j=b.e_cmp_j[ok],
            e_com_planned_j=b.e_com_j[ok],
        )  # fmt: skip
        return RoundPlan(jobs, dev[~ok], b.reason[~ok].astype(object))
