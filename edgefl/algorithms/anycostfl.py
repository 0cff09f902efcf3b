"""AnycostFL (Li et al., INFOCOM 2023): each round, every selected device gets the (alpha, beta, f) that
maximises its learning gain alpha^4 beta under the round's deadline T_max and its energy budget E_max.

This module plans rounds with :func:`optimizers.anycost.solve_anycost` (closed form, eqs. (19)-(26)). The
learning side, elastic model shrinking, the gradient codec and all-in-one aggregation (eq. (5)), is issue #6;
until it lands the method runs with ``learning = "surrogate"`` only (the scenario refuses ``"torch"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from edgefl.algorithms.base import ClientUpdate, DeviceJob, JobTable, Method, RoundContext, RoundPlan
from edgefl.learning.config import steps_per_round

if TYPE_CHECKING:
    from edgefl.learning.workload import State

__all__ = ["AnycostFL"]

_NOT_YET = "anycostfl trains for real only once issue #6 (shrinking, codec, eq. (5) aggregation) has landed"


class AnycostFL(Method):
    """Per-round, per-device (alpha, beta, f) from AnycostFL's closed form; infeasible devices sit out.

    The optimizer sees one device's whole local computation as ``c_i = samples_per_round_i x FLOPs/sample
    / FLOPs-per-cycle_i`` cycles (its ``tau D_i W``; only that product enters eqs. (6)-(7)), the round's
    uplink rate, ``T_max = deadline_s - downlink_s`` and ``E_max``. A job trains a submodel of width
    ``sqrt(alpha)`` (so about ``alpha`` of the FLOPs and parameters) and plans ``alpha beta S`` upload bits.
    """

    name = "anycostfl"

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        from optimizers.anycost import AnycostDevices, solve_anycost

        dev, fleet, wl = ctx.selected, ctx.fleet, self.workload
        mcfg = self.scenario.method
        t_max = float(ctx.t_max_s) - self.scenario.round.downlink_s
        cycles = wl.flops_per_sample(1.0) * wl.samples_per_round(dev) / fleet.flops_per_cycle[dev]
        sol = solve_anycost(
            AnycostDevices(
                samples=cycles,  # with cycles_per_sample = 1: c_i = tau D_i W in cycles
                eps=fleet.energy_coeff[dev],
                f_min_hz=fleet.f_min_hz[dev],
                f_max_hz=fleet.f_max_hz[dev],
                e_max_j=ctx.e_max_j[dev],
                rate_bps=ctx.rate_bps[dev],
                p_tx_w=fleet.tx_power_w[dev],
            ),
            t_max_s=t_max,
            cycles_per_sample=1.0,
            update_bits=float(wl.update_bits),
            alpha_min=mcfg.alpha_min,
            beta_max=mcfg.beta_max,
        )
        ok = sol.feasible
        alpha, beta = sol.alpha[ok], sol.beta[ok]
        jobs = JobTable.build(
            dev[ok], cpu_hz=sol.f_hz[ok], width=np.sqrt(alpha), alpha=alpha, beta=beta,
            local_steps=steps_per_round(wl.train_config, wl.n_samples[dev[ok]]),
            bits_planned=alpha * beta * float(wl.update_bits),
            t_cmp_planned_s=sol.t_cmp_s[ok], t_com_planned_s=sol.t_com_s[ok],
            e_cmp_planned_j=sol.e_cmp_j[ok], e_com_planned_j=sol.e_com_j[ok],
        )  # fmt: skip
        return RoundPlan(jobs, dev[~ok], sol.reason[~ok].astype(object))

    def client_update(self, job: DeviceJob, global_state: State, round_index: int) -> ClientUpdate:
        raise NotImplementedError(_NOT_YET)

    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        raise NotImplementedError(_NOT_YET)
