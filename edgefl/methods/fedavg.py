"""FedAvg (McMahan et al. 2017): K selected clients train E local epochs/steps; updates weighted by |D_i|."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

from edgefl.methods.base import (
    ClientUpdate, DenseUpdate, JobTable, LocalTraining, Method, Needs, RoundContext, RoundPlan, TrainJob,
)  # fmt: skip
from edgefl.learning.config import steps_per_round
from edgefl.scenario.section_base import Strict

if TYPE_CHECKING:  # torch is imported only when a model really trains (not in surrogate runs)
    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State, TrainResult

__all__ = ["FedAvg", "FedAvgSettings"]


class FedAvgSettings(Strict):
    """``[method.fedavg]`` (and the base of its family's tables).

    ``cpu_policy``: ``"max"`` runs the CPU at f_max; ``"min_energy"`` at the lowest frequency that still meets
    the deadline (f_min without a deadline).
    """

    cpu_policy: Literal["max", "min_energy"] = "max"


def dense_update(device: int, res: TrainResult) -> ClientUpdate:
    """Device ``device``'s trained update sent as float32, weighted by |D_i|."""
    from edgefl.learning.workload import state_bits

    return ClientUpdate(
        device=device, payload=DenseUpdate(res.update), weight=float(res.n_samples),
        bits=float(state_bits(res.update)), flops=res.flops, steps=res.steps, train_loss=res.train_loss,
    )  # fmt: skip


class FedAvg(Method):
    """Full model, uncompressed float32 update, CPU at ``f_max`` (``cpu_policy="max"``) or at the lowest
    frequency that still meets the deadline (``"min_energy"``, f_min without a deadline).

    A selected device whose planned energy exceeds its per-round budget E_max sits the round out
    (reason recorded); FedAvg has no knob to make it cheaper. Under ``channel.allocation`` other than ``"equal"``
    it runs at the allocated CPU frequency, bandwidth and power (``cpu_policy`` is then not used).
    """

    name = "fedavg"
    Settings = FedAvgSettings
    needs = Needs(surrogate=True)
    plans_each_device_alone = True  # every step of plan_round is per device (local_work must stay so too)
    takes_allocation = "all"  # under channel.allocation it runs at the allocated frequency, not cpu_policy's

    @classmethod
    def plans_to_t_max(cls, settings: FedAvgSettings) -> bool:
        """Only ``cpu_policy = "min_energy"`` stretches the compute to T_max less the upload; at ``"max"`` the
        plan is the same whatever the deadline."""
        return settings.cpu_policy == "min_energy"

    def local_work(self, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(SGD steps, samples processed) of each device's local training in a round, by the trainer's rule
        (the scenario's epochs or steps); shapes of ``dev``. A method that changes the local work overrides it."""
        wl = self.workload
        return steps_per_round(wl.train_config, wl.n_samples[dev]), wl.samples_per_round(dev)

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        dev, costs = ctx.selected, ctx.costs
        wl = self.workload
        width = self.setup.width
        steps, samples = self.local_work(dev)
        cycles = costs.cycles(dev, wl.flops_per_sample(width) * samples)
        bits = float(wl.update_bits)
        t_com, e_com = costs.upload(dev, bits=bits, rate_bps=ctx.rate_bps[dev])
        policy = self.settings.cpu_policy
        if ctx.cpu_hz is not None:  # the round's allocation sets the frequency (channel.allocation)
            f = ctx.cpu_hz[dev]
        elif policy == "min_energy" and ctx.t_budget_s is not None:
            f, _ = costs.deadline_frequency_hz(dev, cycles, ctx.t_budget_s - t_com)
        else:
            f = costs.free_frequency_hz(dev, policy)
        t_cmp, e_cmp = costs.compute(dev, cycles=cycles, steps=steps, f_hz=f)
        e_total = e_cmp + e_com
        ok = e_total <= ctx.e_max_j[dev]
        jobs = JobTable.build(
            dev[ok], cpu_hz=f[ok], width=width, local_steps=steps[ok], bits_planned=bits,
            t_cmp_planned_s=t_cmp[ok], t_com_planned_s=t_com[ok], e_cmp_planned_j=e_cmp[ok], e_com_planned_j=e_com[ok],
        )  # fmt: skip
        reasons = [f"energy: needs {e:.4g} J > E_max {b:.4g} J" for e, b in zip(e_total[~ok], ctx.e_max_j[dev][~ok])]
        return RoundPlan(jobs, dev[~ok], np.array(reasons, dtype=object))

    def client_update(self, job: TrainJob, *, trainer: Training) -> ClientUpdate:
        return self.trained_update(job, trainer=trainer)

    def local_training(self, job: TrainJob, *, trainer: Training) -> LocalTraining:
        """The job's download trained at its width with the scenario's epochs/steps; ``auto`` (vectorised by
        ``train.vectorise = "auto"`` where the model allows) only for FedAvg's own device side."""
        return LocalTraining(start=job.start, width=job.job.width, auto=type(self).client_update is FedAvg.client_update)

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        return dense_update(job.device, res)

    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        from edgefl.methods.aggregate import fedavg_step

        return fedavg_step(state, [u.payload.update for u in updates], [u.weight for u in updates])
