"""FedAvg (McMahan et al. 2017): K selected clients train E local epochs/steps; updates weighted by |D_i|."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgefl.algorithms.aggregate import apply_update, weighted_mean_update
from edgefl.algorithms.base import ClientUpdate, DeviceJob, Method, RoundContext, RoundPlan, Skip
from edgefl.learning.workload import State, state_bits
from edgefl.system import compute_energy_j, compute_time_s, upload_energy_j, upload_time_s

__all__ = ["FedAvg"]


class FedAvg(Method):
    """Full model, uncompressed float32 update, CPU at ``f_max`` (``cpu_policy="max"``) or at the lowest
    frequency that still meets the deadline (``"min_energy"``, f_min without a deadline).

    A selected device whose planned energy exceeds its per-round budget E_max sits the round out
    (reason recorded); FedAvg has no knob to make it cheaper.
    """

    name = "fedavg"

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        dev = ctx.selected
        fleet = ctx.fleet
        wl = self.workload
        width = self.scenario.model.width
        cycles = wl.flops_per_sample(width) * wl.samples_per_round(dev) / fleet.flops_per_cycle[dev]
        bits = float(wl.update_bits)
        t_com = upload_time_s(bits, ctx.rate_bps[dev])
        f = fleet.f_max_hz[dev].copy()
        if self.scenario.method.cpu_policy == "min_energy":
            if ctx.t_max_s is None:
                f = fleet.f_min_hz[dev].copy()
            else:
                slack = ctx.t_max_s - self.scenario.round.downlink_s - t_com
                with np.errstate(divide="ignore", invalid="ignore"):
                    need = np.where(slack > 0, cycles / slack, np.inf)
                f = np.clip(need, fleet.f_min_hz[dev], fleet.f_max_hz[dev])
        t_cmp = compute_time_s(cycles, f)
        e_cmp = compute_energy_j(cycles, f, fleet.energy_coeff[dev])
        e_com = upload_energy_j(fleet.tx_power_w[dev], t_com)
        steps = self._planned_steps(dev)
        jobs, skipped = [], []
        for j, d in enumerate(dev):
            e_total = e_cmp[j] + e_com[j]
            if e_total > ctx.e_max_j[d]:
                skipped.append(Skip(int(d), f"energy: needs {e_total:.4g} J > E_max {ctx.e_max_j[d]:.4g} J"))
                continue
            jobs.append(
                DeviceJob(
                    device=int(d),
                    cpu_hz=float(f[j]),
                    width=width,
                    local_steps=int(steps[j]),
                    bits_planned=bits,
                    t_cmp_planned_s=float(t_cmp[j]),
                    t_com_planned_s=float(t_com[j]),
                    e_cmp_planned_j=float(e_cmp[j]),
                    e_com_planned_j=float(e_com[j]),
                )
            )
        return RoundPlan(jobs=tuple(jobs), skipped=tuple(skipped))

    def _planned_steps(self, dev: np.ndarray) -> np.ndarray:
        cfg = self.workload.train_config
        if cfg.steps > 0:
            return np.full(dev.shape, cfg.steps)
        n = self.workload.n_samples[dev]
        return cfg.epochs * -(-n // cfg.batch_size)

    def client_update(self, job: DeviceJob, global_state: State, round_index: int) -> ClientUpdate:
        res = self.workload.train(job.device, global_state, round_index=round_index, width=job.width)
        return ClientUpdate(
            device=job.device,
            payload=res.update,
            weight=float(res.n_samples),
            bits=float(state_bits(res.update)),
            flops=res.flops,
            steps=res.steps,
            train_loss=res.train_loss,
        )

    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        if not updates:
            return global_state
        mean = weighted_mean_update([u.payload for u in updates], [u.weight for u in updates])
        return apply_update(global_state, mean)
