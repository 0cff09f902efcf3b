"""FedAvg (McMahan et al. 2017): K selected clients train E local epochs/steps; updates weighted by |D_i|."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from edgefl.algorithms.base import ClientUpdate, DeviceJob, JobTable, Method, RoundContext, RoundPlan
from edgefl.learning.config import steps_per_round
from edgefl.system import compute_energy_j, compute_time_s, deadline_frequency_hz, upload_energy_j, upload_time_s

if TYPE_CHECKING:  # torch is imported only when a model really trains (not in surrogate runs)
    from edgefl.learning.workload import State, TrainResult

__all__ = ["FedAvg", "cpu_hz_without_deadline"]


def _uncompressed(device: int, res: TrainResult) -> ClientUpdate:
    """Device ``device``'s trained update sent as float32, weighted by |D_i|."""
    from edgefl.learning.workload import state_bits

    return ClientUpdate(
        device=device, payload=res.update, weight=float(res.n_samples), bits=float(state_bits(res.update)),
        flops=res.flops, steps=res.steps, train_loss=res.train_loss,
    )  # fmt: skip


def cpu_hz_without_deadline(cpu_policy: str, fleet) -> np.ndarray:
    """FedAvg's CPU frequency per device [Hz] when no deadline binds, shape (N,): ``f_min`` under
    ``cpu_policy = "min_energy"``, else ``f_max``. (With a deadline, min_energy takes per round the lowest
    frequency that meets it; planners that cost FedAvg ahead of time, such as CC-FedAvg's battery
    probabilities and Luo's measured step costs, use ``f_max`` then.)"""
    return fleet.f_min_hz if cpu_policy == "min_energy" else fleet.f_max_hz


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
        policy = self.scenario.method.cpu_policy
        if policy == "min_energy" and ctx.t_max_s is not None:
            slack = ctx.t_max_s - self.scenario.round.downlink_s - t_com
            f, _ = deadline_frequency_hz(cycles, slack, fleet.f_min_hz[dev], fleet.f_max_hz[dev])
        else:
            f = cpu_hz_without_deadline(policy, fleet)[dev]
        steps = steps_per_round(wl.train_config, wl.n_samples[dev])
        if fleet.has_step_costs:  # Luo et al.'s setups: costs per SGD step and per upload are given
            t_cmp, e_cmp = steps * fleet.step_time_s[dev], steps * fleet.step_energy_j[dev]
            t_com, e_com = fleet.comm_time_s[dev], fleet.comm_energy_j[dev]
        else:
            t_cmp = compute_time_s(cycles, f)
            e_cmp = compute_energy_j(cycles, f, fleet.energy_coeff[dev])
            e_com = upload_energy_j(fleet.tx_power_w[dev], t_com)
        e_total = e_cmp + e_com
        ok = e_total <= ctx.e_max_j[dev]
        jobs = JobTable.build(
            dev[ok], cpu_hz=f[ok], width=width, local_steps=steps[ok], bits_planned=bits,
            t_cmp_planned_s=t_cmp[ok], t_com_planned_s=t_com[ok], e_cmp_planned_j=e_cmp[ok], e_com_planned_j=e_com[ok],
        )  # fmt: skip
        reasons = [f"energy: needs {e:.4g} J > E_max {b:.4g} J" for e, b in zip(e_total[~ok], ctx.e_max_j[dev][~ok])]
        return RoundPlan(jobs, dev[~ok], np.array(reasons, dtype=object))

    def client_update(self, job: DeviceJob, global_state: State, round_index: int) -> ClientUpdate:
        return self.train_update(job, global_state, round_index)

    def client_updates(self, jobs: JobTable, global_state: State, round_index: int) -> list[ClientUpdate] | None:
        """All jobs trained at once when the workload can vectorise them (full width, fixed SGD steps; see
        :meth:`~edgefl.learning.workload.Workload.train_many`). Subclasses that change the local work (their
        own :meth:`client_update`) train one by one."""
        if type(self).client_update is not FedAvg.client_update or np.any(jobs.width != self.scenario.model.width):
            return None
        results = self.workload.train_many(jobs.device, global_state, round_index=round_index)
        if results is None:
            return None
        return [_uncompressed(int(d), res) for d, res in zip(jobs.device, results)]

    def train_update(
        self, job: DeviceJob, global_state: State, round_index: int, *, steps: int | None = None
    ) -> ClientUpdate:
        """Train the job for real (``steps`` SGD steps if given, else the scenario's epochs/steps)."""
        res = self.workload.train(job.device, global_state, round_index=round_index, width=job.width, steps=steps)
        return _uncompressed(job.device, res)

    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        from edgefl.algorithms.aggregate import fedavg_step

        return fedavg_step(global_state, [u.payload for u in updates], [u.weight for u in updates])
